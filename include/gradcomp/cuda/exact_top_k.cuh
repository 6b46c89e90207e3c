// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::exact_top_k: the k largest magnitudes of a gradient in device memory,
//! exactly, with the host compressor's result.
#pragma once

#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/detail/compressor_base.cuh>
#include <gradcomp/cuda/detail/select.cuh>

#include <cstddef>
#include <cstdint>

namespace gradcomp::cuda {

//! @brief Exact top-k by magnitude on Backend's memory (S1 Algorithm 1; k = ceil(density x n)
//! clamped to [1, n]); the message equals gradcomp::exact_top_k's bit for bit: k pairs,
//! ascending indices, ties at the k-th magnitude to the lower index, NaN above infinity.
//!
//! Algorithm (no device top-k exists in CCCL 3.0): radix select on the 31 magnitude bits. For
//! n >= 65536 and k <= n/8, a strided sample of 8192 values (radix-refined, no sort) gives a
//! lower key that about 2k values exceed; one stable compaction (4n bytes read) gathers them,
//! and two or three histogram passes over the candidates find the exact k-th key; otherwise a
//! histogram of the top 11 key bits (4n), one compaction of that bucket and above (4n), and the
//! refinement. With error feedback add 12n bytes for the accumulation. Work O(n); temporary
//! storage O(k + candidates), reused across calls; a few host round trips (histograms, counts).
//! Wire bytes once encoded (u32 indices, fp32 values): 32 + 8k.
//! Options: gradcomp::exact_top_k_options (`threads` unused).
template <class Backend>
class basic_exact_top_k
    : public detail::compressor_base<basic_exact_top_k<Backend>, exact_top_k_options, Backend> {
  using base = detail::compressor_base<basic_exact_top_k<Backend>, exact_top_k_options, Backend>;

public:
  //! @throws std::invalid_argument if the density is outside (0, 1].
  explicit basic_exact_top_k(exact_top_k_options o = {}) : base(o) {}
  //! Shorthand for `basic_exact_top_k(exact_top_k_options{.density = density})` (the other options
  //! at their defaults). @throws std::invalid_argument if `density` is outside (0, 1].
  explicit basic_exact_top_k(double density)
      : basic_exact_top_k(exact_top_k_options{.density = density}) {}

  //! @private Selection hook of cuda::detail::compressor_base, the CUDA compressors' own CRTP
  //! base (not the host gradcomp::compressor_base, whose hook has another signature): called by
  //! compress(), compress_accumulate() and compress_accumulate_momentum() with n >= 1; writes
  //! the selection into c.indices / c.values and returns its size. Public only for that base;
  //! not part of the API.
  std::size_t run(const detail::call<Backend>& c, selection_stats& stats) {
    detail::materialize(c.ctx, c.src, c.n);
    detail::exact_run(c, stats);
    return stats.k_target;
  }
};

#if defined(__CUDACC__)
//! @brief Exact top-k on CUDA device memory.
using exact_top_k = basic_exact_top_k<device_backend>;
#endif

} // namespace gradcomp::cuda
