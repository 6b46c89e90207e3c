// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The cases every CUDA compressor of cuda/compressors.cuh shares: steady-state calls
//! allocate nothing through the backend, and bad input (null pointers, the 32-bit index limit,
//! momentum, options, unsupported nonfinite policies) is rejected naming the value. Over the
//! harness of compressor_cases.hpp, compiled for both backends: compressors_test.cpp
//! (host_backend) and device_backend_test.cu.
#pragma once

#include <gradcomp/cuda/compressors.cuh>

#include <cstddef>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("steady-state calls allocate nothing"), "[cuda][workspace]") {
  // buffers grow on the first calls that need them (a path's first use); once every path the
  // input takes has run, further calls allocate nothing through the backend
  const std::size_t n = 150000;
  gradcomp::cuda::basic_exact_top_k<backend> e(0.01);
  gradcomp::cuda::basic_sampled_threshold<backend> s(0.01);
  gradcomp::cuda::basic_gaussian_threshold<backend> g(0.01);
  gradcomp::cuda::basic_reused_threshold<backend> u({.density = 0.01, .interval = 3});
  const auto x = harness::upload(make_values(distribution::normal, n, 5));
  message m;
  auto round = [&] {
    e.compress(harness::pointer(x), n, m);
    s.compress(harness::pointer(x), n, m);
    g.compress(harness::pointer(x), n, m);
    u.compress(harness::pointer(x), n, m);
  };
  for (int warm = 0; warm < 3; ++warm) {
    round();
  }
  const std::size_t before = backend::allocation_count();
  for (int call = 0; call < 6; ++call) {
    round();
  }
  CHECK(backend::allocation_count() == before);
  CHECK(before > 0);
}

TEST_CASE(GRADCOMP_CUDA_CASE("bad input is rejected with the value named"), "[cuda][errors]") {
  gradcomp::cuda::basic_exact_top_k<backend> d(0.01);
  message m;
  std::vector<float> x(10, 1.0f);
  auto dx = harness::upload(x);
  CHECK_THROWS_WITH(d.compress(nullptr, 10, m), Catch::Contains("null pointer with 10"));
  CHECK_THROWS_WITH(d.compress(harness::pointer(dx), std::size_t{1} << 33, m),
                    Catch::Contains("32-bit index limit"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(harness::pointer(dx), harness::pointer(dx),
                                                   harness::pointer(dx), 10, 1.0f, m),
                    Catch::Contains("momentum 1 is outside [0, 1)"));
  CHECK_THROWS_AS(gradcomp::cuda::basic_exact_top_k<backend>(0.0), std::invalid_argument);
  CHECK_THROWS_AS(gradcomp::cuda::basic_sampled_threshold<backend>(
                      sampled_threshold_options{.sample_fraction = 2.0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(gradcomp::cuda::basic_reused_threshold<backend>({.interval = 0}),
                  std::invalid_argument);
  // no device check for non-finite values: refused, not silently ignored
  CHECK_THROWS_WITH(gradcomp::cuda::basic_exact_top_k<backend>(
                        exact_top_k_options{.nonfinite = nonfinite_policy::raise}),
                    Catch::Contains("nonfinite policy raise is not supported"));
  CHECK_THROWS_WITH(
      gradcomp::cuda::basic_reused_threshold<backend>({.nonfinite = nonfinite_policy::skip_step}),
      Catch::Contains("nonfinite policy skip_step is not supported"));
  // an empty gradient: an empty message of dense length 0
  d.compress(nullptr, 0, m);
  CHECK(m.nnz() == 0);
  CHECK(m.dense_length_elements() == 0);
}

} // namespace gradcomp::test::cuda_cases
