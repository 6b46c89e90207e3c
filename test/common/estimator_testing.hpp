// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the estimating compressors' tests check on every message: exactly the elements at
//! or above the reported threshold (or the exact top-k where the call fell back), found here by
//! scanning the input, in ascending index order with the values unchanged, and a count within
//! the guard band.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "catch.hpp"
#include "first_failure.hpp"
#include "generators.hpp"

namespace gradcomp::test {

// The message must be exactly the elements with |v| >= threshold (when no fallback), or the
// exact top-k (when exact), in ascending index order, values unchanged.
inline void check_selection(const std::vector<float>& x,
                            const sparse_message& m,
                            const selection_stats& s,
                            double guard) {
  REQUIRE(ascending_unique_in_range(m));
  REQUIRE(s.k_selected == m.nnz());
  if (s.exact) {
    REQUIRE(m.indices == reference_top_k(x, s.k_target));
  } else {
    std::vector<std::uint32_t> expected;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::abs(x[i]) >= s.threshold) {
        expected.push_back(static_cast<std::uint32_t>(i));
      }
    }
    REQUIRE(m.indices == expected);
  }
  REQUIRE(first_failure(m.nnz(), [&](std::size_t j) { return m.values[j] == x[m.indices[j]]; }) ==
          m.nnz());
  if (x.size() > 0) {
    REQUIRE(in_guard_band(s.k_selected, s.k_target, guard));
  }
}

template <class C>
void run_static(C c, distribution dist, std::size_t n, std::uint64_t seed) {
  const auto x = make_values(dist, n, seed);
  sparse_message m;
  const selection_stats s = c.compress(x, m);
  CAPTURE(s.k_target, s.k_selected, s.threshold, s.fallback, s.adjust_rounds);
  check_selection(x, m, s, 2.0);
}

} // namespace gradcomp::test
