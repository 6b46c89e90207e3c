// SPDX-License-Identifier: Apache-2.0
// The merge strategies on hand-worked cases: the counterexample to the greedy rules
// (docs/planner.md, "A counterexample to the greedy rules"), S1 Algorithm 2, the MG-WFBP rule,
// DDP-style buckets, S4's two segments, and plan() by name.
#include <gradcomp/schedule.hpp>

#include "../common/catch.hpp"

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "../common/schedule_testing.hpp"

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

TEST_CASE("S1 Algorithm 2 keeps a merge only if t_iter strictly drops", "[schedule]") {
  // Communication-bound: every merge saves a 1 s startup, so the scan merges everything.
  const layer_profile p{{{"a", 100, 0.01}, {"b", 100, 0.01}, {"c", 100, 0.01}}, 0.0};
  const cost_model bound = cost_model::affine(1.0, 1e-6);
  CHECK(dlgs_greedy(p, bound) == single(3));
  CHECK(mgwfbp(p, bound) == single(3));
  CHECK(optimal(p, bound) == single(3));
  // Compute-bound, free startup: merging only delays messages, nothing is merged.
  const layer_profile q{{{"a", 100, 1.0}, {"b", 100, 1.0}, {"c", 100, 1.0}}, 0.0};
  const cost_model free_startup = cost_model::affine(0.0, 1e-3);
  CHECK(dlgs_greedy(q, free_startup) == per_layer(3));
  CHECK(mgwfbp(q, free_startup) == per_layer(3));
  CHECK(t_iter_seconds(q, free_startup, optimal(q, free_startup)) ==
        t_iter_seconds(q, free_startup, per_layer(3)));
  // one layer: every strategy gives the single group
  const layer_profile one{{{"only", 5, 1.0}}, 0.5};
  for (const strategy s : all_strategies) {
    CHECK(plan(s, one, bound) == single(1));
  }
}

TEST_CASE("MG-WFBP merges when the wait is below the startup cost", "[schedule]") {
  // Backward order: L (1 element, t_b 1), L-1 (1 element, t_b 1). T = a + 4 beta per element.
  // L's message starts at 1 and ends at 1 + T; L-1 is ready at 2.
  const layer_profile p{{{"L-1", 1, 1.0}, {"L", 1, 1.0}}, 0.0};
  // a = 2 (message ends at 3.x > 2, wait 2 - 1 = 1 < 2): merge
  CHECK(mgwfbp(p, cost_model::affine(2.0, 0.0)) == single(2));
  // a = 0.5 (message ends at 1.5 < 2: finished before L-1 is ready): no merge
  CHECK(mgwfbp(p, cost_model::affine(0.5, 0.0)) == per_layer(2));
  // a = 0.9, beta large (message ends at 1 + 0.9 + 4 = 5.9 > 2, but the wait 1 >= 0.9): no merge
  CHECK(mgwfbp(p, cost_model::affine(0.9, 1.0)) == per_layer(2));
}

TEST_CASE("size_threshold closes a bucket when its fp32 bytes reach the cap", "[schedule]") {
  // forward order numel [10, 20, 30, 40, 50]; backward: 50, 40, 30, 20, 10 elements
  // (200, 160, 120, 80, 40 bytes)
  const layer_profile p{
      {{"a", 10, 0.0}, {"b", 20, 0.0}, {"c", 30, 0.0}, {"d", 40, 0.0}, {"e", 50, 0.0}}, 0.0};
  CHECK(size_threshold(p, 1) == per_layer(5));
  CHECK(size_threshold(p, 160) == grouping{{0, 1}, {1, 2}, {2, 4}, {4, 5}}); // 200|160|200|40
  CHECK(size_threshold(p, 200) == grouping{{0, 1}, {1, 3}, {3, 5}});         // 200|280|120
  CHECK(size_threshold(p, 201) == grouping{{0, 2}, {2, 5}});                 // 360|240
  CHECK(size_threshold(p, 10000) == single(5));
  CHECK(size_threshold(p) == single(5)); // 25 MiB
  CHECK_THROWS_AS(size_threshold(p, 0), std::invalid_argument);
  const cost_model m = cost_model::affine(1.0, 0.0);
  CHECK(plan(strategy::size_threshold, p, m, {.bucket_bytes = 160}) ==
        grouping{{0, 1}, {1, 2}, {2, 4}, {4, 5}});
}

TEST_CASE("two_segment picks the best split point (S4)", "[schedule]") {
  // A big tensor ready first, then small ones in quick succession: the big one goes alone
  // (its message ends at 0.411 s; the rest then takes 0.01 s), any later split delays it.
  const layer_profile p{
      {{"a", 1, 0.001}, {"b", 1, 0.001}, {"c", 1, 0.001}, {"big", 1000000, 0.001}}, 0.0};
  const cost_model m = cost_model::affine(0.01, 1e-7);
  CHECK(two_segment(p, m) == grouping{{0, 1}, {1, 4}});
  const layer_profile one{{{"only", 5, 1.0}}, 0.0};
  CHECK(two_segment(one, m) == single(1));
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
