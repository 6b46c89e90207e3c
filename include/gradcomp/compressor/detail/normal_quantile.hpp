// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The standard normal quantile function and a fast natural logarithm for fitting.
#pragma once

#include <gradcomp/detail/host_device.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace gradcomp::detail {

//! Phi^-1(p) for p in (0, 1): Acklam's rational approximation followed by one Newton step on
//! erfc, accurate to ~1e-12. Returns -inf / +inf at p = 0 / 1.
[[nodiscard]] inline double normal_quantile(double p) noexcept {
  if (p <= 0.0) {
    return -INFINITY;
  }
  if (p >= 1.0) {
    return INFINITY;
  }
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                          6.680131188771972e+01, -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                          3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  double x = 0.0;
  if (p < p_low) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - p_low) {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  // one Newton step: Phi(x) = erfc(-x / sqrt 2) / 2
  const double e = 0.5 * std::erfc(-x / std::numbers::sqrt2) - p;
  const double u = e * std::sqrt(2.0 * std::numbers::pi) * std::exp(x * x / 2.0);
  return x - u / (1.0 + x * u / 2.0);
}

//! ln(v) for finite v > 0 without a libm call (vectorisable): exponent from the bits, ln of the
//! mantissa m in [1, 2) by 2 atanh((m-1)/(m+1)) to four terms. Absolute error < 2e-5.
//! Subnormals are treated as if their exponent were -127 (good enough for a fit). Host and
//! CUDA device code.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float fast_log(float v) noexcept {
  const std::uint32_t bits = float_bits(v);
  const auto exponent = static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 127);
  const float m = bits_float((bits & 0x7fffffu) | 0x3f800000u);
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float ln_m = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7))));
  return exponent * 0.693147180559945309f + ln_m;
}

} // namespace gradcomp::detail
