// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit-for-bit comparison of float sequences (what "bit-identical" means in the tests:
//! -0 differs from +0, and NaNs compare by payload).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>

namespace gradcomp::test {

//! True when a and b have the same length and every pair of elements has the same bits.
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

} // namespace gradcomp::test
