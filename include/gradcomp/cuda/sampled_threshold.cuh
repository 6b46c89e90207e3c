// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::sampled_threshold: DGC's sampled threshold on device memory.
#pragma once

#include <gradcomp/compressor/sampled_threshold.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/detail/compressor_base.cuh>
#include <gradcomp/cuda/detail/select.cuh>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>

namespace gradcomp::cuda {

//! @brief Sampled threshold (DGC, Lin et al. ICLR'18) on Backend's memory, with the host
//! compressor's sample (same seed, same offsets), threshold, guard and fallback: the message
//! equals gradcomp::sampled_threshold's bit for bit for the same call sequence.
//!
//! m = max(min_samples, ceil(sample_fraction x n)) strided samples with a random offset; their
//! exact top-(k m / n) key (radix-refined on the device) is the threshold; one stable
//! compaction (4n bytes) selects; a count outside [k/c, c k] triggers up to max_adjust_rounds
//! counting passes (x1.3 / x0.7), then the exact fallback (stats.fallback). With 2m >= n the
//! call is an exact top-k. With error feedback add 12n bytes for the accumulation.
//! Options: gradcomp::sampled_threshold_options (`threads` unused).
template <class Backend>
class basic_sampled_threshold : public detail::compressor_base<basic_sampled_threshold<Backend>,
                                                               sampled_threshold_options,
                                                               Backend> {
  using base =
      detail::compressor_base<basic_sampled_threshold<Backend>, sampled_threshold_options, Backend>;

public:
  //! @throws std::invalid_argument as gradcomp::sampled_threshold's constructor.
  explicit basic_sampled_threshold(sampled_threshold_options o = {}) : base(o), rng_(o.seed) {
    gradcomp::detail::check_sample_options(o);
  }
  //! Shorthand for `basic_sampled_threshold(sampled_threshold_options{.density = density})` (the
  //! other options at their defaults). @throws std::invalid_argument if `density` is outside
  //! (0, 1].
  explicit basic_sampled_threshold(double density)
      : basic_sampled_threshold(sampled_threshold_options{.density = density}) {}

  //! @private Selection hook of cuda::detail::compressor_base, the CUDA compressors' own CRTP
  //! base (not the host gradcomp::compressor_base, whose hook has another signature): called by
  //! compress(), compress_accumulate() and compress_accumulate_momentum() with n >= 1; writes
  //! the selection into c.indices / c.values and returns its size. Public only for that base;
  //! not part of the API.
  std::size_t run(const detail::call<Backend>& c, selection_stats& stats) {
    detail::materialize(c.ctx, c.src, c.n);
    const sampled_threshold_options& o = this->options_;
    const gradcomp::detail::threshold_sample plan =
        gradcomp::detail::plan_threshold_sample(o, c.n, stats.k_target, rng_);
    if (plan.exact) {
      detail::exact_run(c, stats);
      return stats.k_target;
    }
    const std::uint32_t key = detail::sample_kth_key(c.ctx, c.src.values(), plan.samples,
                                                     plan.stride, plan.offset, plan.rank);
    std::size_t selected = 0;
    detail::estimated_select(
        c, gradcomp::detail::key_magnitude(key),
        {.guard_factor = o.guard_factor, .max_adjust_rounds = o.max_adjust_rounds}, selected,
        stats);
    return selected;
  }

private:
  std::mt19937_64 rng_;
};

#if defined(__CUDACC__)
//! @brief Sampled threshold on CUDA device memory.
using sampled_threshold = basic_sampled_threshold<device_backend>;
#endif

} // namespace gradcomp::cuda
