// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The element-wise operations of the CUDA compressors, as host-and-device function
//! objects for Thrust algorithms. Every one computes bit for bit what the host compressors
//! compute (same keys, cuts, roundings and float operations; no fused multiply-add).
#pragma once

#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/cuda/detail/thrust_config.cuh>
#include <gradcomp/detail/host_device.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstddef>
#include <cstdint>
#include <thrust/tuple.h>

namespace gradcomp::cuda::detail {

using gradcomp::detail::magnitude_key;

//! a + b rounded once (nvcc may not contract it with a neighbouring product).
GRADCOMP_HOST_DEVICE inline float add_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

//! a x b rounded once (never contracted into a fused multiply-add).
GRADCOMP_HOST_DEVICE inline float mul_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

//! Error feedback: residual[i] += grad[i].
struct accumulate_op {
  float* residual;
  const float* grad;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t i) const noexcept {
    residual[i] = add_rn(residual[i], grad[i]);
  }
};

//! DGC momentum correction: velocity[i] = m velocity[i] + grad[i]; residual[i] += velocity[i].
//! A velocity below FLT_MIN in magnitude (subnormal) is stored as 0, as on the host
//! (gradcomp::detail::decayed_velocity: a decaying velocity must not turn subnormal).
struct momentum_accumulate_op {
  float* residual;
  float* velocity;
  const float* grad;
  float momentum;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t i) const noexcept {
    float u = add_rn(mul_rn(momentum, velocity[i]), grad[i]);
    if (u < 1.17549435e-38f && u > -1.17549435e-38f) { // FLT_MIN: device code has no <limits>
      u = 0.0f;
    }
    velocity[i] = u;
    residual[i] = add_rn(residual[i], u);
  }
};

//! |v| >= the magnitude of `key` (by key order; NaN above infinity).
struct key_at_least_op {
  std::uint32_t key;
  GRADCOMP_HOST_DEVICE bool operator()(float v) const noexcept { return magnitude_key(v) >= key; }
};

//! Sample j: element j x stride + offset (gradcomp::detail::sample_guided_plan's layout when
//! offset = stride / 2; a random offset for the sampled threshold).
struct strided_value_op {
  const float* values;
  std::size_t stride;
  std::size_t offset;
  GRADCOMP_HOST_DEVICE float operator()(std::size_t j) const noexcept {
    return values[offset + j * stride];
  }
};

//! 1 where the key equals the threshold key (to rank the ties by index).
struct is_tie_op {
  std::uint32_t key;
  GRADCOMP_HOST_DEVICE std::uint32_t operator()(float v) const noexcept {
    return magnitude_key(v) == key ? 1u : 0u;
  }
};

//! gradcomp::detail::top_k_cut on (value, tie rank) stencils: key > T, or key == T and among
//! the first `ties` such keys.
struct top_k_cut_op {
  std::uint32_t key;
  std::size_t ties;
  template <class Tuple>
  GRADCOMP_HOST_DEVICE bool operator()(const Tuple& t) const noexcept {
    const std::uint32_t k = magnitude_key(thrust::get<0>(t));
    return k > key || (k == key && thrust::get<1>(t) < ties);
  }
};

//! For message position j: rounds the value to the wire type, leaves the rounding error in the
//! residual (0 when sent unchanged) and masks the velocity (both optional).
struct finish_op {
  const std::uint32_t* indices;
  float* values;
  float* residual; // null without error feedback
  float* velocity; // null without momentum correction
  value_type type;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t j) const noexcept {
    const float acc = values[j];
    const float sent = round_to(type, acc);
    values[j] = sent;
    const std::uint32_t i = indices[j];
    if (residual != nullptr) {
      residual[i] = residual_after_sending(acc, sent);
    }
    if (velocity != nullptr) {
      velocity[i] = 0.0f;
    }
  }
};

//! Per-element terms of a distribution fit (Fit::transform), as double sums.
template <class Fit>
struct fit_terms_op {
  GRADCOMP_HOST_DEVICE gradcomp::detail::fit_sums operator()(float v) const noexcept {
    float value = 0.0f;
    float weight = 0.0f;
    Fit::transform(v, value, weight);
    const double d = value;
    return {static_cast<double>(weight), d, d * d};
  }
};

//! For element i: Step (an accumulation op) materializes it, then its fit terms are taken
//! from `values[i]` (the fused first pass of the fitted thresholds).
template <class Fit, class Step>
struct fit_after_op {
  Step step;
  const float* values;
  GRADCOMP_HOST_DEVICE gradcomp::detail::fit_sums operator()(std::size_t i) const noexcept {
    step(i);
    return fit_terms_op<Fit>{}(values[i]);
  }
};

//! Adds two fit sums.
struct fit_plus_op {
  GRADCOMP_HOST_DEVICE gradcomp::detail::fit_sums
  operator()(const gradcomp::detail::fit_sums& a,
             const gradcomp::detail::fit_sums& b) const noexcept {
    return gradcomp::detail::combine(a, b);
  }
};

} // namespace gradcomp::cuda::detail
