// SPDX-License-Identifier: Apache-2.0
// The strategies side by side and by name (schedule/strategy.hpp): the counterexample to the
// greedy rules (docs/planner.md, "A counterexample to the greedy rules"), where the greedy rules
// reach 42 and the optimum 39, and plan() by name.
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "../common/catch.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_strategy_test {

using namespace gradcomp::schedule;

namespace {

// docs/planner.md, "A counterexample to the greedy rules", in backward order (last layer first):
// t_b = [1, 3, 10], sizes [7, 1, 10], T(m) = 10 + m. In forward order (this profile's order) that
// is t_b = [10, 3, 1], numel [10, 1, 7]; T(m) = 10 + m is alpha = 10 s and beta = 0.25 s per byte
// (4 bytes per element); t_f = 0. Positions: 0 = L (7 elements), 1 = L-1 (1), 2 = L-2 (10).
layer_profile counterexample() {
  return {{{"L-2", 10, 10.0}, {"L-1", 1, 3.0}, {"L", 7, 1.0}}, 0.0};
}

} // namespace

// docs/planner.md, "A counterexample to the greedy rules".
TEST_CASE("the greedy rules' counterexample: greedy 42, optimum 39", "[schedule]") {
  for (const auto placement :
       {compression_placement::off_compute_stream, compression_placement::on_compute_stream}) {
    const cost_model m = cost_model::affine(10.0, 0.25, std::nullopt, std::nullopt, placement);
    const layer_profile p = counterexample();
    // both greedy rules merge {L, L-1} and reach 42
    CHECK(mgwfbp(p, m) == grouping{{0, 2}, {2, 3}});
    CHECK(dlgs_greedy(p, m) == grouping{{0, 2}, {2, 3}});
    CHECK(t_iter_seconds(p, m, mgwfbp(p, m)) == 42.0);
    // the optimum keeps L alone and merges {L-1, L-2}
    CHECK(optimal(p, m) == grouping{{0, 1}, {1, 3}});
    CHECK(t_iter_seconds(p, m, optimal(p, m)) == 39.0);
    CHECK(two_segment(p, m) == grouping{{0, 1}, {1, 3}});
    CHECK(t_iter_seconds(p, m, per_layer(3)) == 49.0);
    CHECK(t_iter_seconds(p, m, single(3)) == 42.0);
  }
}

TEST_CASE("strategies by name", "[schedule]") {
  CHECK(all_strategies.size() == 7);
  for (const strategy s : all_strategies) {
    CHECK(strategy_from_name(name(s)) == s);
  }
  CHECK(name(strategy::dlgs_greedy) == std::string_view("dlgs_greedy"));
  CHECK(name(strategy::optimal) == std::string_view("optimal"));
  CHECK_FALSE(strategy_from_name("greedy").has_value());
  CHECK_THROWS_AS(plan(strategy::optimal, layer_profile{}, cost_model::affine(1, 0)),
                  std::invalid_argument);
  CHECK_THROWS_AS(plan(strategy::per_layer, counterexample(), cost_model{}), std::invalid_argument);
}

} // namespace schedule_strategy_test
