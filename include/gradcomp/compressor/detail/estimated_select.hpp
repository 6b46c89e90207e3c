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
  const auto cap =
      static_cast<std::size_t>(std::floor(policy.guard_factor * static_cast<double>(k)));
  std::uint32_t key = key_at_least(threshold);
  std::size_t count = threshold_select(src, first_pass, n, key, cap, policy.threads, ws, out);
  if (!in_guard_band(count, k, policy.guard_factor)) {
    const float* x = src.materialized();
    double t = static_cast<double>(key_magnitude(key));
    bool accepted = false;
    for (unsigned round = 0; round < policy.max_adjust_rounds && !accepted; ++round) {
      t = count > k ? (t > 0 ? t * policy.raise_factor : static_cast<double>(key_magnitude(1)))
                    : t * policy.lower_factor;
      key = key_at_least(static_cast<float>(t));
      count = count_at_least(x, n, key, policy.threads, ws);
      ++stats.adjust_rounds;
      accepted = in_guard_band(count, k, policy.guard_factor);
    }
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
