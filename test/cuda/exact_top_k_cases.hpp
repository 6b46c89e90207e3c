// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The cases of gradcomp::cuda::basic_exact_top_k (cuda/exact_top_k.cuh): the message
//! equals sort-and-truncate and the host exact_top_k's bit for bit (with error feedback, NaN and
//! infinity, fp16 and bf16 values, momentum correction). Over the harness and helpers of
//! compressor_cases.hpp, compiled for both backends: exact_top_k_test.cpp (host_backend) and
//! device_backend_test.cu.
#pragma once

#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/exact_top_k.cuh>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("exact top-k equals the host compressor and sort-and-truncate"),
          "[cuda][exact_top_k]") {
  // 70000 and 300000 take the sample-guided path at low density, the others the radix path
  for (const std::size_t n : {1u, 7u, 1000u, 4099u, 70000u, 300000u}) {
    for (const double density : {0.001, 0.01, 0.1, 0.3, 1.0}) {
      for (const distribution dist : all_distributions()) {
        CAPTURE(n, density, name(dist));
        const std::vector<float> x = make_values(dist, n, n * 31 + 7);
        gradcomp::cuda::basic_exact_top_k<backend> d(density);
        gradcomp::exact_top_k h(density);
        message dm;
        sparse_message hm;
        const auto gx = harness::upload(x);
        d.compress(harness::pointer(gx), n, dm);
        h.compress(x, hm);
        const sparse_message got = to_host(dm);
        REQUIRE(got.indices == reference_top_k(x, h.target_k(n)));
        REQUIRE(got.indices == hm.indices);
        REQUIRE(same_bits(got.values, hm.values));
        // error feedback from a nonzero residual, twice (the second call sees the residual)
        std::vector<float> r = make_values(distribution::normal, n, n + 5, 0.5f);
        auto dr = harness::upload(r);
        require_same_as_host(d, h, x, r, dr);
        require_same_as_host(d, h, x, r, dr);
      }
    }
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("NaN and infinity are selected first, as on the host"),
          "[cuda][exact_top_k]") {
  std::vector<float> x = make_values(distribution::normal, 5000, 3);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[4000] = -std::numeric_limits<float>::infinity();
  x[4001] = std::numeric_limits<float>::infinity();
  gradcomp::cuda::basic_exact_top_k<backend> d(0.001);
  gradcomp::exact_top_k h(0.001);
  std::vector<float> r(x.size(), 0.0f);
  auto dr = harness::upload(r);
  require_same_as_host(d, h, x, r, dr);
}

TEST_CASE(GRADCOMP_CUDA_CASE("fp16 and bf16 values: rounded as on the host, error in residual"),
          "[cuda][exact_top_k]") {
  for (const value_type t : {value_type::fp16, value_type::bf16}) {
    const std::vector<float> x = make_values(distribution::heavy_tailed, 20000, 11, 3e4f);
    gradcomp::cuda::basic_exact_top_k<backend> d({.density = 0.05, .values = t});
    gradcomp::exact_top_k h({.density = 0.05, .values = t});
    std::vector<float> r(x.size(), 0.0f);
    auto dr = harness::upload(r);
    require_same_as_host(d, h, x, r, dr);
    require_same_as_host(d, h, x, r, dr);
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("momentum correction equals the host's (residual, velocity)"),
          "[cuda][momentum]") {
  const std::size_t n = 90000;
  gradcomp::cuda::basic_exact_top_k<backend> d(0.01);
  gradcomp::exact_top_k h(0.01);
  std::vector<float> r(n, 0.0f);
  std::vector<float> u(n, 0.0f);
  auto dr = harness::upload(r);
  auto du = harness::upload(u);
  for (std::uint64_t step = 0; step < 3; ++step) {
    const std::vector<float> g = make_values(distribution::normal, n, 100 + step);
    const auto dg = harness::upload(g);
    message dm;
    sparse_message hm;
    d.compress_accumulate_momentum(harness::pointer(dr), harness::pointer(du), harness::pointer(dg),
                                   n, 0.9f, dm);
    h.compress_accumulate_momentum(r, u, g, 0.9f, hm);
    const sparse_message got = to_host(dm);
    REQUIRE(got.indices == hm.indices);
    REQUIRE(same_bits(got.values, hm.values));
    REQUIRE(same_bits(harness::download(dr, n), r));
    REQUIRE(same_bits(harness::download(du, n), u));
  }
}

} // namespace gradcomp::test::cuda_cases
