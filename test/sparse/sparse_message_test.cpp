// SPDX-License-Identifier: Apache-2.0
// gradcomp::sparse_message (sparse/sparse_message.hpp): validate() checks every invariant of its
// doc comment, naming the first one broken (sparse and dense layouts, the 32-bit index limit,
// quantized values on their grid, quantization segments); quantization codes worked by hand;
// the scale of each value with and without segments; nnz, density and clear; decompress and
// accumulate against a dense reference filled element by element.
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../common/catch.hpp"

namespace sparse_sparse_message_test {

using Catch::Contains;
using gradcomp::quantization_segment;
using gradcomp::sparse_message;
using gradcomp::value_type;

TEST_CASE("sparse_message::validate checks the invariants", "[wire]") {
  sparse_message m;
  m.clear(10);
  m.indices = {1, 5};
  m.values = {1.0f, 2.0f};
  CHECK_NOTHROW(m.validate());
  m.indices = {5, 1};
  CHECK_THROWS_AS(m.validate(), std::invalid_argument);
  m.indices = {1, 10};
  CHECK_THROWS_AS(m.validate(), std::invalid_argument);
  m.indices = {1};
  CHECK_THROWS_AS(m.validate(), std::invalid_argument);
}

TEST_CASE("decompress and accumulate scatter the message", "[wire]") {
  sparse_message m;
  m.clear(5);
  m.indices = {0, 3};
  m.values = {2.0f, -1.0f};
  std::vector<float> dense(5, 9.0f);
  gradcomp::decompress(m, dense);
  CHECK(dense == std::vector<float>{2.0f, 0.0f, 0.0f, -1.0f, 0.0f});
  gradcomp::accumulate(m, dense, 0.5f);
  CHECK(dense == std::vector<float>{3.0f, 0.0f, 0.0f, -1.5f, 0.0f});
  std::vector<float> wrong(4);
  CHECK_THROWS_AS(gradcomp::decompress(m, wrong), std::invalid_argument);
}

TEST_CASE("sparse_message: nnz, density and clear", "[sparse_message]") {
  sparse_message m;
  CHECK(m.nnz() == 0);
  CHECK(m.density() == 0.0); // an empty gradient
  m.clear(8);
  m.indices = {1, 6};
  m.values = {0.5f, -1.0f};
  CHECK(m.nnz() == 2);
  CHECK(m.density() == 0.25);
  m.values_type = value_type::quantized;
  m.quantization_scale = 1.0f;
  m.quantization_levels = 3;
  m.quantization_segments = {{2, 1.0f}};
  m.dense = true;
  const std::size_t capacity = m.values.capacity();
  m.clear(5);
  CHECK(m.dense_length_elements == 5);
  CHECK_FALSE(m.dense);
  CHECK(m.values_type == value_type::fp32);
  CHECK(m.indices.empty());
  CHECK(m.values.empty());
  CHECK(m.values.capacity() == capacity); // kept for reuse
  CHECK(m.quantization_scale == 0.0f);
  CHECK(m.quantization_levels == 0);
  CHECK(m.quantization_segments.empty());
  CHECK(gradcomp::max_sparse_dense_length_elements == 4294967296ULL);
}

TEST_CASE("sparse_message: validate names the first broken invariant", "[sparse_message]") {
  sparse_message m;
  m.clear(10);
  m.indices = {1, 5};
  m.values = {1.0f, 2.0f};
  REQUIRE_NOTHROW(m.validate());
  m.indices = {1, 1};
  CHECK_THROWS_WITH(m.validate(),
                    Contains("indices not strictly ascending at position 1: 1 then 1"));
  m.indices = {1, 10};
  CHECK_THROWS_WITH(m.validate(),
                    Contains("index 10 at position 1 is not below the dense length 10"));
  m.indices = {1};
  CHECK_THROWS_WITH(m.validate(), Contains("sparse message has 1 indices but 2 values"));
  m.clear(1);
  m.indices = {0, 1};
  m.values = {1.0f, 2.0f};
  CHECK_THROWS_WITH(m.validate(), Contains("sparse message has 2 values for dense length 1"));
  m.clear(gradcomp::max_sparse_dense_length_elements + 1);
  CHECK_THROWS_WITH(m.validate(), Contains("exceeds the 32-bit index limit 4294967296"));
  m.clear(gradcomp::max_sparse_dense_length_elements); // 2^32 elements: still addressable
  CHECK_NOTHROW(m.validate());
  // dense layout
  m.clear(3);
  m.dense = true;
  m.values = {1.0f, 2.0f, 3.0f};
  CHECK_NOTHROW(m.validate());
  m.indices = {0};
  CHECK_THROWS_WITH(m.validate(), Contains("dense message carries 1 indices"));
  m.indices.clear();
  m.values.pop_back();
  CHECK_THROWS_WITH(m.validate(), Contains("dense message has 2 values for dense length 3"));
  // segments belong to quantized messages only
  m.values = {1.0f, 2.0f, 3.0f};
  m.quantization_segments = {{3, 1.0f}};
  CHECK_THROWS_WITH(m.validate(), Contains("message of value type fp32 carries 1 quantization"));
}

TEST_CASE("sparse_message: quantized values are checked against their grid", "[sparse_message]") {
  // scale 2, 3 levels: the grid 2 j / 3, |j| <= 3
  for (std::int32_t j = -3; j <= 3; ++j) {
    const float v = gradcomp::quantized_value(2.0f, j, 3);
    CAPTURE(j);
    CHECK(sparse_message::quantization_code(v, 2.0f, 3) == std::optional<std::int32_t>(j));
  }
  CHECK(gradcomp::quantized_value(2.0f, 3, 3) == 2.0f);
  CHECK(gradcomp::quantized_value(2.0f, -3, 3) == -2.0f);
  CHECK_FALSE(sparse_message::quantization_code(0.5f, 2.0f, 3).has_value());  // off the grid
  CHECK_FALSE(sparse_message::quantization_code(4.0f, 2.0f, 3).has_value());  // |j| = 6 > 3
  CHECK_FALSE(sparse_message::quantization_code(-0.0f, 2.0f, 3).has_value()); // -0 is not 0 x 2
  CHECK_FALSE(sparse_message::quantization_code(std::numeric_limits<float>::quiet_NaN(), 2.0f, 3)
                  .has_value());
  CHECK_FALSE(sparse_message::quantization_code(0.0f, 0.0f, 3).has_value()); // scale 0
  CHECK_FALSE(sparse_message::quantization_code(0.0f, 2.0f, 0).has_value()); // 0 levels
  CHECK_FALSE(sparse_message::quantization_code(0.0f, 2.0f, 32769).has_value());

  sparse_message m;
  m.clear(4);
  m.dense = true;
  m.values_type = value_type::quantized;
  m.quantization_scale = 2.0f;
  m.quantization_levels = 3;
  m.values = {gradcomp::quantized_value(2.0f, -3, 3), 0.0f, gradcomp::quantized_value(2.0f, 1, 3),
              2.0f};
  REQUIRE_NOTHROW(m.validate());
  CHECK(m.quantization_code(m.values[2]) == std::optional<std::int32_t>(1));
  m.values[1] = 0.5f;
  CHECK_THROWS_WITH(m.validate(),
                    Contains("quantized message value 0.5 at position 1 is not scale 2 x j / 3"));
  m.values[1] = 0.0f;
  m.quantization_levels = 0;
  CHECK_THROWS_WITH(m.validate(), Contains("quantized message levels 0 outside [1, 32768]"));
  m.quantization_levels = 3;
  m.quantization_scale = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(m.validate(), Contains("scale inf is not finite and >= 2^-111"));
  // segments: 2 values at scale 2, 2 at scale 1 (then the message's own scale is ignored)
  m.quantization_segments = {{2, 2.0f}, {2, 1.0f}};
  m.values = {gradcomp::quantized_value(2.0f, -3, 3), 0.0f, gradcomp::quantized_value(1.0f, 1, 3),
              1.0f};
  CHECK_NOTHROW(m.validate());
  std::vector<std::pair<std::size_t, float>> scales;
  m.for_each_quantization_scale([&](std::size_t i, float s) { scales.emplace_back(i, s); });
  CHECK(scales ==
        std::vector<std::pair<std::size_t, float>>{{0, 2.0f}, {1, 2.0f}, {2, 1.0f}, {3, 1.0f}});
  m.values[3] = 2.0f; // on scale 2's grid, not on its segment's
  CHECK_THROWS_WITH(m.validate(), Contains("value 2 at position 3 is not scale 1 x j / 3"));
  m.values[3] = 1.0f;
  m.quantization_segments = {{2, 2.0f}, {1, 1.0f}};
  CHECK_THROWS_WITH(m.validate(),
                    Contains("quantization segments hold 3 values, the message carries 4"));
  m.quantization_segments = {{0, 2.0f}, {4, 1.0f}};
  CHECK_THROWS_WITH(m.validate(), Contains("quantization segment 0 has 0 values"));
  m.quantization_segments = {{2, 2.0f}, {2, -1.0f}};
  CHECK_THROWS_WITH(m.validate(), Contains("quantization segment 1 scale -1"));
  // without segments every value shares the message's scale
  m.quantization_segments.clear();
  m.quantization_scale = 0.5f;
  scales.clear();
  m.for_each_quantization_scale([&](std::size_t i, float s) { scales.emplace_back(i, s); });
  CHECK(scales ==
        std::vector<std::pair<std::size_t, float>>{{0, 0.5f}, {1, 0.5f}, {2, 0.5f}, {3, 0.5f}});
  CHECK(quantization_segment{2, 1.0f} == quantization_segment{2, 1.0f});
}

TEST_CASE("sparse_message: decompress and accumulate equal a dense reference", "[sparse_message]") {
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal;
  std::bernoulli_distribution pick(0.2);
  for (const bool dense : {false, true}) {
    CAPTURE(dense);
    sparse_message m;
    m.clear(300);
    m.dense = dense;
    std::vector<float> reference(300, 0.0f);
    for (std::uint32_t i = 0; i < 300; ++i) {
      if (dense || pick(rng)) {
        const float v = normal(rng);
        if (!dense) {
          m.indices.push_back(i);
        }
        m.values.push_back(v);
        reference[i] = v;
      }
    }
    REQUIRE_NOTHROW(m.validate());
    std::vector<float> out(300, 7.0f);
    gradcomp::decompress(m, out);
    CHECK(out == reference);
    std::vector<float> sum(300, 1.0f);
    gradcomp::accumulate(m, sum, 0.25f);
    for (std::size_t i = 0; i < 300; ++i) {
      REQUIRE(sum[i] == 1.0f + 0.25f * reference[i]);
    }
    std::vector<float> wrong(301);
    CHECK_THROWS_WITH(gradcomp::decompress(m, wrong),
                      Contains("decompress: output has 301 elements, message dense length is 300"));
    CHECK_THROWS_WITH(gradcomp::accumulate(m, wrong),
                      Contains("accumulate: output has 301 elements"));
  }
}

} // namespace sparse_sparse_message_test
