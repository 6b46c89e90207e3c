// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::exact_top_k: the k largest magnitudes of a gradient, exactly.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstddef>
#include <string_view>

namespace gradcomp {

//! @brief Options of exact_top_k: the density, the type the values are sent as, the threads.
struct exact_top_k_options {
  double density = 0.01;                //!< k / n, in (0, 1].
  value_type values = value_type::fp32; //!< type the sent values are rounded to.
  unsigned threads = 0;                 //!< threads to use; 0 = all hardware threads.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief Exact top-k by magnitude (S1 Algorithm 1, the LAGS baseline; DGC's reference
//! selection), k = ceil(density x n) clamped to [1, n].
//!
//! Output: k values with strictly ascending indices. Ties at the k-th magnitude are broken by
//! lower index, so the result is fully deterministic (and equals sort by (|v| desc, index asc)
//! then truncate to k). NaN counts as larger than infinity.
//! Algorithm: radix select on the 31 magnitude bits: a parallel histogram of the top 11 bits,
//! one pass that emits the elements above the k-th bucket and gathers the bucket's candidates,
//! then two small histogram passes over the candidates. O(n) work, two reads of the input (the
//! first fused with the error-feedback accumulation), O(k + bucket) extra memory reused across
//! calls. Wire bytes (u32 indices, fp32 values): 32 + 8k.
class exact_top_k : public compressor_base<exact_top_k, exact_top_k_options> {
public:
  //! The name its checkpoint state carries (compressor_base::save_state): the density and the
  //! values type; no state between calls besides them.
  static constexpr std::string_view state_name = "exact_top_k";
  //! @throws std::invalid_argument if the density is outside (0, 1].
  explicit exact_top_k(options o = {}) : compressor_base(o) {}
  //! Shorthand for `exact_top_k(options{.density = density})` (fp32 values, all hardware
  //! threads).
  //! @throws std::invalid_argument if `density` is outside (0, 1].
  explicit exact_top_k(double density) : exact_top_k(options{.density = density}) {}

  //! @brief compressor_base's selection hook: the exact top-`stats.k_target` by magnitude
  //! (ties by lower index) into `out`, ascending indices, by radix select (the first pass
  //! materializes the source). Sets `stats.exact` and `stats.threshold` (the k-th largest
  //! magnitude). O(n) work over `threads`; deterministic whatever the thread count; throws only
  //! std::bad_alloc (its workspace is kept and reused across calls).
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    stats.exact = true;
    stats.threshold = detail::key_magnitude(
        detail::exact_top_k_select(src, true, n, stats.k_target, options_.threads, ws_, out));
  }

private:
  detail::selection_workspace ws_;
};

static_assert(momentum_compressor<exact_top_k>);
static_assert(density_compressor<exact_top_k>);

} // namespace gradcomp
