// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::loss_scale (static or dynamic loss scaling) and gradcomp::has_overflow, for
//! exchanging gradients in fp16 or bf16 without losing small values to underflow (S4's mixed
//! precision: fp16 compute, fp32 master weights, loss scaling; [MICIKEVICIUS18] section 3.2,
//! docs/references.md).
//!
//! The loss is multiplied by scale() before backward, so every gradient arrives multiplied by it;
//! they are exchanged in those units and divided by scale() (inverse()) before the update. Each
//! step ends with update(overflow), where `overflow` must be the same on every rank (for a local
//! has_overflow() result, agree with gradcomp::mpi::any_rank first): an overflowing step is
//! skipped on every rank and a dynamic scale backs off; after growth_interval clean steps in a
//! row it grows. Error feedback residuals hold scaled values too: multiply them by the returned
//! factor (error_feedback::rescale, pipeline::rescale_state) so that nothing unsent is lost or
//! inflated when the scale changes; with power-of-two scales and factors this is exact.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace gradcomp {

//! @brief Largest finite magnitude of `t`: 65504 (fp16), 3.3895314e38 (bf16), FLT_MAX (fp32).
[[nodiscard]] constexpr float max_finite(value_type t) noexcept {
  switch (t) {
  case value_type::fp16:
    return 65504.0f;
  case value_type::bf16:
    return 3.38953139e38f; // 0x7F7F: exponent 254, 7 fraction bits set
  case value_type::fp32:
  case value_type::quantized:
    break;
  }
  return std::numeric_limits<float>::max();
}

//! @brief True if any value is NaN or infinite, or beyond max_finite(wire) in magnitude (fp16
//! rounding saturates at 65504 rather than overflowing, so a too-large scale shows up as values
//! beyond it, not as infinities). Checks every element (no early exit): O(n), deterministic.
[[nodiscard]] inline bool has_overflow(std::span<const float> values,
                                       value_type wire = value_type::fp32) noexcept {
  const float limit = max_finite(wire);
  bool bad = false;
  for (const float v : values) {
    bad |= !(std::fabs(v) <= limit); // NaN compares false
  }
  return bad;
}

//! @brief has_overflow() of residual[i] + grad[i] (the values error feedback would compress,
//! summed in float as it does). O(n). @throws std::invalid_argument if the lengths differ.
[[nodiscard]] inline bool has_overflow(std::span<const float> residual,
                                       std::span<const float> grad,
                                       value_type wire = value_type::fp32) {
  detail::require(residual.size() == grad.size(), "has_overflow: residual has ", residual.size(),
                  " elements, the gradient ", grad.size());
  const float limit = max_finite(wire);
  bool bad = false;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    bad |= !(std::fabs(residual[i] + grad[i]) <= limit);
  }
  return bad;
}

//! @brief Options of gradcomp::loss_scale. The defaults are the usual dynamic scaling (PyTorch's
//! GradScaler and Apex use the same numbers): start at 2^16, halve on overflow, double after
//! 2000 clean steps.
struct loss_scale_options {
  //! First scale. Finite, in [min_scale, max_scale].
  double initial_scale = 65536.0;
  //! Dynamic (backs off and grows) or static (stays initial_scale; overflowing steps are still
  //! skipped).
  bool dynamic = true;
  //! Multiplier after growth_interval clean steps in a row. > 1.
  double growth_factor = 2.0;
  //! Multiplier on an overflowing step. In (0, 1).
  double backoff_factor = 0.5;
  //! Clean steps in a row before the scale grows. >= 1.
  std::size_t growth_interval = 2000;
  //! Lower bound of a dynamic scale. 0 < min_scale <= max_scale, finite.
  double min_scale = 1.0;
  //! Upper bound of a dynamic scale (default 2^24). Finite, >= min_scale.
  double max_scale = 16777216.0; // 2^24
};

//! @brief What update() decided for one step.
struct loss_scale_step {
  //! Apply this step's update (false: skip it on every rank; the gradients overflowed).
  bool apply = true;
  //! new scale / old scale (1 when unchanged): multiply residuals in scaled units by it.
  double factor = 1.0;
};

//! @brief The counters a checkpoint needs to resume loss scaling exactly (state(), restore()).
struct loss_scale_state {
  //! The current scale (scale()).
  double scale = 65536.0;
  //! Clean steps since the last overflow or growth.
  std::size_t clean_in_a_row = 0;
  //! Steps recorded by update() (steps()).
  std::uint64_t steps = 0;
  //! Of which skipped for overflow (skipped_steps()).
  std::uint64_t skipped_steps = 0;
};

//! @brief Static or dynamic loss scale (see the file comment). Deterministic: the same sequence
//! of update() arguments gives the same scales on every rank. O(1) per call; not thread-safe.
class loss_scale {
public:
  //! @throws std::invalid_argument naming the option and its limit when an option is out of
  //! range (see loss_scale_options).
  explicit loss_scale(loss_scale_options o = {}) : options_(o) {
    const auto finite_positive = [](double v) { return std::isfinite(v) && v > 0.0; };
    detail::require(finite_positive(o.min_scale) && finite_positive(o.max_scale) &&
                        o.min_scale <= o.max_scale,
                    "loss_scale: min_scale ", o.min_scale, " and max_scale ", o.max_scale,
                    " must be finite with 0 < min_scale <= max_scale");
    detail::require(std::isfinite(o.initial_scale) && o.initial_scale >= o.min_scale &&
                        o.initial_scale <= o.max_scale,
                    "loss_scale: initial_scale ", o.initial_scale, " is outside [", o.min_scale,
                    ", ", o.max_scale, "]");
    detail::require(std::isfinite(o.growth_factor) && o.growth_factor > 1.0,
                    "loss_scale: growth_factor ", o.growth_factor, " must be finite and > 1");
    detail::require(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, "loss_scale: backoff_factor ",
                    o.backoff_factor, " is outside (0, 1)");
    detail::require(o.growth_interval >= 1, "loss_scale: growth_interval ", o.growth_interval,
                    " is below the minimum 1");
    state_.scale = o.initial_scale;
  }

  //! The current scale (multiply the loss by it before backward).
  [[nodiscard]] double scale() const noexcept { return state_.scale; }
  //! 1 / scale() (multiply the exchanged gradients by it before the update).
  [[nodiscard]] double inverse() const noexcept { return 1.0 / state_.scale; }
  //! Steps recorded by update() (counting on from a restore()d state).
  [[nodiscard]] std::uint64_t steps() const noexcept { return state_.steps; }
  //! How many of steps() were skipped for overflow.
  [[nodiscard]] std::uint64_t skipped_steps() const noexcept { return state_.skipped_steps; }
  //! The options this loss scale was built with.
  [[nodiscard]] const loss_scale_options& options() const noexcept { return options_; }

  //! Records one step whose gradients overflowed or not (the same value on every rank).
  //! Overflow: skip the step; a dynamic scale becomes max(scale x backoff, min_scale). Clean:
  //! apply it; after growth_interval clean steps in a row a dynamic scale becomes
  //! min(scale x growth, max_scale) and the count restarts.
  loss_scale_step update(bool overflow) noexcept {
    const double old = state_.scale;
    ++state_.steps;
    loss_scale_step step;
    if (overflow) {
      ++state_.skipped_steps;
      state_.clean_in_a_row = 0;
      step.apply = false;
      if (options_.dynamic) {
        state_.scale = std::max(old * options_.backoff_factor, options_.min_scale);
      }
    } else if (++state_.clean_in_a_row >= options_.growth_interval) {
      state_.clean_in_a_row = 0;
      if (options_.dynamic) {
        state_.scale = std::min(old * options_.growth_factor, options_.max_scale);
      }
    }
    step.factor = state_.scale / old;
    return step;
  }

  //! The counters to store in a checkpoint.
  [[nodiscard]] loss_scale_state state() const noexcept { return state_; }
  //! Resumes from a checkpoint's counters. @throws std::invalid_argument if s.scale is outside
  //! [min_scale, max_scale] or not finite.
  void restore(const loss_scale_state& s) {
    detail::require(std::isfinite(s.scale) && s.scale >= options_.min_scale &&
                        s.scale <= options_.max_scale,
                    "loss_scale: restored scale ", s.scale, " is outside [", options_.min_scale,
                    ", ", options_.max_scale, "]");
    state_ = s;
  }

private:
  loss_scale_options options_;
  loss_scale_state state_;
};

} // namespace gradcomp
