// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::gaussian_threshold and gradcomp::cuda::lognormal_threshold:
//! thresholds from a fitted distribution, the fit a device reduction.
#pragma once

#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/detail/compressor_base.cuh>
#include <gradcomp/cuda/detail/select.cuh>

#include <cstddef>
#include <cstdint>

namespace gradcomp::cuda {

//! @brief The fit-then-filter compressors on Backend's memory: one reduction (4n bytes) sums
//! Fit::transform over the accumulated values in double precision, Fit::threshold (the host
//! compressor's formula) turns the sums into a threshold, one stable compaction (4n) selects,
//! and the guard re-adjusts or falls back to exact top-k as on the host. The sums differ from
//! the host compressor's (float lanes folded into doubles per tile) in the last bits, so the
//! threshold may differ by a few ulps and the selection at its edge; for a given input the
//! device result is deterministic. With error feedback add 12n bytes for the accumulation.
//! Options: gradcomp::fitted_threshold_options (`threads` unused).
template <class Fit, class Backend>
class basic_fitted_threshold : public detail::compressor_base<basic_fitted_threshold<Fit, Backend>,
                                                              fitted_threshold_options,
                                                              Backend> {
  using base = detail::
      compressor_base<basic_fitted_threshold<Fit, Backend>, fitted_threshold_options, Backend>;

public:
  //! @throws std::invalid_argument on density outside (0, 1] or guard_factor outside [1, 1e6].
  explicit basic_fitted_threshold(fitted_threshold_options o = {}) : base(o) {}
  //! Shorthand for `basic_fitted_threshold(fitted_threshold_options{.density = density})` (the
  //! other options at their defaults). @throws std::invalid_argument if `density` is outside
  //! (0, 1].
  explicit basic_fitted_threshold(double density)
      : basic_fitted_threshold(fitted_threshold_options{.density = density}) {}

  //! @private Selection hook of cuda::detail::compressor_base, the CUDA compressors' own CRTP
  //! base (not the host gradcomp::compressor_base, whose hook has another signature): called by
  //! compress(), compress_accumulate() and compress_accumulate_momentum() with n >= 1; writes
  //! the selection into c.indices / c.values and returns its size. Public only for that base;
  //! not part of the API.
  std::size_t run(const detail::call<Backend>& c, selection_stats& stats) {
    const fitted_threshold_options& o = this->options_;
    const float threshold =
        Fit::threshold(detail::materialize_and_fit<Fit>(c.ctx, c.src, c.n), stats.k_target, c.n);
    std::size_t selected = 0;
    detail::estimated_select(
        c, threshold, {.guard_factor = o.guard_factor, .max_adjust_rounds = o.max_adjust_rounds},
        selected, stats);
    return selected;
  }
};

//! @brief Gaussian-k (Shi et al. 2019) on Backend's memory: |mu| + sigma Phi^-1(1 - k/(2n)).
template <class Backend>
using basic_gaussian_threshold = basic_fitted_threshold<gradcomp::detail::gaussian_fit, Backend>;
//! @brief Lognormal fit of |v| on Backend's memory: exp(mu + sigma Phi^-1(1 - k/nz)).
template <class Backend>
using basic_lognormal_threshold = basic_fitted_threshold<gradcomp::detail::lognormal_fit, Backend>;

#if defined(__CUDACC__)
//! @brief Gaussian threshold on CUDA device memory.
using gaussian_threshold = basic_gaussian_threshold<device_backend>;
//! @brief Lognormal threshold on CUDA device memory.
using lognormal_threshold = basic_lognormal_threshold<device_backend>;
#endif

} // namespace gradcomp::cuda
