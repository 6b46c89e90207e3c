// SPDX-License-Identifier: Apache-2.0
// The MG-WFBP rule (schedule/mgwfbp.hpp) on hand-worked cases, and against the rule as its doc
// comment states it, re-run here with the timelines of the public simulator.
#include <gradcomp/schedule/mgwfbp.hpp>
#include <gradcomp/schedule/simulate.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "../common/catch.hpp"
#include "../common/random_schedule.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_mgwfbp_test {

using namespace gradcomp::schedule;

namespace {

// The MG-WFBP rule as its doc comment states it, with the timelines of simulate(): for backward
// positions q = 0 .. L-2, simulate the groups so far, the open group (holding q), position q + 1
// alone and the rest alone; with tau the open group's message start, its end, and r the time
// q + 1's message is ready, q + 1 joins if r < end and (tau > r or r - tau < a), a = T(0 bytes).
grouping reference_mgwfbp(const layer_profile& profile, const cost_model& model) {
  const std::size_t n = profile.size();
  const double startup = model.communication_seconds(model.message.bytes(0));
  std::vector<std::size_t> closed;
  for (std::size_t q = 0; q + 1 < n; ++q) {
    grouping g;
    std::size_t begin = 0;
    for (const std::size_t end : closed) {
      g.push_back({begin, end});
      begin = end;
    }
    g.push_back({begin, q + 1});
    for (std::size_t k = q + 1; k < n; ++k) {
      g.push_back({k, k + 1});
    }
    const timeline t = simulate(profile, model, g);
    const group_times& open = t.groups[closed.size()];
    const double ready = t.groups[closed.size() + 1].compress_end_seconds;
    const double tau = open.communicate_start_seconds;
    const bool merge =
        ready < open.communicate_end_seconds && (tau > ready || ready - tau < startup);
    if (!merge) {
      closed.push_back(q + 1);
    }
  }
  closed.push_back(n);
  return grouping_from_ends(closed, n);
}

} // namespace

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

TEST_CASE("mgwfbp is the MG-WFBP rule re-run on simulated timelines", "[schedule]") {
  int merged = 0;
  gradcomp::test::for_each_random_schedule_instance(
      21, [&merged](const gradcomp::test::schedule_instance& x, std::size_t layers, int trial) {
        CAPTURE(layers, trial);
        const grouping g = mgwfbp(x.profile, x.model);
        REQUIRE(g == reference_mgwfbp(x.profile, x.model));
        merged += g.size() < layers ? 1 : 0;
      });
  CHECK(merged > 0); // the instances exercise the merge branch
}

} // namespace schedule_mgwfbp_test
