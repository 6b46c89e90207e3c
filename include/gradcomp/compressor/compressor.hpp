// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The compressor concept, the statistics every compression call reports, and the rule
//! that turns a density into k.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>

namespace gradcomp {

//! @brief Opt-in tag: a compressor policy declares `using compressor_concept = compressor_tag;`.
struct compressor_tag {};

//! @brief What one compression call did (one layer, one iteration).
struct selection_stats {
  std::size_t numel = 0;      //!< elements in the gradient (n).
  std::size_t k_target = 0;   //!< elements the density asks for: ceil(density x n), 0 if n == 0.
  std::size_t k_selected = 0; //!< elements actually sent (nnz of the message).
  //! Magnitude threshold: elements with |v| >= threshold were candidates. For an exact
  //! selection, the k-th largest magnitude (the smallest sent); for an estimator, the threshold
  //! it applied; 0 for dense compressors.
  float threshold = 0.0f;
  bool exact = false;         //!< an exact top-k selection was computed in this call.
  bool fallback = false;      //!< the guard rejected the estimate and exact top-k ran instead.
  unsigned adjust_rounds = 0; //!< threshold re-adjustment passes run before accepting.
  //! nonfinite_policy::skip_step: how many values of the call were NaN or infinite (dropped:
  //! sent and kept as 0). 0 under the other policies (propagate does not look; raise throws).
  std::size_t nonfinite = 0;
};

//! @brief A compressor policy: selects values of a float gradient into a sparse_message.
//!
//! Required members:
//! * `compress(x, out)`: x is a host float tensor of n elements, read only; `out` receives the
//!   selected values with ascending indices (or a dense message); returns selection_stats.
//! * `compress_accumulate(residual, grad, out)`: error feedback fused into the selection:
//!   computes `acc = residual + grad` (element-wise, once), selects from `acc` exactly as
//!   compress() would, and leaves `residual = acc - sent` (0 where sent).
//! Both are deterministic for a given input, state and seed, whatever the thread count.
template <class C>
concept compressor = std::same_as<typename C::compressor_concept, compressor_tag> &&
    requires(C& c, std::span<const float> x, std::span<float> r, sparse_message& m) {
  { c.compress(x, m) } -> std::same_as<selection_stats>;
  { c.compress_accumulate(r, x, m) } -> std::same_as<selection_stats>;
};

//! @brief A compressor that also fuses DGC's momentum correction into error feedback:
//! `compress_accumulate_momentum(residual, velocity, grad, momentum, out)` computes
//! velocity = momentum x velocity + grad, then acc = residual + velocity, selects from acc as
//! compress() would, leaves residual = acc - sent and zeroes the velocity where sent (Lin et al.
//! 2018, "Deep Gradient Compression", eqs. 4-6, momentum factor masking). Every host compressor
//! of this library models it.
template <class C>
concept momentum_compressor = compressor<C> &&
    requires(C& c, std::span<const float> x, std::span<float> r, float m, sparse_message& msg) {
  { c.compress_accumulate_momentum(r, r, x, m, msg) } -> std::same_as<selection_stats>;
};

//! @brief A momentum compressor that also fuses the velocity update when the velocity is kept
//! (gradcomp::momentum_correction without factor masking):
//! `compress_accumulate_momentum(residual, velocity, grad, momentum, out, factor_masking)` with
//! `factor_masking` false leaves the velocity of sent elements as updated; the results are bit
//! for bit the velocity update as its own pass followed by compress_accumulate(residual,
//! velocity, out), in one pass less over the layer. Every host compressor built on
//! gradcomp::compressor_base models it (and size_switch when both of its compressors do);
//! error feedback takes the separate pass for a compressor that does not.
template <class C>
concept kept_velocity_compressor = momentum_compressor<C> &&
    requires(C& c, std::span<const float> x, std::span<float> r, float m, sparse_message& msg) {
  { c.compress_accumulate_momentum(r, r, x, m, msg, false) } -> std::same_as<selection_stats>;
};

//! @brief A compressor whose density can change between calls (a density schedule such as DGC's
//! warm-up, or per-layer adaptive densities: density_schedule.hpp, adaptive_density.hpp):
//! `density()` is the density the next call selects at, and `set_density(d)` (d in (0, 1], else
//! std::invalid_argument naming it, nothing changed) sets it. A change takes effect from the next
//! call; calls never straddle it, so error feedback's conservation (sent + new residual == old
//! residual + grad, bit for bit) holds across it. Every host top-k / threshold compressor of this
//! library models it, and gradcomp::size_switch when its large compressor does.
template <class C>
concept density_compressor = compressor<C> && requires(C& c, const C& cc, double d) {
  { cc.density() } -> std::convertible_to<double>;
  c.set_density(d);
};

//! @brief Checks that a momentum lies in [0, 1).
//! @throws std::invalid_argument naming the value otherwise (NaN included).
inline void check_momentum(double momentum) {
  detail::require(momentum >= 0.0 && momentum < 1.0, "momentum ", momentum, " is outside [0, 1)");
}

//! @brief Checks that a density lies in (0, 1].
//! @throws std::invalid_argument naming the value otherwise (NaN included).
inline void check_density(double density) {
  detail::require(density > 0.0 && density <= 1.0, "density ", density, " is outside (0, 1]");
}

//! @brief k for `n` elements at `density`: ceil(density x n) clamped to [1, n], and 0 for n == 0.
//!
//! A product within 1e-9 (relative) of an integer counts as that integer, so that 0.07 x 100
//! gives 7, not 8, despite binary rounding. O(1).
//! @throws std::invalid_argument if density is outside (0, 1].
[[nodiscard]] inline std::size_t k_for_density(std::size_t n, double density) {
  check_density(density);
  if (n == 0) {
    return 0;
  }
  const double exact = density * static_cast<double>(n);
  const double nearest = std::nearbyint(exact);
  const double k =
      std::abs(exact - nearest) <= 1e-9 * std::max(1.0, exact) ? nearest : std::ceil(exact);
  return std::clamp<std::size_t>(static_cast<std::size_t>(k), 1, n);
}

//! @brief True when `count` lies in the guard band [k / c, c x k] of an estimating compressor.
[[nodiscard]] constexpr bool
in_guard_band(std::size_t count, std::size_t k, double guard_factor) noexcept {
  const double c = static_cast<double>(count);
  const double kk = static_cast<double>(k);
  return c * guard_factor >= kk && c <= guard_factor * kk;
}

//! @brief The largest count in the guard band: floor(c x k). An estimating compressor never
//! keeps more pairs than this (larger counts are rejected by the guard). O(1).
[[nodiscard]] inline std::size_t guard_capacity(std::size_t k, double guard_factor) noexcept {
  return static_cast<std::size_t>(std::floor(guard_factor * static_cast<double>(k)));
}

} // namespace gradcomp
