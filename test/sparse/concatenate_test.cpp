// SPDX-License-Identifier: Apache-2.0
// Concatenation of consecutive slices' messages: the result decompresses to the slices'
// decompressions laid end to end (independent reference: per-slice decompress), stays dense
// only for dense parts without a gap, and rejects parts out of order or out of range.
#include <gradcomp/sparse/concatenate.hpp>

#include <random>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"

namespace sparse_concatenate_test {

using gradcomp::append_concatenated;
using gradcomp::begin_concatenation;
using gradcomp::sparse_message;
using gradcomp::value_type;

namespace {

sparse_message dense_part(std::vector<float> values) {
  sparse_message m;
  m.clear(values.size());
  m.dense = true;
  m.values = std::move(values);
  return m;
}

sparse_message
sparse_part(std::uint64_t length, std::vector<std::uint32_t> indices, std::vector<float> values) {
  sparse_message m;
  m.clear(length);
  m.indices = std::move(indices);
  m.values = std::move(values);
  return m;
}

// the reference: each part decompressed into its own slice of a zero vector
std::vector<float> reference(const std::vector<std::pair<sparse_message, std::uint64_t>>& parts,
                             std::uint64_t length) {
  std::vector<float> out(length, 0.0f);
  for (const auto& [part, offset] : parts) {
    std::vector<float> slice(part.dense_length_elements);
    gradcomp::decompress(part, slice);
    std::copy(slice.begin(), slice.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
  }
  return out;
}

} // namespace

TEST_CASE("concatenation equals the parts decompressed end to end", "[concatenate]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    // 1-5 parts of 1-40 elements, each dense or a random subset, with random gaps between them
    std::vector<std::pair<sparse_message, std::uint64_t>> parts;
    std::uint64_t offset = 0;
    bool any_sparse = false;
    bool any_gap = false;
    const int count = 1 + static_cast<int>(rng() % 5);
    for (int p = 0; p < count; ++p) {
      const std::uint64_t gap = (rng() % 4 == 0) ? rng() % 7 : 0;
      any_gap = any_gap || gap > 0;
      offset += gap;
      const std::uint64_t length = 1 + rng() % 40;
      if (rng() % 2 == 0) {
        std::vector<float> values(length);
        for (auto& v : values) {
          v = value(rng);
        }
        parts.emplace_back(dense_part(std::move(values)), offset);
      } else {
        any_sparse = true;
        std::vector<std::uint32_t> indices;
        std::vector<float> values;
        for (std::uint32_t i = 0; i < length; ++i) {
          if (rng() % 3 == 0) {
            indices.push_back(i);
            values.push_back(value(rng));
          }
        }
        parts.emplace_back(sparse_part(length, std::move(indices), std::move(values)), offset);
      }
      offset += length;
    }
    const std::uint64_t length = offset + ((rng() % 2 == 0) ? 0 : 1 + rng() % 5);
    const bool tail_gap = length > offset;

    sparse_message group;
    begin_concatenation(group, length);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      append_concatenated(group, parts[p].first, parts[p].second, p == 0);
    }
    INFO("trial " << trial);
    if (!any_sparse && !any_gap && !tail_gap) {
      CHECK(group.dense);
    }
    if (any_sparse || any_gap) {
      CHECK_FALSE(group.dense);
    }
    if (tail_gap && group.dense) {
      continue; // a dense result must cover the whole length (documented precondition)
    }
    REQUIRE_NOTHROW(group.validate());
    std::vector<float> got(length);
    gradcomp::decompress(group, got);
    CHECK(got == reference(parts, length));
  }
}

TEST_CASE("concatenation: value types and rejected parts", "[concatenate]") {
  sparse_message group;
  begin_concatenation(group, 10);
  auto a = dense_part({1, 2, 3});
  a.values_type = value_type::fp16;
  auto b = sparse_part(4, {1}, {5});
  b.values_type = value_type::fp16;
  append_concatenated(group, a, 0, true);
  CHECK(group.values_type == value_type::fp16);
  append_concatenated(group, b, 3, false);
  CHECK(group.values_type == value_type::fp16);
  SECTION("a part before what is appended is rejected") {
    CHECK_THROWS_WITH(append_concatenated(group, dense_part({1}), 4, false),
                      Catch::Contains("offset 4") && Catch::Contains("ascending"));
  }
  SECTION("a part past the group's length is rejected") {
    CHECK_THROWS_WITH(append_concatenated(group, dense_part({1, 2, 3}), 8, false),
                      Catch::Contains("offset 8") && Catch::Contains("group length 10"));
  }
  SECTION("mixed value types give fp32") {
    append_concatenated(group, dense_part({1, 2, 3}), 7, false);
    CHECK(group.values_type == value_type::fp32);
    std::vector<float> got(10);
    gradcomp::decompress(group, got);
    CHECK(got == std::vector<float>{1, 2, 3, 0, 5, 0, 0, 1, 2, 3});
  }
}

} // namespace sparse_concatenate_test
