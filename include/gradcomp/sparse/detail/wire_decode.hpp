// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The loops of the wire decoder (gradcomp/sparse/wire.hpp) over a message's index and
//! value fields: u32 and delta + varint indices, fp32, fp16 and bf16 values, each with its checks
//! (ascending indices below the dense length, canonical varints, no NaN).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_array.hpp>
#include <gradcomp/sparse/detail/little_endian.hpp>
#include <gradcomp/sparse/detail/varint.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gradcomp::detail {

// The body loops of decode(), one per field encoding, each with its checks. The failure paths
// are kept out of line so that the loops stay small (decoding is on the receive path of every
// transport: ~1 ns per element matters at 10^5-10^6 elements per message).

[[noreturn, gnu::cold, gnu::noinline]] inline void fail_index_order(std::uint64_t idx,
                                                                    std::uint64_t position) {
  throw wire_error(concat("gradcomp wire: index ", idx, " at position ", position,
                          " is not above the previous index (indices must be strictly ascending)"));
}

[[noreturn, gnu::cold, gnu::noinline]] inline void
fail_index_range(std::uint64_t idx, std::uint64_t position, std::uint64_t dense_length) {
  throw wire_error(concat("gradcomp wire: index ", idx, " at position ", position,
                          " is not below the dense length ", dense_length));
}

[[noreturn, gnu::cold, gnu::noinline]] inline void fail_varint(std::uint64_t position) {
  throw wire_error(concat("gradcomp wire: malformed varint at index position ", position,
                          " (truncated, over 32 bits, or not in shortest form)"));
}

// nnz little-endian u32 indices at q (4 nnz readable bytes), strictly ascending, below
// dense_length, into out.
inline void decode_u32_indices(const std::byte* q,
                               std::uint64_t nnz,
                               std::uint64_t dense_length,
                               std::uint32_t* out) {
  std::uint64_t next = 0; // smallest value the next index may take
  for (std::uint64_t i = 0; i < nnz; ++i, q += 4) {
    const std::uint64_t idx = load_le<std::uint32_t>(q);
    if (idx < next) [[unlikely]] {
      fail_index_order(idx, i);
    }
    if (idx >= dense_length) [[unlikely]] {
      fail_index_range(idx, i, dense_length);
    }
    out[i] = static_cast<std::uint32_t>(idx);
    next = idx + 1;
  }
}

// nnz delta + varint indices in [q, end), using every byte, below dense_length, into out.
inline void decode_varint_indices(const std::byte* q,
                                  const std::byte* end,
                                  std::uint64_t nnz,
                                  std::uint64_t dense_length,
                                  std::uint32_t* out) {
  std::uint64_t next = 0; // smallest value the next index may take
  for (std::uint64_t i = 0; i < nnz; ++i) {
    std::uint32_t gap = 0;
    if (q != end && static_cast<std::uint32_t>(*q) < 0x80u) [[likely]] {
      gap = static_cast<std::uint32_t>(*q++); // one-byte gap (< 128): the common case
    } else if (!read_varint(q, end, gap)) {
      fail_varint(i);
    }
    const std::uint64_t idx = next + gap;
    if (idx >= dense_length) [[unlikely]] {
      fail_index_range(idx, i, dense_length);
    }
    out[i] = static_cast<std::uint32_t>(idx);
    next = idx + 1;
  }
  require_wire(q == end, "varint index section has ", end - q, " unused bytes after ", nnz,
               " indices");
}

// nnz values of type vt at q (nnz x value size readable bytes), none NaN, into out as floats.
inline void decode_values(const std::byte* q, std::uint64_t nnz, value_type vt, float* out) {
  if (vt == value_type::fp32) {
    if constexpr (std::endian::native == std::endian::little) {
      if (nnz != 0) { // out may be null then (an empty vector's data())
        std::memcpy(out, q, nnz * sizeof(float));
      }
    } else {
      for (std::uint64_t i = 0; i < nnz; ++i) {
        out[i] = std::bit_cast<float>(load_le<std::uint32_t>(q + 4 * i));
      }
    }
  } else if (vt == value_type::fp16) {
    halves_to_floats(q, nnz, out);
  } else {
    for (std::uint64_t i = 0; i < nnz; ++i) {
      out[i] = bfloat16_bits_to_float(load_le<std::uint16_t>(q + 2 * i));
    }
  }
  if (nnz == 0) {
    return;
  }
  bool any_nan = false; // one branch-free pass (vectorizes), then find the first on failure
  for (std::uint64_t i = 0; i < nnz; ++i) {
    any_nan |= out[i] != out[i];
  }
  if (any_nan) [[unlikely]] {
    std::uint64_t i = 0;
    while (!std::isnan(out[i])) {
      ++i;
    }
    throw wire_error(concat("gradcomp wire: value at position ", i, " is NaN"));
  }
}

} // namespace gradcomp::detail
