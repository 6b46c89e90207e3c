// SPDX-License-Identifier: Apache-2.0
// DDP-style buckets (schedule/size_threshold.hpp) on hand-worked cases.
#include <gradcomp/schedule/size_threshold.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <stdexcept>

#include "../common/catch.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_size_threshold_test {

using namespace gradcomp::schedule;

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

} // namespace schedule_size_threshold_test
