// SPDX-License-Identifier: Apache-2.0
// fp16 / bf16 conversions: exhaustive round trips and rounding against an independent
// reference (nearest representable value found by search over all 65536 patterns).
#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_array.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "../common/catch.hpp"
#include "../common/first_failure.hpp"

namespace sparse_value_type_test {

using namespace gradcomp::detail;

TEST_CASE("half -> float -> half is the identity on all 65536 patterns", "[float16]") {
  REQUIRE(gradcomp::test::first_failure(65536, [](std::size_t h) {
            const auto bits = static_cast<std::uint16_t>(h);
            const float f = half_bits_to_float(bits);
            return float_to_half_bits(f) == bits &&
                   (std::isnan(f) || float_to_half_bits_saturating(f) == bits);
          }) == 65536);
}

TEST_CASE("bf16 -> float -> bf16 is the identity on all 65536 patterns", "[float16]") {
  REQUIRE(gradcomp::test::first_failure(65536, [](std::size_t b) {
            const auto bits = static_cast<std::uint16_t>(b);
            return float_to_bfloat16_bits(bfloat16_bits_to_float(bits)) == bits;
          }) == 65536);
}

TEST_CASE("half decoding matches the IEEE definition", "[float16]") {
  CHECK(half_bits_to_float(0x3c00) == 1.0f);
  CHECK(half_bits_to_float(0xc000) == -2.0f);
  CHECK(half_bits_to_float(0x7bff) == 65504.0f);
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_bits_to_float(0x0400) == std::ldexp(1.0f, -14));
  CHECK(half_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(std::isinf(half_bits_to_float(0x7c00)));
  CHECK(std::isnan(half_bits_to_float(0x7e00)));
  CHECK(std::signbit(half_bits_to_float(0x8000)));
}

namespace {
// Independent reference: the finite half nearest to f (ties to the even pattern), by scanning
// the sorted list of all non-negative finite halves.
std::uint16_t nearest_half(float f) {
  static const std::vector<std::pair<float, std::uint16_t>> table = [] {
    std::vector<std::pair<float, std::uint16_t>> t;
    for (std::uint16_t h = 0; h <= 0x7bff; ++h) {
      t.emplace_back(half_bits_to_float(h), h);
    }
    return t;
  }();
  const float a = std::abs(f);
  const auto sign = static_cast<std::uint16_t>(std::signbit(f) ? 0x8000 : 0);
  auto it = std::lower_bound(table.begin(), table.end(), a,
                             [](const auto& e, float v) { return e.first < v; });
  if (it == table.end()) { // beyond 65504: rounds down to it below 65520, else infinity
    return static_cast<std::uint16_t>(sign | (a < 65520.0f ? 0x7bff : 0x7c00));
  }
  if (it == table.begin() || it->first == a) {
    return static_cast<std::uint16_t>(sign | it->second);
  }
  const auto below = it - 1;
  const double up = static_cast<double>(it->first) - a;
  const double down = a - static_cast<double>(below->first);
  std::uint16_t pick;
  if (up < down) {
    pick = it->second;
  } else if (down < up) {
    pick = below->second;
  } else {
    pick = (it->second & 1u) == 0 ? it->second : below->second;
  }
  return static_cast<std::uint16_t>(sign | pick);
}
} // namespace

TEST_CASE("float -> half rounds to nearest, ties to even", "[float16]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> exponent(100, 145); // subnormal .. overflow
  std::uniform_int_distribution<std::uint32_t> mantissa(0, 0x7fffff);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(200000);
  for (float& f : values) {
    f = std::bit_cast<float>((negative(rng) ? 0x80000000u : 0u) | (exponent(rng) << 23) |
                             mantissa(rng));
  }
  const std::size_t bad = gradcomp::test::first_failure(values.size(), [&](std::size_t i) {
    return float_to_half_bits(values[i]) == nearest_half(values[i]);
  });
  CAPTURE(bad < values.size() ? values[bad] : 0.0f);
  REQUIRE(bad == values.size());
  // exact halfway cases
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);     // tie -> even
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02); // tie -> even
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);
  CHECK(float_to_half_bits_saturating(65520.0f) == 0x7bff);
  CHECK(float_to_half_bits_saturating(-1e30f) == 0xfbff);
  CHECK(float_to_half_bits_saturating(-INFINITY) == 0xfc00);
}

TEST_CASE("float -> bf16 rounds to nearest, ties to even", "[float16]") {
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80); // tie -> even
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82); // tie -> even
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> any(0, 0x7f000000); // below rounding to inf
  for (int i = 0; i < 100000; ++i) {
    const float f = std::bit_cast<float>(any(rng));
    const float r = bfloat16_bits_to_float(float_to_bfloat16_bits(f));
    const float lo =
        bfloat16_bits_to_float(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16));
    const float hi = std::nextafter(lo, INFINITY) == lo
                         ? lo
                         : bfloat16_bits_to_float(static_cast<std::uint16_t>(
                               (std::bit_cast<std::uint32_t>(f) >> 16) + 1));
    CAPTURE(f);
    REQUIRE((r == lo || r == hi));
    REQUIRE(std::abs(static_cast<double>(r) - f) <=
            std::abs(static_cast<double>(lo == r ? hi : lo) - f));
  }
}

TEST_CASE("round_to keeps fp32 and rounds to the wire type", "[float16]") {
  using gradcomp::round_to;
  using gradcomp::value_type;
  CHECK(round_to(value_type::fp32, 0.1f) == 0.1f);
  CHECK(round_to(value_type::fp16, 0.1f) == half_bits_to_float(float_to_half_bits(0.1f)));
  CHECK(round_to(value_type::fp16, 1e6f) == 65504.0f);
  CHECK(round_to(value_type::bf16, 0.1f) == bfloat16_bits_to_float(float_to_bfloat16_bits(0.1f)));
}

TEST_CASE("rounding arrays to fp16 equals round_to on every kind of value", "[float16]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::vector<float> values(100003);
  for (float& v : values) {
    v = std::bit_cast<float>(any_bits(rng)); // every exponent: subnormals, huge, inf, NaN
  }
  for (std::size_t i = 0; i < values.size(); i += 97) {
    values[i] = std::ldexp(static_cast<float>(i % 1000) - 500.0f, -20); // half subnormals
  }
  values[5] = 65519.0f;
  values[6] = 65520.0f;
  values[7] = -INFINITY;
  std::vector<float> rounded = values;
  gradcomp::round_values_to(gradcomp::value_type::fp16, rounded);
  const std::size_t bad = gradcomp::test::first_failure(values.size(), [&](std::size_t i) {
    const float expected = gradcomp::round_to(gradcomp::value_type::fp16, values[i]);
    return std::bit_cast<std::uint32_t>(rounded[i]) == std::bit_cast<std::uint32_t>(expected);
  });
  CAPTURE(bad < values.size() ? values[bad] : 0.0f);
  REQUIRE(bad == values.size());
}

// The wire's fp16 sections: the array conversions (F16C where the CPU has it) against the
// element conversions, bit for bit, with lengths that leave a tail after the 8-wide blocks.
TEST_CASE("fp16 array conversions equal the element conversions bit for bit", "[float16]") {
  SECTION("every half pattern, NaNs included, to floats") {
    std::vector<std::byte> bytes(2 * 65536);
    for (std::uint32_t h = 0; h < 65536; ++h) {
      store_le<std::uint16_t>(bytes.data() + 2 * h, static_cast<std::uint16_t>(h));
    }
    for (const std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
      const std::size_t n = 65536 - offset;
      std::vector<float> out(n);
      halves_to_floats(bytes.data() + 2 * offset, n, out.data());
      REQUIRE(gradcomp::test::first_failure(n, [&](std::size_t i) {
                const auto h = static_cast<std::uint16_t>(i + offset);
                return std::bit_cast<std::uint32_t>(out[i]) ==
                       std::bit_cast<std::uint32_t>(half_bits_to_float(h));
              }) == n);
    }
  }
  SECTION("floats of every kind, exact ties included, to halves") {
    std::mt19937 rng(12);
    std::uniform_int_distribution<std::uint32_t> any_bits;
    std::vector<float> values(200005);
    for (float& v : values) {
      v = std::bit_cast<float>(any_bits(rng)); // every exponent: subnormals, huge, inf, NaN
    }
    for (std::size_t i = 0; i < 65535; ++i) { // the midpoint of every pair of adjacent halves
      const double lo = half_bits_to_float(static_cast<std::uint16_t>(i));
      const double hi = half_bits_to_float(static_cast<std::uint16_t>(i + 1));
      if (std::isfinite(lo) && std::isfinite(hi)) {
        values[3 * i] = static_cast<float>((lo + hi) / 2); // exact: 12 significant bits
      }
    }
    values[1] = 65519.0f; // the largest value that rounds to 65504
    values[2] = 65520.0f; // the smallest that overflows to infinity
    std::vector<std::byte> bytes(2 * values.size());
    floats_to_halves(values.data(), values.size(), bytes.data());
    const std::size_t bad = gradcomp::test::first_failure(values.size(), [&](std::size_t i) {
      return load_le<std::uint16_t>(bytes.data() + 2 * i) == float_to_half_bits(values[i]);
    });
    CAPTURE(bad < values.size() ? values[bad] : 0.0f);
    REQUIRE(bad == values.size());
  }
}

TEST_CASE("value_type names round-trip", "[float16]") {
  for (const auto t :
       {gradcomp::value_type::fp32, gradcomp::value_type::fp16, gradcomp::value_type::bf16}) {
    CHECK(gradcomp::value_type_from_string(gradcomp::to_string(t)) == t);
  }
  CHECK_FALSE(gradcomp::value_type_from_string("fp8").has_value());
  CHECK_FALSE(gradcomp::value_type_from_string("FP16").has_value());
}

} // namespace sparse_value_type_test
