// SPDX-License-Identifier: Apache-2.0
// The wire format: lossless round trips for every layout, index encoding and value type, exact
// sizes, and rejection of every malformed message with a wire_error (never UB).
#include <gradcomp/sparse/wire.hpp>

#include <cstring>
#include <limits>
#include <random>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace sparse_wire_test {

using gradcomp::decode;
using gradcomp::encode;
using gradcomp::index_encoding;
using gradcomp::sparse_message;
using gradcomp::value_type;
using gradcomp::wire_error;

namespace {

sparse_message random_sparse(std::size_t n, double density, value_type vt, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution pick(density);
  std::normal_distribution<float> normal;
  sparse_message m;
  m.clear(n);
  m.values_type = vt;
  for (std::size_t i = 0; i < n; ++i) {
    if (pick(rng)) {
      m.indices.push_back(static_cast<std::uint32_t>(i));
      m.values.push_back(gradcomp::round_to(vt, normal(rng)));
    }
  }
  return m;
}

std::vector<std::byte> bytes_of(std::initializer_list<int> list) {
  std::vector<std::byte> out;
  for (int b : list) {
    out.push_back(static_cast<std::byte>(b));
  }
  return out;
}

void put_u64(std::vector<std::byte>& b, std::size_t offset, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    b[offset + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  }
}

} // namespace

TEST_CASE("wire round trip is lossless for every encoding and value type", "[wire]") {
  const auto vt = GENERATE(value_type::fp32, value_type::fp16, value_type::bf16);
  const auto enc = GENERATE(index_encoding::u32, index_encoding::delta_varint);
  const std::size_t n = GENERATE(0, 1, 2, 127, 128, 100000);
  const double density = GENERATE(0.001, 0.3, 1.0);
  CAPTURE(gradcomp::to_string(vt), gradcomp::to_string(enc), n, density);
  const sparse_message m = random_sparse(n, density, vt, n * 31 + 7);
  const auto bytes = encode(m, enc);
  CHECK(bytes.size() == gradcomp::encoded_size_bytes(m, enc));
  const sparse_message d = decode(bytes);
  CHECK(d.dense_length_elements == m.dense_length_elements);
  CHECK_FALSE(d.dense);
  CHECK(d.values_type == vt);
  CHECK(d.indices == m.indices);
  CHECK(d.values == m.values);
  CHECK(encode(d, enc) == bytes);
}

TEST_CASE("dense messages encode without indices", "[wire]") {
  sparse_message m;
  m.clear(5);
  m.dense = true;
  m.values = {1.0f, -2.0f, 0.0f, 3.5f, 1e-3f};
  const auto bytes = encode(m, index_encoding::delta_varint); // encoding is ignored for dense
  CHECK(bytes.size() == gradcomp::wire_header_bytes + 5 * 4);
  CHECK(static_cast<int>(bytes[7]) == 0);
  const sparse_message d = decode(bytes);
  CHECK(d.dense);
  CHECK(d.indices.empty());
  CHECK(d.values == m.values);
}

TEST_CASE("a sparse message cannot be encoded without indices", "[wire]") {
  sparse_message m;
  m.clear(4);
  m.indices = {1};
  m.values = {1.0f};
  CHECK_THROWS_AS(encode(m, index_encoding::none), std::invalid_argument);
}

TEST_CASE("delta + varint is smaller than u32 at low density", "[wire]") {
  const sparse_message m = random_sparse(1 << 20, 0.01, value_type::fp32, 5);
  const double per_index =
      static_cast<double>(gradcomp::encoded_size_bytes(m, index_encoding::delta_varint) -
                          gradcomp::wire_header_bytes - 4 * m.nnz()) /
      static_cast<double>(m.nnz());
  CHECK(per_index > 1.0);
  // docs/compressors.md, "Index cost of delta + varint": 1.28 bytes per index at d = 0.01
  CHECK(per_index < 1.5);
}

TEST_CASE("expected_index_bytes prices uniformly spread indices as encode() writes them",
          "[wire]") {
  CHECK(gradcomp::expected_index_bytes(index_encoding::u32, 0.3) == 4.0);
  CHECK(gradcomp::expected_index_bytes(index_encoding::none, 0.3) == 0.0);
  CHECK(gradcomp::expected_index_bytes(index_encoding::delta_varint, 1.0) == 1.0);
  // the measured index section of random messages (encode's exact size minus the header and
  // the fp32 values) against the expectation, within 1 %
  for (const double d : {0.0005, 0.01, 0.05, 0.3}) {
    const sparse_message m = random_sparse(2000000, d, value_type::fp32, 17);
    REQUIRE(m.nnz() > 500);
    const double index_bytes =
        static_cast<double>(gradcomp::encoded_size_bytes(m, index_encoding::delta_varint) -
                            gradcomp::wire_header_bytes - 4 * m.nnz()) /
        static_cast<double>(m.nnz());
    CHECK(gradcomp::expected_index_bytes(index_encoding::delta_varint, d) ==
          Approx(index_bytes).epsilon(0.01));
  }
  CHECK(gradcomp::expected_index_bytes(index_encoding::delta_varint, 0.01) ==
        Approx(1.2763).epsilon(1e-4)); // 1 + 0.99^128
  CHECK_THROWS_WITH(gradcomp::expected_index_bytes(index_encoding::u32, 0.0),
                    Catch::Matchers::Contains("density 0 is outside (0, 1]"));
  CHECK_THROWS_AS(gradcomp::expected_index_bytes(index_encoding::delta_varint, 1.5),
                  std::invalid_argument);
}

TEST_CASE("the header has the documented layout", "[wire]") {
  sparse_message m;
  m.clear(300);
  m.values_type = value_type::fp16;
  m.indices = {2, 299};
  m.values = {1.0f, -2.0f};
  const auto b = encode(m, index_encoding::delta_varint);
  CHECK(std::memcmp(b.data(), "GCSM", 4) == 0);
  CHECK(static_cast<int>(b[4]) == 1);
  CHECK(static_cast<int>(b[5]) == 0);
  CHECK(static_cast<int>(b[6]) == 2);
  CHECK(static_cast<int>(b[7]) == 2);
  CHECK(static_cast<int>(b[8]) == 44); // 300 = 0x012c
  CHECK(static_cast<int>(b[9]) == 1);
  CHECK(static_cast<int>(b[16]) == 2);
  CHECK(static_cast<int>(b[24]) == 3); // varints: 2 (1 byte), 296 (2 bytes)
  CHECK(static_cast<int>(b[32]) == 2);
  CHECK(static_cast<int>(b[33]) == (296 & 0x7f | 0x80));
  CHECK(static_cast<int>(b[34]) == 296 >> 7);
  CHECK(static_cast<int>(b[35]) == 0x00); // 1.0 as fp16 = 0x3c00, little-endian
  CHECK(static_cast<int>(b[36]) == 0x3c);
  CHECK(b.size() == 32 + 3 + 4);
}

TEST_CASE("malformed messages are rejected with a wire_error", "[wire]") {
  sparse_message m;
  m.clear(1000);
  m.indices = {3, 10, 999};
  m.values = {1.0f, 2.0f, 3.0f};
  const auto good_u32 = encode(m, index_encoding::u32);
  const auto good_varint = encode(m, index_encoding::delta_varint);
  REQUIRE_NOTHROW(decode(good_u32));
  REQUIRE_NOTHROW(decode(good_varint));

  SECTION("every truncation of a valid message") {
    for (const auto* good : {&good_u32, &good_varint}) {
      for (std::size_t len = 0; len < good->size(); ++len) {
        CAPTURE(len);
        std::vector<std::byte> cut(good->begin(), good->begin() + static_cast<std::ptrdiff_t>(len));
        CHECK_THROWS_AS(decode(cut), wire_error);
      }
    }
  }
  SECTION("trailing bytes") {
    auto b = good_u32;
    b.push_back(std::byte{0});
    CHECK_THROWS_WITH(decode(b), Catch::Contains("trailing"));
  }
  SECTION("bad magic, version, value type, index encoding") {
    auto b = good_u32;
    b[0] = std::byte{'X'};
    CHECK_THROWS_WITH(decode(b), Catch::Contains("magic"));
    b = good_u32;
    b[4] = std::byte{2};
    CHECK_THROWS_WITH(decode(b), Catch::Contains("version 2"));
    b = good_u32;
    b[6] = std::byte{9};
    CHECK_THROWS_WITH(decode(b), Catch::Contains("value type code 9"));
    b = good_u32;
    b[6] = std::byte{0};
    CHECK_THROWS_AS(decode(b), wire_error);
    b = good_u32;
    b[7] = std::byte{3};
    CHECK_THROWS_WITH(decode(b), Catch::Contains("index encoding code 3"));
  }
  SECTION("nnz larger than the dense length") {
    auto b = good_u32;
    put_u64(b, 8, 2);
    CHECK_THROWS_WITH(decode(b), Catch::Contains("exceeds the dense length"));
  }
  SECTION("a forged huge nnz does not allocate") {
    auto b = good_u32;
    put_u64(b, 8, std::numeric_limits<std::uint64_t>::max());
    put_u64(b, 16, std::numeric_limits<std::uint64_t>::max() / 2);
    CHECK_THROWS_AS(decode(b), wire_error);
    put_u64(b, 24, std::numeric_limits<std::uint64_t>::max());
    CHECK_THROWS_AS(decode(b), wire_error);
  }
  SECTION("index out of range") {
    auto b = good_u32;
    put_u64(b, 8, 999); // dense length 999: index 999 no longer fits
    CHECK_THROWS_WITH(decode(b), Catch::Contains("999") && Catch::Contains("dense length"));
  }
  SECTION("unsorted or repeated u32 indices") {
    auto b = good_u32;
    b[32 + 4] = std::byte{3}; // second index 10 -> 3, equal to the first
    CHECK_THROWS_WITH(decode(b), Catch::Contains("ascending"));
    b[32 + 4] = std::byte{2}; // below the first
    CHECK_THROWS_WITH(decode(b), Catch::Contains("ascending"));
  }
  SECTION("u32 index section of the wrong size") {
    auto b = good_u32;
    put_u64(b, 24, 8);
    CHECK_THROWS_AS(decode(b), wire_error);
  }
  SECTION("non-canonical, over-long and overflowing varints") {
    // header for dense length 2^32, nnz 1, fp32, varint, with a chosen index section
    auto with_index = [](std::vector<std::byte> index) {
      sparse_message one;
      one.clear(std::uint64_t{1} << 32);
      one.indices = {0};
      one.values = {1.0f};
      auto b = encode(one, index_encoding::delta_varint);
      b.erase(b.begin() + 32, b.begin() + 33);
      b.insert(b.begin() + 32, index.begin(), index.end());
      put_u64(b, 24, index.size());
      return b;
    };
    CHECK_NOTHROW(decode(with_index(bytes_of({0x05}))));
    CHECK_THROWS_WITH(decode(with_index(bytes_of({0x85, 0x00}))), Catch::Contains("varint"));
    CHECK_THROWS_WITH(decode(with_index(bytes_of({0xff, 0xff, 0xff, 0xff, 0x1f}))),
                      Catch::Contains("varint"));
    CHECK_NOTHROW(decode(with_index(bytes_of({0xff, 0xff, 0xff, 0xff, 0x0f}))));
    CHECK_THROWS_AS(decode(with_index(bytes_of({0x80, 0x80, 0x80, 0x80, 0x80, 0x01}))), wire_error);
  }
  SECTION("varint gaps that run past the dense length or 2^32") {
    sparse_message two;
    two.clear(std::uint64_t{1} << 32);
    two.indices = {0xfffffffeu, 0xffffffffu};
    two.values = {1.0f, 2.0f};
    auto b = encode(two, index_encoding::delta_varint);
    REQUIRE_NOTHROW(decode(b));
    // second gap 0 -> 1: index 2^32, beyond any 32-bit index
    b[32 + 5] = std::byte{1};
    CHECK_THROWS_WITH(decode(b), Catch::Contains("dense length"));
  }
  SECTION("unused bytes inside the varint section") {
    auto b = good_varint;
    // claim one more index byte and drop one value byte: sizes agree but a byte is left over
    const std::size_t index_bytes = b.size() - 32 - 12;
    b.insert(b.begin() + 32 + static_cast<std::ptrdiff_t>(index_bytes), std::byte{0});
    b.pop_back();
    put_u64(b, 24, index_bytes + 1);
    CHECK_THROWS_AS(decode(b), wire_error);
  }
  SECTION("dense layout with the wrong count or index bytes") {
    sparse_message d;
    d.clear(3);
    d.dense = true;
    d.values = {1, 2, 3};
    auto b = encode(d);
    REQUIRE_NOTHROW(decode(b));
    put_u64(b, 8, 4);
    CHECK_THROWS_WITH(decode(b), Catch::Contains("dense message"));
  }
  SECTION("sparse dense length beyond 2^32") {
    auto b = good_u32;
    put_u64(b, 8, (std::uint64_t{1} << 32) + 1);
    CHECK_THROWS_WITH(decode(b), Catch::Contains("32-bit"));
  }
  SECTION("NaN values") {
    auto b = good_u32;
    const std::uint32_t nan = 0x7fc00000u;
    std::memcpy(b.data() + 32 + 12 + 4, &nan, 4);
    CHECK_THROWS_WITH(decode(b), Catch::Contains("NaN"));
  }
}

TEST_CASE("random byte flips never crash the decoder", "[wire]") {
  const sparse_message m = random_sparse(5000, 0.05, value_type::fp16, 11);
  const auto good = encode(m, index_encoding::delta_varint);
  std::mt19937 rng(99);
  std::uniform_int_distribution<std::size_t> position(0, good.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto b = good;
    for (int f = 0; f < 3; ++f) {
      b[position(rng)] = static_cast<std::byte>(byte(rng));
    }
    try {
      const sparse_message d = decode(b);
      d.validate();
      REQUIRE(encode(d, index_encoding::delta_varint) == b);
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
}

} // namespace sparse_wire_test
