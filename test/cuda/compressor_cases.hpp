// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the CUDA compressors' cases share. The cases are written once over a harness
//! (which backend, how its vectors are made and read back), one header per header of
//! gradcomp/cuda/ (exact_top_k_cases.hpp for cuda/exact_top_k.cuh, ...), and compiled twice:
//! with host_backend by the host compiler (test/cuda/<header>_test.cpp, which include
//! host_harness.hpp; they run in CI without a GPU) and with device_backend by nvcc
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

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
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

} // namespace gradcomp::test::cuda_cases
