// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The case of gradcomp::cuda::basic_reused_threshold (cuda/reused_threshold.cuh):
//! message, residual, stats and call count bit-identical to the host reused_threshold's over two
//! intervals and a guard fallback. Over the harness and helpers of compressor_cases.hpp,
//! compiled for both backends: reused_threshold_test.cpp (host_backend) and
//! device_backend_test.cu.
#pragma once

#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/cuda/reused_threshold.cuh>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("reused threshold equals the host's over two intervals"),
          "[cuda][reused_threshold]") {
  const std::size_t n = 120000;
  const reused_threshold_options o{.density = 0.01, .interval = 5};
  gradcomp::cuda::basic_reused_threshold<backend> d(o);
  gradcomp::reused_threshold h(o);
  std::vector<float> r(n, 0.0f);
  auto dr = harness::upload(r);
  for (std::uint64_t step = 0; step < 11; ++step) {
    // a scale jump at step 7 pushes the reused threshold out of the guard band (fallback)
    const float scale = step == 7 ? 40.0f : 1.0f;
    require_same_as_host(d, h, make_values(distribution::normal, n, step + 3, scale), r, dr);
  }
  CHECK(d.calls() == h.calls());
}

} // namespace gradcomp::test::cuda_cases
