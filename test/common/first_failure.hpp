// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief One assertion for a whole array: the index of the first element that fails a
//! predicate (and error feedback's bit-for-bit conservation, the tests' most common one). An
//! assertion per element (REQUIRE inside a loop over 70,000 values) costs far more than the code
//! under test, most of all in the sanitized builds; `REQUIRE(first_failure(n, ok)
//! == n)` checks the same property and names the first failing index when it fails.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace gradcomp::test {

//! The smallest i in [0, n) with !ok(i), or n when ok holds for every index. Stops at the first
//! failure; O(n) calls of ok.
template <class Predicate>
std::size_t first_failure(std::size_t n, Predicate&& ok) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!ok(i)) {
      return i;
    }
  }
  return n;
}

//! Error feedback's conservation, bit for bit: the smallest i with the bits of
//! sent[i] + residual[i] other than those of (old_residual[i] + input[i]) + 0 (the accumulation;
//! + 0 makes -0 the +0 the float sum gives), or sent.size() when every element conserves.
//! Precondition: the four spans have the same length. O(n).
inline std::size_t first_unconserved(std::span<const float> sent,
                                     std::span<const float> residual,
                                     std::span<const float> old_residual,
                                     std::span<const float> input) {
  return first_failure(sent.size(), [&](std::size_t i) {
    return std::bit_cast<std::uint32_t>(sent[i] + residual[i]) ==
           std::bit_cast<std::uint32_t>((old_residual[i] + input[i]) + 0.0f);
  });
}

} // namespace gradcomp::test
