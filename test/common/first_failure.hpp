// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief One assertion for a whole array: the index of the first element that fails a
//! predicate. An assertion per element (REQUIRE inside a loop over 70,000 values) costs far more
//! than the code under test, most of all in the sanitized builds; `REQUIRE(first_failure(n, ok)
//! == n)` checks the same property and names the first failing index when it fails.
#pragma once

#include <cstddef>

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

} // namespace gradcomp::test
