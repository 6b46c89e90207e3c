// SPDX-License-Identifier: Apache-2.0
// Quantized messages with several scales (sparse_message::quantization_segments): the
// quantizers' buckets (each bucket bit for bit what the one-scale quantizer makes of it alone,
// with the same random stream), the wire's segment table (bytes = the cost model's, a round trip
// gives back the same bits, every malformed table rejected with the reason, the size bounds
// hold for the worst case), slicing and validation.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi/detail/shards.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../../common/catch.hpp"
#include "../../common/generators.hpp"
#include "../../common/quantized_round_trip.hpp"
#include "../../common/same_bits.hpp"

namespace mpi_detail_shards_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

std::vector<std::byte> require_round_trip(const sparse_message& m) {
  return test::require_quantized_round_trip(m);
}

// A dense quantized message of `levels` levels whose segment s has scale scales[s] and
// counts[s] values with codes j cycling through -levels..levels.
sparse_message segmented(const std::vector<std::uint64_t>& counts,
                         const std::vector<float>& scales,
                         std::uint32_t levels) {
  sparse_message m;
  std::uint64_t n = 0;
  for (const std::uint64_t c : counts) {
    n += c;
  }
  m.clear(n);
  m.dense = true;
  m.values_type = value_type::quantized;
  m.quantization_levels = levels;
  std::int32_t j = -static_cast<std::int32_t>(levels);
  for (std::size_t s = 0; s < counts.size(); ++s) {
    m.quantization_segments.push_back({counts[s], scales[s]});
    for (std::uint64_t i = 0; i < counts[s]; ++i) {
      m.values.push_back(quantized_value(scales[s], j, levels));
      j = j == static_cast<std::int32_t>(levels) ? -static_cast<std::int32_t>(levels) : j + 1;
    }
  }
  return m;
}

} // namespace

TEST_CASE("qsgd buckets: each bucket is what one-scale QSGD makes of it alone", "[quantizer]") {
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 1300, 11);
  for (const std::uint32_t levels : {1u, 15u, 255u}) {
    INFO("levels " << levels);
    qsgd bucketed({.levels = levels, .seed = 5, .bucket_elements = 512});
    qsgd whole({.levels = levels, .seed = 5, .bucket_elements = 0});
    CHECK(qsgd(levels).bucket_elements() == 512); // the default
    sparse_message m, part;
    const selection_stats stats = bucketed.compress(x, m);
    REQUIRE(m.quantization_segments.size() == 3);
    float largest = 0.0f;
    std::size_t first = 0;
    for (const std::uint64_t count : {512u, 512u, 276u}) {
      const std::span<const float> bucket = std::span<const float>(x).subspan(first, count);
      // the same random stream: the one-scale quantizer draws for the buckets in turn
      whole.compress(bucket, part);
      const quantization_segment& seg = m.quantization_segments[first / 512];
      CHECK(seg.values == count);
      CHECK(seg.scale == static_cast<float>(test::direct_norm(bucket)));
      CHECK(seg.scale == part.quantization_scale);
      CHECK(test::same_bits(std::span<const float>(m.values).subspan(first, count), part.values));
      largest = std::max(largest, seg.scale);
      first += count;
    }
    CHECK(stats.threshold == largest);
    CHECK(m.quantization_scale == 0.0f);
    const std::vector<std::byte> wire = require_round_trip(m);
    // the wire's bytes are the cost model's: prefix, table (4 + 3 x (2-byte varint + 4)), codes
    const bool zero = std::any_of(m.values.begin(), m.values.end(), [](float v) { return v == 0; });
    const unsigned bits = quantized_code_bits(levels, zero);
    CHECK(wire.size() == 32 + 9 + 4 + 3 * 6 + (1300 * bits + 7) / 8);
    const schedule::message_format format{.quantized_bits = bits, .quantized_bucket_elements = 512};
    CHECK(wire.size() == 32 + format.bytes(1300));
  }
  // a bucket at least n, and bucket 0: one scale, no table
  sparse_message m;
  qsgd({.levels = 15, .bucket_elements = 1300}).compress(x, m);
  CHECK(m.quantization_segments.empty());
  CHECK(m.quantization_scale == static_cast<float>(test::direct_norm(x)));
  CHECK(schedule::message_format{.quantized_bits = 5, .quantized_bucket_elements = 1300}.bytes(
            1300) == 9 + (1300 * 5 + 7) / 8);
}

TEST_CASE("scaled_sign buckets: the mean |x| of each; a zero bucket sends scale 1 and zeros",
          "[quantizer]") {
  std::vector<float> x = test::make_values(test::distribution::normal, 300, 3);
  std::fill(x.begin() + 100, x.begin() + 200, 0.0f);
  scaled_sign c({.bucket_elements = 100});
  sparse_message m;
  const selection_stats stats = c.compress(x, m);
  REQUIRE(m.quantization_segments.size() == 3);
  for (std::size_t b = 0; b < 3; ++b) {
    const std::span<const float> bucket = std::span<const float>(x).subspan(100 * b, 100);
    double mean_abs = 0.0;
    for (const float v : bucket) {
      mean_abs += std::abs(static_cast<double>(v));
    }
    mean_abs /= 100.0;
    const float expected = b == 1 ? 1.0f : static_cast<float>(mean_abs);
    CHECK(m.quantization_segments[b].scale == expected);
    for (std::size_t i = 0; i < 100; ++i) {
      const float v = m.values[100 * b + i];
      REQUIRE(v == (b == 1 ? 0.0f : (bucket[i] >= 0.0f ? expected : -expected)));
    }
  }
  CHECK(stats.threshold ==
        std::max(m.quantization_segments[0].scale, m.quantization_segments[2].scale));
  require_round_trip(m); // 2 bits (a zero), three segments
  CHECK(encoded_size_bytes(m) == 32 + 9 + 4 + 3 * 5 + 300 * 2 / 8);
}

TEST_CASE("quantizers: the bucket is a checked checkpoint option and a by-name setting",
          "[quantizer]") {
  error_feedback<qsgd> a(10, qsgd({.levels = 15, .bucket_elements = 512}));
  const std::vector<std::byte> saved = save_state(a);
  error_feedback<qsgd> other(10, qsgd({.levels = 15, .bucket_elements = 64}));
  CHECK_THROWS_WITH(load_state(other, saved), Contains("option 'bucket_elements' differs"));
  for (const std::string_view name : quantizer_names) {
    const auto bucket = [&](named_compressor_settings s) {
      return with_quantizer(name, s, [](const auto& c) { return c.bucket_elements(); });
    };
    CHECK(bucket({}) == (name == "qsgd" ? 512u : 0u));
    CHECK(bucket({.bucket_elements = 33}) == 33u);
  }
}

TEST_CASE("quantized segment tables: malformed ones are rejected with the reason",
          "[quantizer][wire]") {
  // 5 values at 3 levels (3-bit codes: 2 code bytes) in segments of 2 and 3
  const sparse_message m = segmented({2, 3}, {2.0f, 0.5f}, 3);
  const std::vector<std::byte> good = require_round_trip(m);
  REQUIRE(good.size() == 32 + 9 + 4 + 2 * 5 + 2);
  const std::size_t table = 32 + 9; // dense: no index section; after the prefix
  const auto corrupt = [&](auto&& edit) { return test::corrupted(good, edit); };
  const auto rejects = test::require_rejected;
  const auto put_u32 = [](std::vector<std::byte>& w, std::size_t at, std::uint32_t v) {
    for (int b = 0; b < 4; ++b) {
      w[at + b] = static_cast<std::byte>((v >> (8 * b)) & 0xffu);
    }
  };
  rejects(corrupt([&](auto& w) { put_u32(w, table, 0); }),
          "quantized segment table: 0 segments for 5 values (expected 1 to 5)");
  rejects(corrupt([&](auto& w) { put_u32(w, table, 6); }), "6 segments for 5 values");
  rejects(corrupt([&](auto& w) { put_u32(w, table, 3); }), "3 segments need at least 15 bytes");
  rejects(corrupt([&](auto& w) { w[table + 4] = std::byte{0}; }),
          "quantized segment 0 has 0 values, 5 of the 5 remain");
  rejects(corrupt([&](auto& w) { w[table + 9] = std::byte{4}; }),
          "quantized segment 1 has 4 values, 3 of the 5 remain");
  rejects(corrupt([&](auto& w) { w[table + 9] = std::byte{2}; }),
          "quantized segments hold 4 values, the message carries 5");
  rejects(corrupt([&](auto& w) { w[table + 4] = std::byte{0x82}; }),
          "malformed varint count of segment 0");
  rejects(corrupt([&](auto& w) { put_u32(w, table + 5, 0x7fc00000u); }),
          "quantized segment 0 scale nan is not finite and >= 2^-111");
  rejects(corrupt([&](auto& w) { put_u32(w, table + 10, 0u); }),
          "quantized segment 1 scale 0 is not finite and >= 2^-111");
  rejects(corrupt([&](auto& w) { w.pop_back(); }), "code bytes");
  rejects(corrupt([&](auto& w) { w.push_back(std::byte{0}); }), "code bytes");
  // a code above the levels is checked in segments as without them
  rejects(corrupt([&](auto& w) { w[32 + 4] = std::byte{2}; }), "above the 2 levels");
}

TEST_CASE("quantized segments: encode and validate name the bad segment", "[quantizer][wire]") {
  sparse_message m = segmented({2, 3}, {2.0f, 0.5f}, 3);
  m.quantization_segments[1].values = 2; // 4 of 5
  CHECK_THROWS_WITH(encode(m), Contains("quantization segments hold 4 values, the message "
                                        "carries 5"));
  CHECK_THROWS_WITH(m.validate(), Contains("hold 4 values"));
  m.quantization_segments = {{2, 2.0f}, {0, 0.5f}, {3, 0.5f}};
  CHECK_THROWS_WITH(m.validate(), Contains("quantization segment 1 has 0 values, outside [1, "));
  m.quantization_segments = {{2, 2.0f}, {3, -0.5f}};
  CHECK_THROWS_WITH(encode(m), Contains("quantization segment 1 scale -0.5 is not finite"));
  // a value on the grid of another segment's scale
  m = segmented({2, 3}, {2.0f, 0.5f}, 3);
  m.values[4] = quantized_value(2.0f, 1, 3);
  CHECK_THROWS_WITH(encode(m), Contains("at position 4 is not scale 0.5 x j / 3"));
  // segments on a message that is not quantized
  sparse_message f;
  f.clear(1);
  f.dense = true;
  f.values = {1.0f};
  f.quantization_segments = {{1, 1.0f}};
  CHECK_THROWS_WITH(f.validate(), Contains("value type fp32 carries 1 quantization segments"));
}

TEST_CASE("quantized segments: the worst case stays within max_encoded_bytes", "[wire]") {
  for (const std::uint64_t nnz : {1u, 2u, 3u, 100u}) {
    // a segment per value, 17-bit codes, and sparse u32 / varint indices far apart
    sparse_message m = segmented(std::vector<std::uint64_t>(nnz, 1), std::vector<float>(nnz, 1.0f),
                                 max_quantization_levels);
    m.dense = false;
    m.dense_length_elements = std::uint64_t{1} << 32;
    for (std::uint64_t i = 0; i < nnz; ++i) {
      m.indices.push_back(static_cast<std::uint32_t>(i * (0xffffffffu / nnz)));
    }
    for (const index_encoding enc : {index_encoding::u32, index_encoding::delta_varint}) {
      INFO("nnz " << nnz);
      const std::vector<std::byte> wire = encode(m, enc);
      CHECK(wire.size() <= max_encoded_bytes(nnz));
      CHECK(test::same_bits(decode(wire).values, m.values));
    }
  }
}

TEST_CASE("quantized segments: a slice keeps the segments it covers", "[quantizer]") {
  const sparse_message m = segmented({3, 4, 5}, {1.0f, 2.0f, 4.0f}, 7);
  sparse_message part;
  mpi::detail::slice_message(m, 2, 9, part);
  CHECK(part.quantization_segments ==
        std::vector<quantization_segment>{{1, 1.0f}, {4, 2.0f}, {2, 4.0f}});
  CHECK(test::same_bits(part.values, std::span<const float>(m.values).subspan(2, 7)));
  require_round_trip(part);
  // inside one segment: one scale, no table
  mpi::detail::slice_message(m, 3, 7, part);
  CHECK(part.quantization_segments.empty());
  CHECK(part.quantization_scale == 2.0f);
  require_round_trip(part);
  // an empty slice is a valid empty message
  mpi::detail::slice_message(m, 5, 5, part);
  CHECK(part.nnz() == 0);
  require_round_trip(part);
  // sparse: positions, not indices, decide the segments
  sparse_message s = segmented({2, 2}, {1.0f, 2.0f}, 7);
  s.dense = false;
  s.dense_length_elements = 100;
  s.indices = {10, 20, 30, 40};
  mpi::detail::slice_message(s, 15, 35, part); // indices 20 and 30: one of each segment
  CHECK(part.indices == std::vector<std::uint32_t>{5, 15});
  CHECK(part.quantization_segments == std::vector<quantization_segment>{{1, 1.0f}, {1, 2.0f}});
  require_round_trip(part);
}

} // namespace mpi_detail_shards_test
