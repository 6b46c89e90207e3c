// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The wire round trip the quantizer tests check on every quantized message: encoded size
//! as predicted and within the bounds, decoded back bit for bit (values, scale or segments,
//! levels, indices), re-encoded to the same bytes; and the helpers of the malformed-input
//! cases.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "catch.hpp"
#include "same_bits.hpp"

namespace gradcomp::test {

//! Encodes `m` (u32 indices) and checks the round trip above; returns the wire.
inline std::vector<std::byte> require_quantized_round_trip(const sparse_message& m) {
  m.validate();
  const std::vector<std::byte> wire = encode(m, index_encoding::u32);
  CHECK(encoded_size_bytes(m) == wire.size());
  CHECK(wire.size() >= min_encoded_bytes(m.nnz()));
  CHECK(wire.size() <= max_encoded_bytes(m.nnz()));
  const sparse_message back = decode(wire);
  CHECK(back.values_type == value_type::quantized);
  CHECK(back.dense == m.dense);
  CHECK(back.quantization_levels == m.quantization_levels);
  CHECK(back.quantization_segments == m.quantization_segments);
  CHECK(std::bit_cast<std::uint32_t>(back.quantization_scale) ==
        std::bit_cast<std::uint32_t>(m.quantization_scale));
  CHECK(back.indices == m.indices);
  CHECK(same_bits(back.values, m.values));
  CHECK(encode(back, index_encoding::u32) == wire);
  return wire;
}

//! A copy of `good` changed by `edit(bytes)`: one malformed input for a decoder test.
template <class Edit>
std::vector<std::byte> corrupted(const std::vector<std::byte>& good, Edit&& edit) {
  std::vector<std::byte> w = good;
  edit(w);
  return w;
}

//! Checks that decoding `wire` throws a message containing `why`.
inline void require_rejected(const std::vector<std::byte>& wire, const std::string& why) {
  CHECK_THROWS_WITH(decode(wire), Catch::Contains(why));
}

} // namespace gradcomp::test
