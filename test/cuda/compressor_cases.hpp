// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The CUDA compressors' tests, written once over a harness (which backend, how its
//! vectors are made and read back) and compiled twice: with host_backend by the host compiler
//! (host_backend_test.cpp, runs in CI without a GPU) and with device_backend by nvcc
//! (device_backend_test.cu, runs on a GPU). The reference is the host compressor of the same
//! name (itself tested against sort-and-truncate) and, for exact top-k, sort-and-truncate too.
//!
//! The including file defines `harness` (backend, vector type, upload/download/pointer) and
//! GRADCOMP_CUDA_CASE(name) (the test names' prefix).
#pragma once

#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/compressor/sampled_threshold.hpp>
#include <gradcomp/cuda/compressors.cuh>

#include "../common/catch.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace gradcomp::test::cuda_cases {

using backend = harness::backend;
using message = gradcomp::cuda::basic_device_message<backend>;

//! One compressor call's host-visible results.
struct outcome {
  sparse_message m;
  selection_stats stats;
};

inline sparse_message to_host(const message& dm) {
  sparse_message m;
  dm.copy_to(m);
  return m;
}

//! Runs device compressor `d` and host compressor `h` with error feedback on the same gradient
//! and residual; checks message, residual and stats are bit-identical (a NaN matches any NaN: the
//! sum residual + gradient has the operand's NaN payload on x86 and the canonical one on a GPU).
template <class Device, class Host>
void require_same_as_host(Device& d,
                          Host& h,
                          const std::vector<float>& grad,
                          std::vector<float>& host_residual,
                          typename harness::vector& device_residual) {
  const auto g = harness::upload(grad);
  message dm;
  sparse_message hm;
  const selection_stats ds = d.compress_accumulate(harness::pointer(device_residual),
                                                   harness::pointer(g), grad.size(), dm);
  const selection_stats hs = h.compress_accumulate(host_residual, grad, hm);
  const sparse_message got = to_host(dm);
  CHECK_NOTHROW(got.validate());
  REQUIRE(got.indices == hm.indices);
  REQUIRE(same_bits_or_nan(got.values, hm.values));
  REQUIRE(got.values_type == hm.values_type);
  REQUIRE(same_bits_or_nan(harness::download(device_residual, grad.size()), host_residual));
  CHECK(ds.k_selected == hs.k_selected);
  CHECK(ds.k_target == hs.k_target);
  CHECK(ds.exact == hs.exact);
  CHECK(ds.fallback == hs.fallback);
  CHECK(ds.adjust_rounds == hs.adjust_rounds);
  CHECK(std::bit_cast<std::uint32_t>(ds.threshold) == std::bit_cast<std::uint32_t>(hs.threshold));
}

inline const std::vector<distribution>& all_distributions() {
  static const std::vector<distribution> d = {distribution::normal, distribution::heavy_tailed,
                                              distribution::constant, distribution::tied,
                                              distribution::with_zeros};
  return d;
}

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

template <class Device, class Host>
void check_fitted(Device& d, Host& h, distribution dist, std::size_t n) {
  const std::vector<float> g = make_values(dist, n, n + 17);
  std::vector<float> acc = make_values(distribution::normal, n, n + 18, 0.1f);
  std::vector<float> host_r = acc;
  auto dr = harness::upload(acc);
  for (std::size_t i = 0; i < n; ++i) {
    acc[i] = acc[i] + g[i];
  }
  const auto dg = harness::upload(g);
  message dm;
  sparse_message hm;
  const selection_stats ds =
      d.compress_accumulate(harness::pointer(dr), harness::pointer(dg), n, dm);
  const selection_stats hs = h.compress_accumulate(host_r, g, hm);
  const sparse_message got = to_host(dm);
  REQUIRE_NOTHROW(got.validate());
  // the fit's sums differ from the host's only in rounding: the thresholds agree closely
  CHECK(ds.threshold == Approx(hs.threshold).epsilon(1e-4));
  CHECK(ds.fallback == hs.fallback);
  // the device selection is exactly "every |acc| >= its threshold" (or the exact top-k)
  if (!ds.fallback) {
    const std::uint32_t key = gradcomp::detail::key_at_least(ds.threshold);
    std::vector<std::uint32_t> expected;
    for (std::size_t i = 0; i < n; ++i) {
      if (gradcomp::detail::magnitude_key(acc[i]) >= key) {
        expected.push_back(static_cast<std::uint32_t>(i));
      }
    }
    REQUIRE(got.indices == expected);
  } else {
    REQUIRE(got.indices == reference_top_k(acc, ds.k_target));
  }
  // conservation: sent + residual == acc, bit for bit
  std::vector<float> rebuilt = harness::download(dr, n);
  for (std::size_t j = 0; j < got.nnz(); ++j) {
    REQUIRE(rebuilt[got.indices[j]] == 0.0f);
    rebuilt[got.indices[j]] = got.values[j];
  }
  REQUIRE(same_bits(rebuilt, acc));
}

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
