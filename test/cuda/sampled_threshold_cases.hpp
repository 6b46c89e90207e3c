// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The case of gradcomp::cuda::basic_sampled_threshold (cuda/sampled_threshold.cuh):
//! message, residual and stats bit-identical to the host sampled_threshold's over a call
//! sequence. Over the harness and helpers of compressor_cases.hpp, compiled for both backends:
//! sampled_threshold_test.cpp (host_backend) and device_backend_test.cu.
#pragma once

#include <gradcomp/compressor/sampled_threshold.hpp>
#include <gradcomp/cuda/sampled_threshold.cuh>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("sampled threshold equals the host's over a call sequence"),
          "[cuda][sampled_threshold]") {
  for (const std::size_t n : {3000u, 250000u}) {
    for (const distribution dist :
         {distribution::normal, distribution::heavy_tailed, distribution::tied}) {
      CAPTURE(n, name(dist));
      const sampled_threshold_options o{.density = 0.01, .seed = 42};
      gradcomp::cuda::basic_sampled_threshold<backend> d(o);
      gradcomp::sampled_threshold h(o);
      std::vector<float> r(n, 0.0f);
      auto dr = harness::upload(r);
      for (std::uint64_t step = 0; step < 4; ++step) {
        require_same_as_host(d, h, make_values(dist, n, 7 * step + 1), r, dr);
      }
    }
  }
}

} // namespace gradcomp::test::cuda_cases
