// SPDX-License-Identifier: Apache-2.0
// S1 Algorithm 2 (schedule/dlgs_greedy.hpp) on hand-worked cases, and against the algorithm as
// its doc comment states it, re-run here on whole groupings with the public simulator.
#include <gradcomp/schedule/dlgs_greedy.hpp>
#include <gradcomp/schedule/mgwfbp.hpp>
#include <gradcomp/schedule/optimal.hpp>
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "../common/catch.hpp"
#include "../common/random_schedule.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_dlgs_greedy_test {

using namespace gradcomp::schedule;

namespace {

// S1 Algorithm 2 as its doc comment states it, on whole groupings: start from per_layer; for
// backward positions q = 0 .. L-2, tentatively let position q + 1 join the group that holds q,
// simulate the whole iteration (the later layers alone), keep the merge if t_iter strictly drops.
grouping reference_dlgs_greedy(const layer_profile& profile, const cost_model& model) {
  const std::size_t n = profile.size();
  std::vector<std::size_t> closed; // ends of the groups decided so far
  const auto open_group_until = [&](std::size_t open_end) {
    grouping g;
    std::size_t begin = 0;
    for (const std::size_t end : closed) {
      g.push_back({begin, end});
      begin = end;
    }
    g.push_back({begin, open_end});
    for (std::size_t q = open_end; q < n; ++q) {
      g.push_back({q, q + 1});
    }
    return g;
  };
  double current = t_iter_seconds(profile, model, per_layer(n));
  for (std::size_t q = 0; q + 1 < n; ++q) {
    const double t = t_iter_seconds(profile, model, open_group_until(q + 2));
    if (t < current) {
      current = t;
    } else {
      closed.push_back(q + 1);
    }
  }
  closed.push_back(n);
  return grouping_from_ends(closed, n);
}

} // namespace

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

TEST_CASE("dlgs_greedy is S1 Algorithm 2 re-run on groupings, between per_layer and the optimum",
          "[schedule]") {
  gradcomp::test::for_each_random_schedule_instance(
      20, [](const gradcomp::test::schedule_instance& x, std::size_t layers, int trial) {
        CAPTURE(layers, trial);
        const grouping g = dlgs_greedy(x.profile, x.model);
        REQUIRE(g == reference_dlgs_greedy(x.profile, x.model));
        const double t = t_iter_seconds(x.profile, x.model, g);
        CHECK(t <= t_iter_seconds(x.profile, x.model, per_layer(layers)));
        CHECK(t >= t_iter_seconds(x.profile, x.model, optimal(x.profile, x.model)));
      });
}

} // namespace schedule_dlgs_greedy_test
