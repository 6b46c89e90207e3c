// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The cases of the batched CUDA compressor gradcomp::cuda::basic_batched_exact_top_k
//! (cuda/batched_top_k.cuh), over the harness and helpers of compressor_cases.hpp and
//! batched_cases.hpp, compiled for both backends: batched_top_k_test.cpp (host_backend) and
//! device_backend_test.cu. The reference is one host exact_top_k with error_feedback per layer
//! and sort-and-truncate.
#pragma once

#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/batched_top_k.cuh>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "batched_cases.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

TEST_CASE(GRADCOMP_CUDA_CASE("batched top-k equals the host compressor layer by layer"),
          "[cuda][batched]") {
  for (const auto& sizes : batch_shapes()) {
    for (const double density : {0.001, 0.01, 0.1, 0.5, 1.0}) {
      CAPTURE(sizes.size(), density);
      require_batch_same_as_host(sizes, {.density = density});
    }
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched top-k takes a layer of the size limit"), "[cuda][batched]") {
  require_batch_same_as_host({3, gradcomp::cuda::max_batched_layer_elements, 9}, {.density = 0.01},
                             0.0, 2);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched fp16 and bf16 values: rounded as on the host"),
          "[cuda][batched]") {
  for (const value_type t : {value_type::fp16, value_type::bf16}) {
    CAPTURE(static_cast<int>(t));
    require_batch_same_as_host({20000, 1, 333, 0, 4096}, {.density = 0.05, .values = t}, 0.0, 3, 5,
                               3e4f);
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched momentum correction equals the host's"), "[cuda][batched]") {
  require_batch_same_as_host({9000, 1, 0, 517, 30000}, {.density = 0.01}, 0.9, 3);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched read-only compression, NaN and a changing layout"),
          "[cuda][batched]") {
  std::vector<float> x = make_values(distribution::normal, 6000, 77);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[2500] = -std::numeric_limits<float>::infinity();
  const auto dx = harness::upload(x);
  batched_top_k d(0.002);
  gradcomp::exact_top_k h(0.002);
  batched_message dm;
  std::vector<sparse_message> got;
  std::vector<selection_stats> got_stats;
  // the same buffer cut three ways, back and forth (the device layout is re-uploaded)
  const std::vector<std::vector<std::size_t>> layouts = {
      {0, 100, 2600, 6000}, {0, 3000, 3000, 5999}, {0, 100, 2600, 6000}};
  for (const auto& offsets : layouts) {
    CAPTURE(offsets);
    d.compress(harness::pointer(dx), x.size(), offsets, dm);
    dm.copy_to(got, got_stats);
    REQUIRE(got.size() == offsets.size() - 1);
    for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
      CAPTURE(l);
      sparse_message want;
      const selection_stats want_stats = h.compress(layer_of(x, offsets, l), want);
      require_layer_equal(got[l], got_stats[l], want, want_stats);
    }
  }
  REQUIRE(same_bits(harness::download(dx, x.size()), x)); // read only
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched steady-state calls allocate nothing"),
          "[cuda][batched][workspace]") {
  const std::vector<std::size_t> offsets = offsets_of({5000, 1, 300, 12000, 0, 64});
  const std::size_t n = offsets.back();
  batched_top_k d(0.01);
  const auto g = harness::upload(make_values(distribution::normal, n, 5));
  auto r = harness::upload(std::vector<float>(n, 0.0f));
  batched_message dm;
  std::vector<sparse_message> got;
  for (int warm = 0; warm < 3; ++warm) {
    d.compress_accumulate(harness::pointer(r), harness::pointer(g), n, offsets, dm);
    dm.copy_to(got);
  }
  const std::size_t before = backend::allocation_count();
  for (int call = 0; call < 6; ++call) {
    d.compress_accumulate(harness::pointer(r), harness::pointer(g), n, offsets, dm);
    dm.copy_to(got);
  }
  CHECK(backend::allocation_count() == before);
  CHECK(before > 0);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched bad input is rejected with the value and limit named"),
          "[cuda][batched][errors]") {
  batched_top_k d(0.01);
  batched_message m;
  std::vector<float> x(20, 1.0f);
  auto dx = harness::upload(x);
  float* p = harness::pointer(dx);
  using offsets = std::vector<std::size_t>;
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{}, m), Catch::Contains("layer offsets are empty"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{2, 10}, m),
                    Catch::Contains("layer offset 0 is 2, not 0"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{0, 10, 4}, m),
                    Catch::Contains("layer offset 2 is 4, below offset 1 (10)"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{0, 10, 21}, m),
                    Catch::Contains("layer offset 2 is 21, beyond the buffer of 20 elements"));
  const std::size_t big = gradcomp::cuda::max_batched_layer_elements + 1;
  CHECK_THROWS_WITH(
      d.compress(p, big + 1, offsets{0, 1, big + 1}, m),
      Catch::Contains("layer 1 has 262145 elements, above the batch limit of 262144"));
  CHECK_THROWS_WITH(d.compress(nullptr, 20, offsets{0, 20}, m),
                    Catch::Contains("gradient is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate(nullptr, p, 20, offsets{0, 20}, m),
                    Catch::Contains("residual is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(p, nullptr, p, 20, offsets{0, 20}, 0.5f, m),
                    Catch::Contains("velocity is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(p, p, p, 20, offsets{0, 20}, 1.5f, m),
                    Catch::Contains("momentum 1.5 is outside [0, 1)"));
  CHECK_THROWS_WITH(d.compress(p, std::size_t{1} << 33, offsets{0, 20}, m),
                    Catch::Contains("32-bit index limit"));
  CHECK_THROWS_AS(batched_top_k(0.0), std::invalid_argument);
  CHECK_THROWS_AS(batched_top_k(1.5), std::invalid_argument);
  CHECK_THROWS_WITH(batched_top_k(exact_top_k_options{.nonfinite = nonfinite_policy::raise}),
                    Catch::Contains("nonfinite policy raise is not supported"));
  // a rejected call leaves the object usable, and an empty batch is an empty message
  d.compress(p, 20, offsets{0}, m);
  CHECK(m.layer_count() == 0);
  CHECK(m.nnz() == 0);
  d.compress(p, 20, offsets{0, 20}, m);
  CHECK(m.nnz() == 1);
}

} // namespace gradcomp::test::cuda_cases
