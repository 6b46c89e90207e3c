// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief DGC's local gradient clipping: each worker clips its own gradient by its L2 norm
//! before error feedback accumulates it, at the global threshold scaled by N^(-1/2) (Lin et al.
//! 2018, "Deep Gradient Compression", sec. 3.3 "Local gradient clipping").
#pragma once

#include <gradcomp/error.hpp>

#include <cmath>
#include <cstddef>
#include <span>

namespace gradcomp {

//! @brief The local clipping threshold of one of `workers` workers for a global threshold
//! `global_max_norm`: global_max_norm / sqrt(workers) (DGC sec. 3.3 and its appendix A: if the N
//! workers' gradients were independent with identical distributions, the norm of their sum
//! would be sqrt(N) times a worker's, so a worker's share of the global threshold is
//! N^(-1/2)). O(1).
//! @pre global_max_norm > 0 and finite; workers >= 1.
//! @throws std::invalid_argument naming the value and its limit otherwise.
[[nodiscard]] inline double local_clip_threshold(double global_max_norm, std::size_t workers) {
  detail::require(std::isfinite(global_max_norm) && global_max_norm > 0.0,
                  "local clipping: global_max_norm ", global_max_norm, " must be finite and > 0");
  detail::require(workers >= 1, "local clipping: workers ", workers, " is below the minimum 1");
  return global_max_norm / std::sqrt(static_cast<double>(workers));
}

//! @brief What one clipping call did.
struct clip_result {
  double norm = 0.0;    //!< the L2 norm before clipping (sqrt of the sum of squares, in double).
  double scale = 1.0;   //!< the factor every element was multiplied by: max_norm / norm, or 1.
  bool clipped = false; //!< norm > max_norm (and finite): the values were scaled.
};

//! @brief Sum of squares of `values`, accumulated in double element by element in order
//! (deterministic: the same bits for the same input on every rank). O(n), no allocation. The
//! squared L2 norm that clip_by_global_norm and gradcomp-train's per-layer norms use.
[[nodiscard]] inline double sum_of_squares(std::span<const float> values) noexcept {
  double sum = 0.0;
  for (const float v : values) {
    sum += static_cast<double>(v) * static_cast<double>(v);
  }
  return sum;
}

namespace detail {
//! Checks a clipping threshold: finite and > 0.
inline void check_max_norm(double max_norm) {
  require(std::isfinite(max_norm) && max_norm > 0.0, "local clipping: max_norm ", max_norm,
          " must be finite and > 0");
}
} // namespace detail

//! @brief Gradient clipping by the joint L2 norm of several tensors (Pascanu et al. 2013, as
//! DGC sec. 3.3 applies it to one worker's whole gradient, every layer together): with
//! norm = sqrt(sum over every tensor and element of v^2), every value is multiplied by
//! max_norm / norm (rounded to float once) when norm > max_norm; otherwise nothing changes.
//!
//! For DGC's local clipping call it on a worker's gradient before error feedback adds it to
//! the residual (before gradcomp::error_feedback::compress or pipeline::gradient_ready), with
//! max_norm = local_clip_threshold(global threshold, workers). A non-finite norm (an inf or NaN
//! gradient, e.g. a loss-scale overflow) leaves the values unchanged (clipped false): scaling
//! would turn the infinities into NaN; the overflow handling (gradcomp::loss_scale) skips such
//! steps. The sum of squares is accumulated in double, element by element in order
//! (deterministic). O(total elements): one read pass, and one write pass when clipping.
//! @param tensors  the tensors, modified in place; any lengths (empty ones count nothing).
//! @param max_norm the threshold, in the gradient's units; > 0 and finite.
//! @throws std::invalid_argument naming max_norm if it is not > 0 and finite; nothing changes.
inline clip_result clip_by_global_norm(std::span<const std::span<float>> tensors, double max_norm) {
  detail::check_max_norm(max_norm);
  double sum = 0.0;
  for (const std::span<float> t : tensors) {
    sum += sum_of_squares(t);
  }
  clip_result r;
  r.norm = std::sqrt(sum);
  if (!std::isfinite(r.norm) || r.norm <= max_norm) {
    return r;
  }
  r.scale = max_norm / r.norm;
  r.clipped = true;
  const auto factor = static_cast<float>(r.scale);
  for (const std::span<float> t : tensors) {
    for (float& v : t) {
      v *= factor;
    }
  }
  return r;
}

//! @brief clip_by_global_norm of one tensor: scales `values` by max_norm / ||values||_2 when
//! that norm exceeds max_norm (see clip_by_global_norm for the details). O(n).
//! @throws std::invalid_argument naming max_norm if it is not > 0 and finite.
inline clip_result clip_by_norm(std::span<float> values, double max_norm) {
  const std::span<float> one[] = {values};
  return clip_by_global_norm(one, max_norm);
}

} // namespace gradcomp
