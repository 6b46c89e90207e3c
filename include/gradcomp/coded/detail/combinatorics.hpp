// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Internals of gradcomp::coded: binomial coefficients with overflow detection, checked
//! products, the parameter checks shared by the placement and the cost model, and the
//! lexicographic enumeration of k-subsets. Standard library only.
#pragma once

#include <gradcomp/error.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

namespace gradcomp::coded::detail {

//! @brief C(n, k) exactly, or std::nullopt if it does not fit std::size_t. C(n, k) = 0 for
//! k > n. O(min(k, n - k)) multiplications; every intermediate value is itself an exact binomial
//! coefficient C(n - k' + i, i), so the result is exact whenever it fits.
[[nodiscard]] constexpr std::optional<std::size_t> checked_binomial(std::size_t n,
                                                                    std::size_t k) noexcept {
  if (k > n) {
    return std::size_t{0};
  }
  k = k < n - k ? k : n - k;
  std::size_t c = 1; // C(n - k + i, i) after step i
  for (std::size_t i = 1; i <= k; ++i) {
    // c * (n - k + i) / i is an integer; divide by the common factor first so that the
    // product only overflows when the result does.
    const std::size_t factor = n - k + i;
    const std::size_t g = std::gcd(c, i);
    const std::size_t reduced_c = c / g;
    const std::size_t reduced_i = i / g; // divides factor, since gcd(reduced_c, reduced_i) = 1
    const std::size_t reduced_factor = factor / reduced_i;
    if (reduced_factor != 0 &&
        reduced_c > std::numeric_limits<std::size_t>::max() / reduced_factor) {
      return std::nullopt;
    }
    c = reduced_c * reduced_factor;
  }
  return c;
}

//! @brief a * b, or std::nullopt if it does not fit std::uint64_t.
[[nodiscard]] constexpr std::optional<std::uint64_t> checked_product(std::uint64_t a,
                                                                     std::uint64_t b) noexcept {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) {
    return std::nullopt;
  }
  return a * b;
}

//! @brief C(n, k), the count of `what` (for the message).
//! @throws std::invalid_argument naming n, k and std::size_t's limit if it does not fit.
[[nodiscard]] inline std::size_t binomial_or_throw(std::size_t n, std::size_t k, const char* what) {
  const std::optional<std::size_t> c = checked_binomial(n, k);
  gradcomp::detail::require(c.has_value(), "the number of ", what, ", C(", n, ", ", k,
                            "), does not fit std::size_t (at most ",
                            std::numeric_limits<std::size_t>::max(), ")");
  return *c;
}

//! @brief a * b for message and byte counts.
//! @throws std::invalid_argument naming the operands if the product does not fit 64 bits.
[[nodiscard]] inline std::uint64_t
product_or_throw(std::uint64_t a, std::uint64_t b, const char* what) {
  const std::optional<std::uint64_t> p = checked_product(a, b);
  gradcomp::detail::require(p.has_value(), what, " = ", a, " x ", b,
                            " does not fit 64 bits (at most ",
                            std::numeric_limits<std::uint64_t>::max(), ")");
  return *p;
}

//! @brief The checks every coded function makes on (n, r): n >= 2 and 1 <= r < n.
//! @throws std::invalid_argument naming the value and the bound it broke.
inline void check_ranks_and_redundancy(int ranks, int redundancy) {
  gradcomp::detail::require(ranks >= 2, "coded exchange: rank count n = ", ranks, " is below 2");
  gradcomp::detail::require(redundancy >= 1, "coded exchange: redundancy r = ", redundancy,
                            " is below 1");
  gradcomp::detail::require(redundancy < ranks, "coded exchange: redundancy r = ", redundancy,
                            " is not below the rank count n = ", ranks, " (need 1 <= r < n)");
}

//! @brief Every k-subset of {0, ..., n-1} in lexicographic order, members ascending, written
//! one after the other (`count` x k ints, count = C(n, k), which the caller has checked).
//! O(count k) amortised.
[[nodiscard]] inline std::vector<int> lexicographic_subsets(int n, int k, std::size_t count) {
  std::vector<int> flat;
  flat.reserve(count * static_cast<std::size_t>(k));
  std::vector<int> c(static_cast<std::size_t>(k));
  std::iota(c.begin(), c.end(), 0);
  for (;;) {
    flat.insert(flat.end(), c.begin(), c.end());
    // advance: the rightmost member that can still grow grows, the rest follow it
    int i = k - 1;
    while (i >= 0 && c[static_cast<std::size_t>(i)] == n - k + i) {
      --i;
    }
    if (i < 0) {
      break;
    }
    ++c[static_cast<std::size_t>(i)];
    for (int j = i + 1; j < k; ++j) {
      c[static_cast<std::size_t>(j)] = c[static_cast<std::size_t>(j) - 1] + 1;
    }
  }
  return flat;
}

} // namespace gradcomp::coded::detail
