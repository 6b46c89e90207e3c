// SPDX-License-Identifier: Apache-2.0
// The grouping policies (pipeline/grouping_policy.hpp): the concepts take only opted-in types;
// fixed_grouping gives its grouping or one group per layer; planned_grouping plans with
// schedule::plan on the profile it is given (replan() with the measured backward times instead),
// names a count mismatch, and predicts an iteration as eqs. 2-7 worked by hand.
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"

namespace pipeline_grouping_policy_test {

using namespace gradcomp;
using pipeline_policy::fixed_grouping;
using pipeline_policy::planned_grouping;

namespace {

// A grouping policy's member without the opt-in tag.
struct untagged_grouping {
  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    return schedule::per_layer(numel.size());
  }
};

} // namespace

static_assert(!pipeline_policy::grouping_policy<untagged_grouping>);
static_assert(pipeline_policy::grouping_policy<pipeline_policy::fixed_grouping>);
static_assert(!pipeline_policy::grouping_policy<int>);
static_assert(pipeline_policy::replanning_policy<planned_grouping>);
static_assert(!pipeline_policy::replanning_policy<pipeline_policy::fixed_grouping>);
static_assert(!pipeline_policy::replanning_policy<int>);

TEST_CASE("fixed_grouping: its grouping as given, one group per layer when empty",
          "[pipeline][grouping]") {
  const std::vector<std::size_t> numel{5, 6, 7};
  CHECK(fixed_grouping{}.groups(numel) == schedule::grouping{{0, 1}, {1, 2}, {2, 3}});
  const schedule::grouping two{{0, 2}, {2, 3}};
  CHECK(fixed_grouping{two}.groups(numel) == two);
}

TEST_CASE("planned_grouping: schedule::plan on its profile, replan on the measured one",
          "[pipeline][grouping]") {
  const std::vector<std::size_t> numel{300, 17, 1000, 1, 64};
  planned_grouping planner;
  planner.strategy = schedule::strategy::optimal;
  planner.model = schedule::cost_model::affine(1e-3, 1e-6);
  planner.forward_seconds = 2e-3;
  planner.replan_after = 4;
  CHECK(planner.warmup_iterations() == 4);
  // the reference profiles, built by hand: no backward time, then the measured times
  const auto profile = [&](const std::vector<double>& seconds) {
    schedule::layer_profile p;
    p.forward_seconds = 2e-3;
    for (std::size_t i = 0; i < numel.size(); ++i) {
      p.layers.push_back({"", numel[i], seconds[i]});
    }
    return p;
  };
  const std::vector<double> measured{2e-3, 3e-4, 6e-3, 5e-5, 4e-3};
  const schedule::grouping initial =
      schedule::plan(schedule::strategy::optimal, profile({0, 0, 0, 0, 0}), planner.model);
  const schedule::grouping replanned =
      schedule::plan(schedule::strategy::optimal, profile(measured), planner.model);
  REQUIRE(initial != replanned); // the measured times matter to the plan
  CHECK(planner.groups(numel) == initial);
  CHECK(planner.replan(numel, measured) == replanned);
  planner.backward_seconds = measured;
  CHECK(planner.groups(numel) == replanned);
  // the counts must match the layers
  const std::vector<double> two{1e-3, 1e-3};
  CHECK_THROWS_WITH(planner.replan(numel, two),
                    "gradcomp: planned_grouping: 2 measured backward times for 5 layers");
  planner.backward_seconds = two;
  CHECK_THROWS_WITH(planner.groups(numel),
                    "gradcomp: planned_grouping: 2 backward times for 5 layers");
}

TEST_CASE("planned_grouping predicts the iteration of a grouping as hand-worked eqs. 2-7",
          "[pipeline]") {
  // three layers (forward order) of 100, 200, 300 elements with backward 1, 2, 3 ms, forward
  // 4 ms, alpha 1 ms, beta 1 us/B, dense 4-byte messages, no compression.
  planned_grouping planner;
  planner.model = schedule::cost_model::affine(1e-3, 1e-6);
  planner.backward_seconds = {1e-3, 2e-3, 3e-3};
  planner.forward_seconds = 4e-3;
  const std::vector<std::size_t> numel = {100, 200, 300};
  // one group: backward ends at 4 + 3 + 2 + 1 = 10 ms, message of 2400 B: 1 + 2.4 ms
  CHECK(planner.predicted_iteration_seconds(numel, schedule::single(3)) == Approx(13.4e-3));
  // per layer (backward order: 300, 200, 100 elements): ready at 7, 9, 10 ms; messages of
  // 1 + 1.2, 1 + 0.8, 1 + 0.4 ms: 7 -> 9.2, max(9, 9.2) -> 11.0, max(10, 11.0) -> 12.4 ms
  CHECK(planner.predicted_iteration_seconds(numel, schedule::per_layer(3)) == Approx(12.4e-3));
  CHECK_THROWS_AS(planner.predicted_iteration_seconds(numel, schedule::grouping{{0, 2}}),
                  std::invalid_argument);
}

} // namespace pipeline_grouping_policy_test
