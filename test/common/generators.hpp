// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Seeded test inputs (gradient-like, heavy-tailed, constant, tied) and the independent
//! reference selection (sort and truncate) the compressor tests compare against.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::test {

enum class distribution { normal, heavy_tailed, constant, tied, with_zeros };

inline std::string name(distribution d) {
  switch (d) {
  case distribution::normal:
    return "normal";
  case distribution::heavy_tailed:
    return "heavy_tailed";
  case distribution::constant:
    return "constant";
  case distribution::tied:
    return "tied";
  case distribution::with_zeros:
    return "with_zeros";
  }
  return "?";
}

inline std::vector<float>
make_values(distribution d, std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, scale);
  std::student_t_distribution<float> student(3.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  std::bernoulli_distribution zero(0.7);
  for (float& v : x) {
    switch (d) {
    case distribution::normal:
      v = normal(rng);
      break;
    case distribution::heavy_tailed:
      v = scale * student(rng);
      break;
    case distribution::constant:
      v = -scale;
      break;
    case distribution::tied:
      v = scale * static_cast<float>(small(rng)); // few distinct magnitudes, many ties
      break;
    case distribution::with_zeros:
      v = zero(rng) ? 0.0f : normal(rng);
      break;
    }
  }
  return x;
}

//! Independent reference: order all elements by (|v| descending, index ascending), keep k, and
//! return their indices ascending.
inline std::vector<std::uint32_t> reference_top_k(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  auto magnitude = [&](std::uint32_t i) {
    return std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return magnitude(a) > magnitude(b); });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

//! True when indices are strictly ascending and below n.
inline bool ascending_unique_in_range(const sparse_message& m) {
  for (std::size_t i = 0; i < m.indices.size(); ++i) {
    if (m.indices[i] >= m.dense_length_elements || (i > 0 && m.indices[i - 1] >= m.indices[i])) {
      return false;
    }
  }
  return true;
}

//! Independent reference for an L2 norm: sqrt of the sum of squares in double, in index order.
inline double direct_norm(std::span<const float> x) {
  double s = 0.0;
  for (const float v : x) {
    s += static_cast<double>(v) * v;
  }
  return std::sqrt(s);
}

} // namespace gradcomp::test
