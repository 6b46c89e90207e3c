// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit-exact conversions between float and IEEE binary16 / bfloat16 (round to nearest,
//! ties to even). half -> float -> half is the identity on all 65536 bit patterns, NaN payloads
//! included, which the wire decoder's round-trip property relies on. Callable from CUDA device code
//! (GRADCOMP_HOST_DEVICE), so that device rounding equals host rounding bit for bit.
#pragma once

#include <gradcomp/detail/host_device.hpp>

#include <cstdint>

namespace gradcomp::detail {

[[nodiscard]] GRADCOMP_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) { // infinity or NaN: keep the payload
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) { // normal
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa != 0) { // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | ((112u - static_cast<std::uint32_t>(e)) << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign; // signed zero
  }
  return bits_float(bits);
}

//! Rounds to binary16; values beyond the largest finite half become +-infinity (IEEE).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t bits = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) { // infinity or NaN
    if (abs == 0x7f800000u) {
      return static_cast<std::uint16_t>(sign | 0x7c00u);
    }
    std::uint32_t payload = (abs >> 13) & 0x3ffu;
    return static_cast<std::uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 0x200u));
  }
  if (abs >= 0x477ff000u) { // rounds to >= 65520: overflow
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {   // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) { // below half the smallest subnormal (2^-25): zero
      return sign;
    }
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent; // 14..24
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) {
      ++result;
    }
    return static_cast<std::uint16_t>(sign | result);
  }
  // normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits, without a
  // data-dependent branch (a carry into the exponent is the correct rounding)
  const std::uint32_t result = ((abs >> 13) - (112u << 10));
  const std::uint32_t remainder = abs & 0x1fffu;
  const std::uint32_t round_up = static_cast<std::uint32_t>(remainder > 0x1000u) |
                                 (static_cast<std::uint32_t>(remainder == 0x1000u) & result);
  return static_cast<std::uint16_t>(sign | (result + (round_up & 1u)));
}

//! Like float_to_half_bits, but finite inputs beyond +-65504 saturate to +-65504.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint16_t
float_to_half_bits_saturating(float f) noexcept {
  const std::uint16_t h = float_to_half_bits(f);
  const std::uint32_t abs = float_bits(f) & 0x7fffffffu;
  if ((h & 0x7fffu) == 0x7c00u && abs < 0x7f800000u) {
    return static_cast<std::uint16_t>((h & 0x8000u) | 0x7bffu);
  }
  return h;
}

[[nodiscard]] GRADCOMP_HOST_DEVICE inline float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t bits = float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) { // NaN: truncate, keep it a NaN
    const auto upper = static_cast<std::uint16_t>(bits >> 16);
    return (upper & 0x7fu) != 0 ? upper : static_cast<std::uint16_t>(upper | 0x40u);
  }
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

} // namespace gradcomp::detail
