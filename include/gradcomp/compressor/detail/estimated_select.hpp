// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The select-with-an-estimated-threshold flow shared by every estimating compressor:
//! filter with the estimate, re-adjust a bounded number of times, and fall back to exact top-k
//! when the count leaves the guard band [k/c, c k].
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/selection.hpp>

#include <cmath>
#include <cstddef>

namespace gradcomp::detail {

struct estimate_policy {
  double guard_factor = 2.0;      //!< c: accept counts in [k/c, c k].
  unsigned max_adjust_rounds = 0; //!< re-filter passes before falling back.
  double raise_factor = 1.3;      //!< threshold multiplier when too many were selected.
  double lower_factor = 0.7;      //!< threshold multiplier when too few were selected.
  unsigned threads = 0;
};

//! The guard's re-adjustment (DGC): the threshold of `key` selected `count` values outside the
//! band [k/c, c k]; up to policy.max_adjust_rounds times, scale it (x raise_factor when too
//! many, x lower_factor when too few) and recount with `count_at(key)` (one counting pass each,
//! counted in stats.adjust_rounds). Returns true, with `key` the accepted key, as soon as a count
//! lands in the band; false when none did. Shared by the host and the CUDA selections.
template <class CountAt>
bool adjust_into_guard_band(std::uint32_t& key,
                            std::size_t count,
                            std::size_t k,
                            const estimate_policy& policy,
                            selection_stats& stats,
                            CountAt&& count_at) {
  double t = static_cast<double>(key_magnitude(key));
  for (unsigned round = 0; round < policy.max_adjust_rounds; ++round) {
    t = count > k ? (t > 0 ? t * policy.raise_factor : static_cast<double>(key_magnitude(1)))
                  : t * policy.lower_factor;
    key = key_at_least(static_cast<float>(t));
    count = count_at(key);
    ++stats.adjust_rounds;
    if (in_guard_band(count, k, policy.guard_factor)) {
      return true;
    }
  }
  return false;
}

//! Selects from the n values of `src` with magnitude threshold `threshold`. When `first_pass`,
//! the filter is fused into the source's first pass. Fills stats.threshold / fallback / exact /
//! adjust_rounds; returns the exact threshold key when a fallback ran (else the accepted key).
template <class Source>
std::uint32_t estimated_select(const Source& src,
                               bool first_pass,
                               std::size_t n,
                               std::size_t k,
                               float threshold,
                               const estimate_policy& policy,
                               selection_workspace& ws,
                               sparse_message& out,
                               selection_stats& stats) {
  const std::size_t cap = guard_capacity(k, policy.guard_factor);
  std::uint32_t key = key_at_least(threshold);
  std::size_t count = threshold_select(src, first_pass, n, key, cap, policy.threads, ws, out);
  if (!in_guard_band(count, k, policy.guard_factor)) {
    const float* x = src.materialized();
    const bool accepted =
        adjust_into_guard_band(key, count, k, policy, stats, [&](std::uint32_t candidate) {
          return count_at_least(x, n, candidate, policy.threads, ws);
        });
    if (accepted) {
      threshold_select(src, false, n, key, cap, policy.threads, ws, out);
    } else {
      key = exact_top_k_select(src, false, n, k, policy.threads, ws, out);
      stats.fallback = true;
      stats.exact = true;
    }
  }
  stats.threshold = key_magnitude(key);
  return key;
}

} // namespace gradcomp::detail
