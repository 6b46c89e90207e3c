// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the quantizer tests check on every quantized message: each value an integer level
//! of its scale (counted here by hand), the wire round trip at its predicted size, the mean of
//! many stochastic draws against the input, and the direct mean |x| and L2 norm.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "catch.hpp"
#include "quantized_round_trip.hpp"

namespace gradcomp::test {

// |j| / levels of every value, checked to be an integer level with its scale (the message's,
// or its quantization segment's: counted here by hand).
inline void require_levels(const sparse_message& m) {
  REQUIRE(m.values_type == value_type::quantized);
  REQUIRE(m.dense);
  std::vector<float> scales;
  for (const quantization_segment& seg : m.quantization_segments) {
    scales.insert(scales.end(), seg.values, seg.scale);
  }
  if (m.quantization_segments.empty()) {
    scales.assign(m.values.size(), m.quantization_scale);
  }
  REQUIRE(scales.size() == m.values.size());
  for (std::size_t i = 0; i < m.values.size(); ++i) {
    const float v = m.values[i];
    REQUIRE(scales[i] > 0.0f);
    const double r = static_cast<double>(v) / scales[i] * m.quantization_levels;
    const double j = std::nearbyint(r);
    REQUIRE(std::abs(j) <= m.quantization_levels);
    REQUIRE(std::bit_cast<std::uint32_t>(
                quantized_value(scales[i], static_cast<std::int32_t>(j), m.quantization_levels)) ==
            std::bit_cast<std::uint32_t>(v));
  }
}

// The round trip (test::require_quantized_round_trip), its size 32 + 9 + ceil(n bits / 8).
inline void require_round_trip(const sparse_message& m, unsigned bits) {
  const std::vector<std::byte> wire = require_quantized_round_trip(m);
  CHECK(wire.size() == 32 + 9 + (m.nnz() * bits + 7) / 8);
}

inline double direct_mean_abs(const std::vector<float>& x) {
  double s = 0.0;
  for (const float v : x) {
    s += std::abs(static_cast<double>(v));
  }
  return s / static_cast<double>(x.size());
}

// The mean of `calls` messages of compress(x) against x: within 6 standard errors of the
// stochastic rounding's variance, (scale / levels)^2 f (1 - f) per element with f the fraction.
template <class C>
void require_unbiased(C c, const std::vector<float>& x, int calls) {
  std::vector<double> sum(x.size(), 0.0);
  sparse_message m;
  for (int t = 0; t < calls; ++t) {
    c.compress(x, m);
    require_levels(m);
    for (std::size_t i = 0; i < x.size(); ++i) {
      sum[i] += m.values[i];
    }
  }
  const double step = static_cast<double>(m.quantization_scale) / m.quantization_levels;
  bool any_random = false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = std::abs(static_cast<double>(x[i])) / step;
    const double f = r - std::floor(r);
    const double sd = step * std::sqrt(f * (1.0 - f) / calls);
    INFO("element " << i << " x " << x[i] << " mean " << sum[i] / calls);
    CHECK(std::abs(sum[i] / calls - x[i]) <= 6.0 * sd + 1e-6 * std::abs(x[i]) + 1e-7);
    any_random |= f > 0.05 && f < 0.95;
  }
  CHECK(any_random); // the test sees rounding that is random at all
}

} // namespace gradcomp::test
