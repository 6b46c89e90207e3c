// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::gaussian_threshold and gradcomp::lognormal_threshold: thresholds from a
//! fitted distribution's inverse CDF (Gaussian-k; lognormal fit).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/estimated_select.hpp>
#include <gradcomp/compressor/detail/normal_quantile.hpp>
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/detail/host_device.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gradcomp {

//! @brief Options shared by the distribution-fitting compressors.
struct fitted_threshold_options {
  double density = 0.01;                //!< k / n, in (0, 1].
  double guard_factor = 2.0;            //!< c in [1, 1e6]: accepted counts [k/c, c k], else exact.
  unsigned max_adjust_rounds = 2;       //!< x1.3 / x0.7 counting passes before the fallback.
  value_type values = value_type::fp32; //!< type the sent values are rounded to.
  unsigned threads = 0;                 //!< 0 = all hardware threads.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

namespace detail {

//! Per-chunk sums of a fit, combined in chunk order (deterministic for any thread count).
struct fit_sums {
  double count = 0, sum = 0, sum_squares = 0;
};

[[nodiscard]] GRADCOMP_HOST_DEVICE inline fit_sums combine(const fit_sums& a,
                                                           const fit_sums& b) noexcept {
  return {a.count + b.count, a.sum + b.sum, a.sum_squares + b.sum_squares};
}

//! Sums of Fit::transform over x[0, n) (n <= a tile): eight float lanes, so that the loop
//! vectorises without reassociating, folded into doubles in a fixed order (deterministic).
template <class Fit>
[[nodiscard]] fit_sums fit_tile(const float* x, std::size_t n) noexcept {
  constexpr std::size_t lanes = 8;
  std::array<float, lanes> count{}, sum{}, squares{};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (std::size_t j = 0; j < lanes; ++j) {
      float value = 0.0f;
      float weight = 0.0f;
      Fit::transform(x[i + j], value, weight);
      count[j] += weight;
      sum[j] += value;
      squares[j] += value * value;
    }
  }
  for (std::size_t j = 0; i < n; ++i, ++j) {
    float value = 0.0f;
    float weight = 0.0f;
    Fit::transform(x[i], value, weight);
    count[j] += weight;
    sum[j] += value;
    squares[j] += value * value;
  }
  fit_sums s;
  for (std::size_t j = 0; j < lanes; ++j) {
    s.count += count[j];
    s.sum += sum[j];
    s.sum_squares += squares[j];
  }
  return s;
}

//! The fit-then-filter flow: sums of `Fit::transform(v, value, weight)` in the first pass (tile by
//! tile after the error-feedback accumulation, while the tile is in L1), `Fit::threshold(total, k,
//! n)` gives the magnitude threshold, then one filtering pass and the guard.
template <class Fit>
class fitted_threshold
    : public gradcomp::compressor_base<fitted_threshold<Fit>, fitted_threshold_options> {
public:
  using base = gradcomp::compressor_base<fitted_threshold<Fit>, fitted_threshold_options>;
  using typename base::options;
  //! The name its checkpoint state carries (compressor_base::save_state): the density and the
  //! options; no state between calls besides them.
  static constexpr std::string_view state_name = Fit::state_name;

  //! @throws std::invalid_argument on density outside (0, 1] or guard_factor outside [1, 1e6].
  explicit fitted_threshold(options o = {}) : base(o) {}
  explicit fitted_threshold(double density) : fitted_threshold(options{.density = density}) {}

  //! @brief compressor_base's selection hook: the first pass materializes the source tile by tile
  //! and accumulates `Fit::transform`'s count, sum and sum of squares (per chunk, combined in
  //! chunk order), `Fit::threshold(sums, k, n)` turns them into a magnitude threshold, and one
  //! filtering pass keeps every element at or above it, re-adjusted up to `max_adjust_rounds`
  //! times while the count is outside the guard band [k / c, c k], else an exact top-k
  //! (`stats.fallback`). Sets `stats.threshold`, `exact`, `fallback`, `adjust_rounds`. O(n)
  //! per pass over `threads`; deterministic whatever the thread count (fixed chunking and
  //! combination order); throws only std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    const fitted_threshold_options& o = this->options_;
    partial_.assign(chunk_count(n), fit_sums{});
    parallel_chunks(n, o.threads, [&](std::size_t c, std::size_t b, std::size_t e) {
      // four independent accumulators (combined in a fixed order) hide the latency of the
      // floating-point additions without changing the result between thread counts
      const float* const x = src.materialized();
      fit_sums s;
      for_each_tile(src, true, b, e, [&](std::size_t tb, std::size_t te) {
        s = combine(s, fit_tile<Fit>(x + tb, te - tb));
      });
      partial_[c] = s;
    });
    fit_sums total;
    for (const fit_sums& s : partial_) {
      total = combine(total, s);
    }
    const float threshold = Fit::threshold(total, stats.k_target, n);
    const estimate_policy policy{.guard_factor = o.guard_factor,
                                 .max_adjust_rounds = o.max_adjust_rounds,
                                 .threads = o.threads};
    estimated_select(src, false, n, stats.k_target, threshold, policy, ws_, out, stats);
  }

private:
  std::vector<fit_sums> partial_;
  selection_workspace ws_;
};

//! Gaussian-k (Shi et al. 2019): v ~ N(mu, sigma^2); P(|v - mu| > t) = k/n gives
//! t = sigma Phi^-1(1 - k/(2n)); the magnitude threshold is |mu| + t.
struct gaussian_fit {
  static constexpr std::string_view state_name = "gaussian_threshold";
  GRADCOMP_HOST_DEVICE static void transform(float v, float& value, float& weight) noexcept {
    value = v;
    weight = 1.0f;
  }
  static float threshold(const fit_sums& s, std::size_t k, std::size_t n) noexcept {
    const double mean = s.sum / s.count;
    const double variance = std::max(0.0, s.sum_squares / s.count - mean * mean);
    const double d = static_cast<double>(k) / static_cast<double>(n);
    return static_cast<float>(std::abs(mean) +
                              std::sqrt(variance) * normal_quantile(1.0 - d / 2.0));
  }
};

//! Lognormal fit (after Chmiel et al., ICLR'21): ln|v| ~ N(mu, sigma^2) over the nonzero
//! values; the k largest are the top k/nz of that distribution: t = exp(mu + sigma
//! Phi^-1(1 - k/nz)). With nz <= k, every nonzero is selected (t = smallest positive float).
struct lognormal_fit {
  static constexpr std::string_view state_name = "lognormal_threshold";
  GRADCOMP_HOST_DEVICE static void transform(float v, float& value, float& weight) noexcept {
    // |v| in 1 .. 0x7f7fffff as bits: positive and finite (zeros, infinities, NaN left out);
    // integer selects keep the loop free of branches so that it vectorises
    const std::uint32_t bits = float_bits(v) & 0x7fffffffu;
    const std::uint32_t usable = bits - 1u < 0x7f7fffffu ? 0xffffffffu : 0u;
    const float l = fast_log(bits_float((bits & usable) | (0x3f800000u & ~usable)));
    value = bits_float(float_bits(l) & usable);
    weight = bits_float(0x3f800000u & usable);
  }
  static float threshold(const fit_sums& s, std::size_t k, std::size_t) noexcept {
    if (s.count <= static_cast<double>(k)) {
      return key_magnitude(1); // smallest positive magnitude
    }
    const double mean = s.sum / s.count;
    const double variance = std::max(0.0, s.sum_squares / s.count - mean * mean);
    const double q = normal_quantile(1.0 - static_cast<double>(k) / s.count);
    return static_cast<float>(std::exp(mean + std::sqrt(variance) * q));
  }
};

} // namespace detail

//! @brief Gaussian threshold (Gaussian-k): fits mean and standard deviation of the values in the
//! first pass (fused with error feedback), thresholds magnitudes at |mu| + sigma
//! Phi^-1(1 - k/(2n)), selects in a second pass.
//!
//! Known to under-select badly under error feedback (0-41 % of k in our simulation,
//! docs/compressors.md, "Estimator accuracy"), hence the guard: a count outside [k/c, c k] is first
//! corrected by up to max_adjust_rounds counting passes (x1.3 / x0.7, as DGC), then falls back to
//! exact top-k for that call (stats.fallback). Cost: two passes, O(n); with error feedback 12n + 4n
//! bytes of memory traffic. Wire bytes (u32/fp32): 32 + 8 x selected. Deterministic for any thread
//! count.
using gaussian_threshold = detail::fitted_threshold<detail::gaussian_fit>;

//! @brief Lognormal threshold: fits ln|v| of the nonzero values (fast log, error < 2e-5) in the
//! first pass and thresholds at exp(mu + sigma Phi^-1(1 - k/nz)); selects in a second pass.
//! Guarded like gaussian_threshold. Cost, wire bytes and determinism as gaussian_threshold.
using lognormal_threshold = detail::fitted_threshold<detail::lognormal_fit>;

static_assert(momentum_compressor<gaussian_threshold>);
static_assert(momentum_compressor<lognormal_threshold>);
static_assert(density_compressor<gaussian_threshold>);
static_assert(density_compressor<lognormal_threshold>);

} // namespace gradcomp
