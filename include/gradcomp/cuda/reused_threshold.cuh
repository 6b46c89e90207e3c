// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::reused_threshold: S1's threshold reuse on device memory.
#pragma once

#include <gradcomp/compressor/detail/estimated_select.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/detail/compressor_base.cuh>
#include <gradcomp/cuda/detail/select.cuh>

#include <cstddef>
#include <cstdint>

namespace gradcomp::cuda {

namespace detail {
//! Whether a layer's call number `calls` (0-based, counting only calls on non-empty gradients)
//! computes the exact top-k and refreshes the remembered threshold: calls 0, s, 2s, ... (S1),
//! as gradcomp::reused_threshold decides. Shared by the single-layer and the batched CUDA
//! compressors. @pre interval >= 1. O(1).
[[nodiscard]] constexpr bool reuse_refreshes(std::uint64_t calls, std::uint64_t interval) noexcept {
  return calls % interval == 0;
}

//! The guard of a reuse call, as gradcomp::reused_threshold applies it: no re-adjustment (a
//! count outside [k/c, c k] falls back to exact top-k at once). O(1).
[[nodiscard]] constexpr gradcomp::detail::estimate_policy
reuse_guard(double guard_factor) noexcept {
  return {.guard_factor = guard_factor, .max_adjust_rounds = 0};
}
} // namespace detail

//! @brief Reused threshold (S1 "dynamic" layer-wise sparsification) on Backend's memory: calls
//! 0, s, 2s, ... compute the exact top-k and remember its k-th magnitude H; the calls between
//! select |v| >= H in one stable compaction (4n bytes), guarded as on the host (a count outside
//! [k/c, c k] falls back to exact top-k, whose threshold replaces H). The message equals
//! gradcomp::reused_threshold's bit for bit for the same call sequence. One object per layer.
//! Calls on empty gradients select nothing and do not count. With error feedback add 12n bytes.
//! Options: gradcomp::reused_threshold_options (`threads` unused).
template <class Backend>
class basic_reused_threshold : public detail::compressor_base<basic_reused_threshold<Backend>,
                                                              reused_threshold_options,
                                                              Backend> {
  using base =
      detail::compressor_base<basic_reused_threshold<Backend>, reused_threshold_options, Backend>;

public:
  //! @throws std::invalid_argument on density outside (0, 1], interval 0, guard_factor outside
  //! [1, 1e6].
  explicit basic_reused_threshold(reused_threshold_options o = {}) : base(o) {
    gradcomp::detail::check_interval(o.interval);
  }

  //! Calls made so far on non-empty gradients.
  [[nodiscard]] std::uint64_t calls() const noexcept { return calls_; }

  //! @private Selection hook of cuda::detail::compressor_base, the CUDA compressors' own CRTP
  //! base (not the host gradcomp::compressor_base, whose hook has another signature): called by
  //! compress(), compress_accumulate() and compress_accumulate_momentum() with n >= 1; writes
  //! the selection into c.indices / c.values and returns its size. Public only for that base;
  //! not part of the API.
  std::size_t run(const detail::call<Backend>& c, selection_stats& stats) {
    detail::materialize(c.ctx, c.src, c.n);
    const bool refresh = detail::reuse_refreshes(calls_, this->options_.interval);
    ++calls_;
    if (refresh) {
      threshold_key_ = detail::exact_run(c, stats);
      return stats.k_target;
    }
    std::size_t selected = 0;
    threshold_key_ =
        detail::estimated_select(c, gradcomp::detail::key_magnitude(threshold_key_),
                                 detail::reuse_guard(this->options_.guard_factor), selected, stats);
    return selected;
  }

private:
  std::uint64_t calls_ = 0;
  std::uint32_t threshold_key_ = 0;
};

#if defined(__CUDACC__)
//! @brief Reused threshold on CUDA device memory.
using reused_threshold = basic_reused_threshold<device_backend>;
#endif

} // namespace gradcomp::cuda
