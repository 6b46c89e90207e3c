// SPDX-License-Identifier: Apache-2.0
// What the quantizing compressors (scaled_sign, terngrad, qsgd) share, and the quantized wire
// values: error feedback keeps acc - sent (within its float rounding); a resumed checkpoint
// draws what an uninterrupted run does, and its options are checked; the decoder rejects every
// malformed quantized section; non-finite values under each policy; concatenation keeps a shared
// scale, a segment per scale, and falls back to fp32 for other levels. Each quantizer alone:
// scaled_sign_test.cpp, terngrad_test.cpp, qsgd_test.cpp; by name: by_name_test.cpp.
#include <gradcomp/gradcomp.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/quantizer_testing.hpp"
#include "../common/same_bits.hpp"

namespace compressor_quantizer_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

using test::require_levels;
using test::require_round_trip;

namespace {

// An empty dense message of n elements with quantized values of this scale and levels.
sparse_message quantized_message(std::size_t n, float scale, std::uint32_t levels) {
  sparse_message m;
  m.clear(n);
  m.dense = true;
  m.values_type = value_type::quantized;
  m.quantization_scale = scale;
  m.quantization_levels = levels;
  return m;
}

} // namespace

TEMPLATE_TEST_CASE(
    "quantizers with error feedback keep acc - sent", "[quantizer]", scaled_sign, terngrad, qsgd) {
  const std::size_t n = 3000;
  error_feedback<TestType> ef(n);
  sparse_message m;
  for (int t = 0; t < 5; ++t) {
    const std::vector<float> g = test::make_values(test::distribution::heavy_tailed, n, 40 + t);
    const std::vector<float> before(ef.residual().begin(), ef.residual().end());
    ef.compress(g, m);
    require_levels(m);
    for (std::size_t i = 0; i < n; ++i) {
      const float acc = before[i] + g[i];
      const float r = ef.residual()[i];
      // residual = fl(acc - sent): off from the exact difference by at most half an ulp of r
      const double exact = static_cast<double>(acc) - static_cast<double>(m.values[i]);
      REQUIRE(std::abs(exact - r) <= 0.5 * std::abs(static_cast<double>(r)) * 0x1p-23 + 1e-45);
    }
  }
}

TEMPLATE_TEST_CASE("quantizers: a resumed checkpoint continues bit for bit",
                   "[quantizer]",
                   terngrad,
                   qsgd,
                   scaled_sign) {
  const std::vector<float> x = test::make_values(test::distribution::normal, 500, 2);
  error_feedback<TestType> whole(500), first(500);
  sparse_message a, b;
  whole.compress(x, a);
  first.compress(x, b);
  const std::vector<std::byte> saved = save_state(first);
  error_feedback<TestType> resumed(500);
  load_state(resumed, saved);
  for (int t = 0; t < 3; ++t) {
    whole.compress(x, a);
    resumed.compress(x, b);
    REQUIRE(test::same_bits(a.values, b.values));
  }
  CHECK(test::same_bits(whole.residual(), resumed.residual()));
}

TEST_CASE("quantizers: checkpoint options are checked", "[quantizer]") {
  error_feedback<qsgd> a(10, qsgd(15, 1));
  const std::vector<std::byte> saved = save_state(a);
  error_feedback<qsgd> other(10, qsgd(7, 1));
  CHECK_THROWS_WITH(load_state(other, saved), Contains("levels"));
  error_feedback<scaled_sign> s(10);
  const std::vector<std::byte> saved_sign = save_state(s);
  error_feedback<scaled_sign> rms(10, scaled_sign({.scale = sign_scale::rms}));
  CHECK_THROWS_WITH(load_state(rms, saved_sign), Contains("scale"));
}

TEST_CASE("quantized wire values: malformed sections are rejected with the reason",
          "[quantizer][wire]") {
  sparse_message m = quantized_message(5, 2.0f, 3);
  for (const int j : {-3, 0, 1, 3, -2}) {
    m.values.push_back(quantized_value(2.0f, j, 3));
  }
  m.validate();
  const std::vector<std::byte> good = encode(m);
  REQUIRE(good.size() == 32 + 9 + (5 * 3 + 7) / 8);
  const std::size_t values_at = 32; // dense: no index section
  const auto corrupt = [&](auto&& edit) { return test::corrupted(good, edit); };
  const auto rejects = test::require_rejected;
  // scale +0 marks a segment table, which the 2 code bytes cannot hold
  rejects(corrupt([&](auto& w) { std::memset(w.data() + values_at, 0, 4); }),
          "quantized segment table: 2 bytes left, its segment count needs 4");
  rejects(corrupt([&](auto& w) { w[values_at + 3] = std::byte{0x80}; }), // -0
          "quantized scale -0 is not finite and >= 2^-111 (nor +0, the mark of a segment table)");
  rejects(corrupt([&](auto& w) {
            const std::uint32_t nan = 0x7fc00000u;
            std::memcpy(w.data() + values_at, &nan, 4);
          }),
          "is not finite and >= 2^-111");
  rejects(corrupt([&](auto& w) { w[values_at + 4] = std::byte{0}; }),
          "quantized levels 0 outside [1, 32768]");
  rejects(corrupt([&](auto& w) { w[values_at + 8] = std::byte{4}; }),
          "quantized code width 4 bits for 3 levels (expected 3)");
  // first code: magnitude 3 | sign -> 7; make it magnitude 3 + sign 0 -> 6 is valid; use the
  // second code (value 0, code 0) as a negative zero: bits 3..5 of the first code byte
  rejects(corrupt([&](auto& w) { w[values_at + 9] |= std::byte{0x08}; }), "negative zero");
  // levels 2 with the same codes: magnitude 3 is above it (code width stays 3 bits)
  rejects(corrupt([&](auto& w) { w[values_at + 4] = std::byte{2}; }),
          "has magnitude 3 above the 2 levels");
  rejects(corrupt([&](auto& w) { w.back() |= std::byte{0x80}; }), "unused bits are not 0");
  rejects(corrupt([&](auto& w) { w.pop_back(); }), "code bytes");
  rejects(corrupt([&](auto& w) { w.push_back(std::byte{0}); }), "code bytes");
  // 1 level without a zero must use the 1-bit form
  sparse_message s = quantized_message(3, 1.0f, 1);
  s.values = {1.0f, -1.0f, 1.0f};
  std::vector<std::byte> w = encode(s);
  REQUIRE(w.size() == 32 + 9 + 1);
  w[values_at + 8] = std::byte{2};
  w[values_at + 9] = std::byte{0b10'11'10}; // the same values as 2-bit codes (2, 3, 2)
  rejects(w, "not the canonical 1-bit form");
  // a value off the grid cannot be encoded
  m.values[1] = 0.5f;
  CHECK_THROWS_WITH(encode(m), Contains("value 0.5 at position 1 is not scale 2 x j / 3"));
  CHECK_THROWS_AS(m.validate(), std::invalid_argument);
  m.values[1] = -0.0f; // a negative zero is not on the grid either
  CHECK_THROWS_WITH(encode(m), Contains("at position 1"));
}

TEST_CASE("quantizers: non-finite values", "[quantizer][nonfinite]") {
  std::vector<float> x = test::make_values(test::distribution::normal, 100, 8);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  sparse_message m;
  // propagate: the NaN is sent as is (the scale from the finite values), not encodable
  qsgd(15).compress(x, m);
  CHECK(std::isnan(m.values[17]));
  CHECK(std::isfinite(m.quantization_scale));
  CHECK_THROWS_WITH(encode(m), Contains("at position 17"));
  // skip_step: the NaN gradient value is accumulated as 0 (sent as +scale, the sign of 0), a
  // valid message
  error_feedback<scaled_sign> ef(100, scaled_sign({.nonfinite = nonfinite_policy::skip_step}));
  const selection_stats s = ef.compress(x, m);
  CHECK(s.nonfinite == 1);
  CHECK(m.values[17] == m.quantization_scale);
  CHECK(ef.residual()[17] == -m.quantization_scale);
  m.validate();
  require_round_trip(m, 1);
  // raise: named
  CHECK_THROWS_AS(terngrad({.nonfinite = nonfinite_policy::raise}).compress(x, m), nonfinite_error);
}

TEST_CASE("quantized parts concatenate with a shared scale, a segment per scale, or as fp32",
          "[quantizer]") {
  const std::vector<float> x = test::make_values(test::distribution::normal, 40, 9);
  sparse_message a, b, group;
  scaled_sign c;
  c.compress(std::span<const float>(x).first(20), a);
  c.compress(std::span<const float>(x).last(20), b);
  begin_concatenation(group, 40);
  append_concatenated(group, a, 0, true);
  append_concatenated(group, a, 20, false); // the same scale twice
  CHECK(group.values_type == value_type::quantized);
  CHECK(group.quantization_scale == a.quantization_scale);
  require_round_trip(group, 1);
  begin_concatenation(group, 40);
  append_concatenated(group, a, 0, true);
  append_concatenated(group, b, 20, false); // another scale: a segment each
  REQUIRE(a.quantization_scale != b.quantization_scale);
  CHECK(group.values_type == value_type::quantized);
  CHECK(group.quantization_segments ==
        std::vector<quantization_segment>{{20, a.quantization_scale}, {20, b.quantization_scale}});
  CHECK(test::same_bits(std::span<const float>(group.values).first(20), a.values));
  CHECK(test::same_bits(std::span<const float>(group.values).last(20), b.values));
  group.validate();
  // 1 bit each and the table: 4 + 2 x (1 + 4) bytes
  const std::vector<std::byte> wire = encode(group);
  CHECK(wire.size() == 32 + 9 + 14 + 5);
  CHECK(test::same_bits(decode(wire).values, group.values));
  // other levels: exact floats
  sparse_message t;
  terngrad().compress(std::span<const float>(x).last(20), t);
  qsgd(7).compress(std::span<const float>(x).last(20), b);
  begin_concatenation(group, 40);
  append_concatenated(group, t, 0, true);
  append_concatenated(group, b, 20, false);
  CHECK(group.values_type == value_type::fp32);
  CHECK(group.quantization_levels == 0);
  CHECK(group.quantization_segments.empty());
  CHECK(test::same_bits(std::span<const float>(group.values).first(20), t.values));
  CHECK(test::same_bits(std::span<const float>(group.values).last(20), b.values));
}

} // namespace compressor_quantizer_test
