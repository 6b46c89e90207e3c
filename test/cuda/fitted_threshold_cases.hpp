// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The case of gradcomp::cuda::basic_gaussian_threshold and basic_lognormal_threshold
//! (cuda/fitted_threshold.cuh): the host's threshold to 1e-4, the exact filter at it, sent +
//! residual == the accumulation bit for bit (check_fitted, compressor_cases.hpp). Compiled for
//! both backends: fitted_threshold_test.cpp (host_backend) and device_backend_test.cu.
#pragma once

#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/cuda/fitted_threshold.cuh>

#include <cstddef>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("Gaussian and lognormal thresholds: host's threshold, exact filter"),
          "[cuda][fitted_threshold]") {
  for (const std::size_t n : {5000u, 200000u}) {
    for (const distribution dist :
         {distribution::normal, distribution::heavy_tailed, distribution::with_zeros}) {
      CAPTURE(n, name(dist));
      gradcomp::cuda::basic_gaussian_threshold<backend> dg(0.01);
      gaussian_threshold hg(0.01);
      check_fitted(dg, hg, dist, n);
      gradcomp::cuda::basic_lognormal_threshold<backend> dl(0.01);
      lognormal_threshold hl(0.01);
      check_fitted(dl, hl, dist, n);
    }
  }
}

} // namespace gradcomp::test::cuda_cases
