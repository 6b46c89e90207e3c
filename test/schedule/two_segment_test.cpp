// SPDX-License-Identifier: Apache-2.0
// S4's two segments (schedule/two_segment.hpp) on a hand-worked case, and against every split
// point evaluated here with the public simulator.
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/two_segment.hpp>

#include <cstddef>
#include <cstdint>
#include <random>

#include "../common/catch.hpp"
#include "../common/random_schedule.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_two_segment_test {

using namespace gradcomp::schedule;

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

TEST_CASE("two_segment is the first split point of least simulated t_iter", "[schedule]") {
  gradcomp::test::for_each_random_schedule_instance(
      22, [](const gradcomp::test::schedule_instance& x, std::size_t layers, int trial) {
        CAPTURE(layers, trial);
        const grouping g = two_segment(x.profile, x.model);
        if (layers == 1) {
          CHECK(g == single(1));
          return;
        }
        // every split point k in [1, L-1], the first of the least t_iter on ties
        std::size_t best = 1;
        double best_t = t_iter_seconds(x.profile, x.model, grouping{{0, 1}, {1, layers}});
        for (std::size_t k = 2; k < layers; ++k) {
          const double t = t_iter_seconds(x.profile, x.model, grouping{{0, k}, {k, layers}});
          if (t < best_t) {
            best_t = t;
            best = k;
          }
        }
        CHECK(g == grouping{{0, best}, {best, layers}});
      });
}

} // namespace schedule_two_segment_test
