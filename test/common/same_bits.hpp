// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit-for-bit comparison of float sequences (what "bit-identical" means in the tests:
//! -0 differs from +0, and NaNs compare by payload), and its variant for results of arithmetic
//! on NaN, whose payload IEEE 754 leaves open.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

namespace gradcomp::test {

//! True when a and b have the same length and every pair of elements has the same bits.
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

//! Like same_bits, except that any NaN matches any NaN. For comparing results of arithmetic across
//! processors: IEEE 754 leaves the payload of a NaN produced from a NaN operand open, and x86
//! returns the operand's (0x7fc00000 for 0 + quiet_NaN) where NVIDIA GPUs return the canonical
//! 0x7fffffff. Every other value, -0 and the infinities included, must match bit for bit.
inline bool same_bits_or_nan(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return (std::isnan(x) && std::isnan(y)) ||
                  std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

} // namespace gradcomp::test
