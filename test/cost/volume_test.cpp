// SPDX-License-Identifier: Apache-2.0
// S5's communication volumes and S2's fully connected layer rule (cost/volume.hpp) against
// hand-computed values.
#include <gradcomp/cost/volume.hpp>

#include <array>

#include "../common/catch.hpp"

namespace cost_volume_test {

using namespace gradcomp::cost;

TEST_CASE("S5 volumes and S2's fully connected layer rule", "[cost]") {
  CHECK(data_parallel_all_to_all_bytes(1e6, 4, 4) == 4.8e7);
  CHECK(data_parallel_ring_bytes_per_device(1e6, 4, 4) == Approx(6e6));
  const std::array<double, 2> outs{512, 10};
  CHECK(tensor_parallel_bytes(outs, 4, 2) == Approx((512 + 10) * 4 * 2));
  CHECK(pipeline_parallel_bytes(outs, 2) == Approx(1044));
  // VGG-16 FC1: K = 25088, N = 4096
  CHECK(fc_data_parallel_values(25088, 4096) == 25088.0 * 4096 + 4096);
  CHECK(fc_model_parallel_values(32, 25088, 4096, 2) == 3.0 * 32 * 25088 * 2 + 2.0 * 32 * 4096 * 2);
  // threshold (K+1)N/(3K+2N) = 25089*4096/(75264+8192) ~ 1231: M P = 64 prefers model parallel
  CHECK(fc_prefer_model_parallel(32, 25088, 4096, 2));
  CHECK_FALSE(fc_prefer_model_parallel(1024, 25088, 4096, 2));
  // a small FC layer (FC3 of VGG: 4096 -> 1000): threshold ~ 305, so M P = 512 prefers data
  CHECK_FALSE(fc_prefer_model_parallel(128, 4096, 1000, 4));
}

} // namespace cost_volume_test
