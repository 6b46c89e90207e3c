// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::sampled_threshold: DGC's threshold from the exact top-k of a sample.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/estimated_select.hpp>
#include <gradcomp/compressor/detail/rng_state.hpp>
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <locale>
#include <random>
#include <sstream>
#include <string_view>

namespace gradcomp {

//! @brief Options of sampled_threshold. Defaults follow the DGC reference code (1 % sample,
//! x1.3 / x0.7 re-adjustment) with fewer rounds, since each round is a pass over the gradient.
struct sampled_threshold_options {
  double density = 0.01;                //!< k / n, in (0, 1].
  double sample_fraction = 0.01;        //!< fraction of elements sampled, in (0, 1].
  std::size_t min_samples = 1024;       //!< never sample fewer than this (>= 1).
  unsigned max_adjust_rounds = 2;       //!< re-filter passes before the exact fallback.
  double guard_factor = 2.0;            //!< c in [1, 1e6]: accepted counts [k/c, c k].
  std::uint64_t seed = 0;               //!< seeds the sample offsets (reproducible).
  value_type values = value_type::fp32; //!< type the sent values are rounded to.
  unsigned threads = 0;                 //!< 0 = all hardware threads.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

namespace detail {

//! The sample of one sampled_threshold call (shared by the host and the CUDA compressor, so both
//! draw the same offsets and take the same rank): m = max(min_samples, ceil(sample_fraction x
//! n)) samples at offset + j x stride, and the exact top-`rank` of them (rank = round(k m / n)
//! clamped to [1, m]) gives the threshold; `exact` when 2m >= n (no offset drawn then). O(1).
struct threshold_sample {
  bool exact = false;
  std::size_t samples = 0, stride = 0, offset = 0, rank = 0;
};

//! Checks sample_fraction in (0, 1] and min_samples >= 1 (host and CUDA compressors).
//! @throws std::invalid_argument naming the value otherwise.
inline void check_sample_options(const sampled_threshold_options& o) {
  require(o.sample_fraction > 0.0 && o.sample_fraction <= 1.0, "sample_fraction ",
          o.sample_fraction, " is outside (0, 1]");
  require(o.min_samples >= 1, "min_samples ", o.min_samples, " is below 1");
}

[[nodiscard]] inline threshold_sample plan_threshold_sample(const sampled_threshold_options& o,
                                                            std::size_t n,
                                                            std::size_t k,
                                                            std::mt19937_64& rng) {
  threshold_sample p;
  const auto wanted =
      static_cast<std::size_t>(std::ceil(o.sample_fraction * static_cast<double>(n)));
  p.samples = std::max(o.min_samples, wanted);
  if (2 * p.samples >= n) {
    p.exact = true;
    return p;
  }
  p.stride = n / p.samples;
  p.offset = std::uniform_int_distribution<std::size_t>(0, p.stride - 1)(rng);
  const double scaled =
      static_cast<double>(k) * static_cast<double>(p.samples) / static_cast<double>(n);
  p.rank = std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(scaled)), 1, p.samples);
  return p;
}

} // namespace detail

//! @brief Sampled threshold (DGC, Lin et al. ICLR'18): a strided sample of m = max(min_samples,
//! ceil(sample_fraction x n)) values with a random offset; the exact top-(k m / n) of the
//! sample gives the threshold; one filtering pass (fused with error feedback) selects.
//!
//! If the count leaves the guard band [k/c, c k], up to max_adjust_rounds counting passes
//! rescale the threshold (x1.3 when too many, x0.7 when too few); if none lands in the band, the
//! call falls back to exact top-k (stats.fallback). When m >= n / 2, sampling cannot pay and the
//! call is an exact top-k (stats.exact, not a fallback).
//! Cost: O(m log m) + one pass (error feedback: read residual and gradient, write residual) in
//! the common case. Wire bytes (u32/fp32): 32 + 8 x selected. Deterministic for a given seed and
//! call sequence, whatever the thread count.
class sampled_threshold : public compressor_base<sampled_threshold, sampled_threshold_options> {
public:
  //! The name its checkpoint state carries (compressor_base::save_state): with the options and
  //! the density, the sampling RNG's state (save_extra), so a resumed run draws the same
  //! samples as an uninterrupted one.
  static constexpr std::string_view state_name = "sampled_threshold";
  //! @throws std::invalid_argument on density or sample_fraction outside (0, 1],
  //! min_samples 0, or guard_factor outside [1, 1e6].
  explicit sampled_threshold(options o = {}) : compressor_base(o), rng_(o.seed) {
    detail::check_sample_options(o);
  }
  //! Shorthand for `sampled_threshold(options{.density = density})` (the other options at
  //! their defaults).
  //! @throws std::invalid_argument if `density` is outside (0, 1].
  explicit sampled_threshold(double density) : sampled_threshold(options{.density = density}) {}

  //! @brief compressor_base's selection hook: draws this call's sample positions (advancing the
  //! seeded RNG once per call), reads them with `src.peek` before the pass, takes the sample's
  //! top-`rank` magnitude as the threshold and selects every element at or above it in one
  //! materializing pass, re-adjusting the threshold up to `max_adjust_rounds` times while the
  //! count is outside the guard band [k / c, c k], else falling back to exact top-k. When
  //! sampling cannot pay (sample >= n / 2), an exact top-k. Sets `stats.threshold`, `exact`,
  //! `fallback`, `adjust_rounds`. Cost: O(m log m) for the sample plus O(n) per pass;
  //! deterministic for a given seed and call sequence, whatever the thread count; throws only
  //! std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    const detail::threshold_sample plan =
        detail::plan_threshold_sample(options_, n, stats.k_target, rng_);
    if (plan.exact) {
      const std::uint32_t key =
          detail::exact_top_k_select(src, true, n, stats.k_target, options_.threads, ws_, out);
      stats.exact = true;
      stats.threshold = detail::key_magnitude(key);
      return;
    }
    auto& keys = ws_.sample_keys;
    keys.resize(plan.samples);
    for (std::size_t j = 0; j < plan.samples; ++j) {
      keys[j] = detail::magnitude_key(src.peek(plan.offset + j * plan.stride));
    }
    const std::size_t ks = plan.rank;
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(ks - 1), keys.end(),
                     std::greater<>());
    const detail::estimate_policy policy{.guard_factor = options_.guard_factor,
                                         .max_adjust_rounds = options_.max_adjust_rounds,
                                         .threads = options_.threads};
    detail::estimated_select(src, true, n, stats.k_target, detail::key_magnitude(keys[ks - 1]),
                             policy, ws_, out, stats);
  }

  //! compressor_base's checkpoint hook: the RNG's state (its standard text form). O(1).
  void save_extra(state_writer& w) const { detail::save_rng(w, "sampled_threshold rng", rng_); }
  //! compressor_base's checkpoint hook: restores the RNG's state.
  //! @throws state_error if the stored state is not a std::mt19937_64 state.
  void load_extra(state_reader& r) { rng_ = detail::load_rng(r, "sampled_threshold rng"); }

private:
  std::mt19937_64 rng_;
  detail::selection_workspace ws_;
};

static_assert(momentum_compressor<sampled_threshold>);
static_assert(density_compressor<sampled_threshold>);

} // namespace gradcomp
