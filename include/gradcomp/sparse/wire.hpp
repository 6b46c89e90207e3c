// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The versioned binary wire encoding of a gradcomp::sparse_message, and its validating
//! decoder.
//!
//! Layout (all integers little-endian), version 1:
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `GCSM` |
//! | 4  | 2 | version (1) |
//! | 6  | 1 | value type (1 fp32, 2 fp16, 3 bf16, 4 quantized) |
//! | 7  | 1 | index encoding (0 none = dense layout, 1 u32, 2 delta + varint) |
//! | 8  | 8 | dense length, elements |
//! | 16 | 8 | nnz, values carried |
//! | 24 | 8 | index section length, bytes |
//! | 32 | index bytes | indices: nothing (dense), nnz x u32, or nnz varints |
//! | .. | nnz x value size | values |
//!
//! Values of type quantized (4) are, instead of nnz x value size bytes: the scale (f32), the
//! levels L (u32), the code width b (u8: 1 when L == 1 and no value is 0, else 1 +
//! bit_width(L)), then the nnz codes of b bits each, packed from the least significant bit of
//! the first byte on, the last byte's unused bits 0 (ceil(nnz b / 8) bytes). A 1-bit code is the
//! sign (0: +scale, 1: -scale); a wider one is sign | (|j| << 1) for the value scale x j / L
//! (gradcomp::quantized_value), never a negative zero. So a scaled-sign message costs 1 bit per
//! value, a ternary one 2 and a 15-level QSGD message 5, plus 9 bytes. A message with several
//! scales (sparse_message::quantization_segments: QSGD's buckets, per-layer scales) writes 0 as
//! the scale and, between the code width and the codes, a segment table: the segment count S
//! (u32, >= 1), then per segment its value count (unsigned LEB128, >= 1) and its scale (f32);
//! the counts sum to nnz and each value is decoded with its segment's scale. A 512-value bucket
//! thus costs 6 bytes (0.09 bits per value).
//!
//! Delta + varint stores the first index as is and every later one as the gap minus one
//! (`idx[i] - idx[i-1] - 1`) in unsigned LEB128, so strictly ascending order is implied and at
//! density 0.01 an index costs ~1.3 bytes instead of 4 (1.28 for uniformly spread indices;
//! docs/compressors.md, "Index cost of delta + varint").
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_array.hpp>
#include <gradcomp/sparse/detail/little_endian.hpp>
#include <gradcomp/sparse/detail/varint.hpp>
#include <gradcomp/sparse/detail/wire_decode.hpp>
#include <gradcomp/sparse/detail/wire_quantized.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace gradcomp {

//! @brief How a message's indices are put on the wire. The codes are part of the format.
enum class index_encoding : std::uint8_t {
  none = 0,         //!< dense layout: no indices (only for dense messages).
  u32 = 1,          //!< 4 bytes per index, little-endian.
  delta_varint = 2, //!< first index, then gaps minus one, unsigned LEB128 (1-5 bytes each).
};

//! @brief Wire-format version this build writes and reads.
inline constexpr std::uint16_t wire_version = 1;
//! @brief Size of the fixed header, bytes.
inline constexpr std::size_t wire_header_bytes = 32;

namespace detail {

inline constexpr std::array<std::byte, 4> wire_magic = {std::byte{'G'}, std::byte{'C'},
                                                        std::byte{'S'}, std::byte{'M'}};

inline index_encoding effective_encoding(const sparse_message& m, index_encoding requested) {
  if (m.dense) {
    return index_encoding::none;
  }
  require(requested != index_encoding::none,
          "index_encoding::none can only encode a dense message; this one is sparse with ", m.nnz(),
          " of ", m.dense_length_elements, " elements");
  return requested;
}

//! Bytes of m's values section: nnz x value size, or for quantized values (code width `bits`,
//! quantized_bits_of(m)) the prefix, the segment table and the packed codes. O(1), O(segments)
//! for segmented quantized values.
inline std::size_t values_section_bytes(const sparse_message& m, unsigned bits) noexcept {
  if (m.values_type != value_type::quantized) {
    return m.nnz() * value_size_bytes(m.values_type);
  }
  return quantized_prefix_bytes + segment_table_bytes(m) +
         static_cast<std::size_t>(packed_code_bytes(m.nnz(), bits));
}

inline std::size_t index_section_bytes(const sparse_message& m, index_encoding enc) noexcept {
  switch (enc) {
  case index_encoding::none:
    return 0;
  case index_encoding::u32:
    return 4 * m.indices.size();
  case index_encoding::delta_varint: {
    std::size_t bytes = 0;
    std::uint32_t next = 0; // smallest index the next one may take
    for (std::uint32_t idx : m.indices) {
      bytes += varint_size(idx - next);
      next = idx + 1;
    }
    return bytes;
  }
  }
  return 0;
}

} // namespace detail

//! @brief Bounds on the encoded size, bytes, of any message carrying `nnz` values, whatever its
//! value type and index encoding: from 32 + min(2 nnz, 9 + ceil(nnz / 8)) (dense fp16: no
//! indices, 2-byte values; or dense 1-bit quantized codes) to 32 + 13 nnz + 14 (a 5-byte
//! varint index each and a quantized section of at most 14 + 7.125 nnz bytes: a segment of one
//! value per value, 17-bit codes; an fp32 message takes at most 32 + 9 nnz). For validating a
//! size a peer states before receiving the message. O(1).
//! @pre nnz <= 2^56 (no overflow).
[[nodiscard]] constexpr std::uint64_t min_encoded_bytes(std::uint64_t nnz) noexcept {
  const std::uint64_t packed = detail::quantized_prefix_bytes + detail::packed_code_bytes(nnz, 1);
  return wire_header_bytes + (2 * nnz < packed ? 2 * nnz : packed);
}
//! @brief The upper bound of min_encoded_bytes()'s pair: 32 + 13 nnz + 14 bytes, the most any
//! message carrying `nnz` values encodes to. O(1). @pre nnz <= 2^56 (no overflow).
[[nodiscard]] constexpr std::uint64_t max_encoded_bytes(std::uint64_t nnz) noexcept {
  return wire_header_bytes + 13 * nnz + 14;
}

//! @brief Expected bytes per index of a message of density `density` whose indices are spread
//! uniformly (each element selected independently with probability `density`), for pricing a
//! message before it exists: 4 for u32, 0 for none; for delta_varint the expected unsigned
//! LEB128 size of a gap minus one, 1 + sum over j = 1..4 of (1 - density)^(2^(7 j)) (the gap
//! is geometric, and a varint takes one more byte at each of 2^7, 2^14, 2^21, 2^28): 1.28 at
//! density 0.01, 1.00 at 0.05, 2.18 at 1e-4. Indices that cluster (top-k of a gradient often
//! does) cost less. O(1).
//! @throws std::invalid_argument if density is outside (0, 1].
[[nodiscard]] inline double expected_index_bytes(index_encoding enc, double density) {
  detail::require(density > 0 && density <= 1, "expected_index_bytes: density ", density,
                  " is outside (0, 1]");
  switch (enc) {
  case index_encoding::none:
    return 0.0;
  case index_encoding::u32:
    return 4.0;
  case index_encoding::delta_varint: {
    double bytes = 1.0;
    for (int j = 1; j <= 4; ++j) { // P(gap - 1 >= 2^(7 j)) = (1 - density)^(2^(7 j))
      bytes += std::exp(std::ldexp(std::log1p(-density), 7 * j)); // 0 at density 1
    }
    return bytes;
  }
  }
  return 4.0;
}

//! @brief Exact number of bytes encode() produces for `m` with `enc`. O(nnz) for delta_varint
//! or quantized values, O(1) otherwise.
//! @throws std::invalid_argument if `enc` is none and `m` is sparse.
[[nodiscard]] inline std::size_t encoded_size_bytes(const sparse_message& m,
                                                    index_encoding enc = index_encoding::u32) {
  const index_encoding e = detail::effective_encoding(m, enc);
  const unsigned bits = m.values_type == value_type::quantized ? detail::quantized_bits_of(m) : 0u;
  return wire_header_bytes + detail::index_section_bytes(m, e) +
         detail::values_section_bytes(m, bits);
}

//! @brief Encodes `m` into `out` (replacing its contents; capacity is reused).
//!
//! Dense messages are always written with index_encoding::none; `enc` chooses the encoding of
//! sparse ones. Values are written as `m.values_type`, rounded to nearest if not representable.
//! Bytes written: 32 + index bytes (0, 4 nnz, or 1-5 per index) + nnz x 4 / 2 / 2, or for
//! quantized values 9 + ceil(nnz x code bits / 8).
//! O(nnz); deterministic (identical bytes on every platform).
//! @pre `m.validate()` holds (not re-checked here beyond the encoding choice and, for quantized
//! values, each value's code).
//! @throws std::invalid_argument if `enc` is none for a sparse message, or a quantized message's
//! scale, levels or a value is out of its form (named).
inline void encode(const sparse_message& m, index_encoding enc, std::vector<std::byte>& out) {
  const index_encoding e = detail::effective_encoding(m, enc);
  const std::size_t index_bytes = detail::index_section_bytes(m, e);
  // the code width of quantized values needs one scan for a zero: once, for size and codes
  const unsigned bits = m.values_type == value_type::quantized ? detail::quantized_bits_of(m) : 0u;
  out.resize(wire_header_bytes + index_bytes + detail::values_section_bytes(m, bits));
  std::byte* p = out.data();
  std::memcpy(p, detail::wire_magic.data(), 4);
  detail::store_le<std::uint16_t>(p + 4, wire_version);
  p[6] = static_cast<std::byte>(m.values_type);
  p[7] = static_cast<std::byte>(e);
  detail::store_le<std::uint64_t>(p + 8, m.dense_length_elements);
  detail::store_le<std::uint64_t>(p + 16, m.nnz());
  detail::store_le<std::uint64_t>(p + 24, index_bytes);
  p += wire_header_bytes;
  if (e == index_encoding::u32) {
    for (std::uint32_t idx : m.indices) {
      detail::store_le<std::uint32_t>(p, idx);
      p += 4;
    }
  } else if (e == index_encoding::delta_varint) {
    std::uint32_t next = 0;
    for (std::uint32_t idx : m.indices) {
      p = detail::write_varint(idx - next, p);
      next = idx + 1;
    }
  }
  switch (m.values_type) {
  case value_type::fp32:
    for (float v : m.values) {
      detail::store_le<std::uint32_t>(p, std::bit_cast<std::uint32_t>(v));
      p += 4;
    }
    break;
  case value_type::fp16:
    detail::floats_to_halves(m.values.data(), m.values.size(), p);
    break;
  case value_type::bf16:
    for (float v : m.values) {
      detail::store_le<std::uint16_t>(p, detail::float_to_bfloat16_bits(v));
      p += 2;
    }
    break;
  case value_type::quantized:
    detail::encode_quantized(m, bits, p);
    break;
  }
}

//! @brief Convenience form of encode() returning a new buffer.
[[nodiscard]] inline std::vector<std::byte> encode(const sparse_message& m,
                                                   index_encoding enc = index_encoding::u32) {
  std::vector<std::byte> out;
  encode(m, enc, out);
  return out;
}

//! @brief Decodes untrusted bytes into `out`, validating everything before trusting anything.
//!
//! Checks, in order: length >= header; magic; version == 1; value type and index encoding
//! codes; nnz <= dense length; dense layout has nnz == dense length and no index bytes; sparse
//! layout has dense length <= 2^32; the total length equals header + index bytes + nnz x value
//! size exactly (no truncation, no trailing bytes; checked before any allocation, so a forged
//! nnz cannot make it allocate more than the input's size; quantized values: at least one bit
//! per code, so at most 32 bytes of floats per input byte); u32 index section is 4 nnz bytes;
//! every varint is canonical; indices strictly ascending and below the dense length; no value is
//! NaN; quantized values: scale finite and >= 2^-111, levels in [1, 2^15], the code width that the
//! levels (and zeros) give, the exact section size, every magnitude <= levels, no negative zero,
//! unused bits 0. Decoding then re-encoding with the same encoding reproduces the input bytes
//! exactly.
//! O(input bytes); reuses `out`'s capacity.
//! @throws gradcomp::wire_error naming the failed check and the offending numbers; `out` is
//! then unspecified.
inline void decode(std::span<const std::byte> bytes, sparse_message& out) {
  using detail::require_wire;
  require_wire(bytes.size() >= wire_header_bytes, "message of ", bytes.size(),
               " bytes is shorter than the ", wire_header_bytes, "-byte header");
  const std::byte* p = bytes.data();
  require_wire(std::memcmp(p, detail::wire_magic.data(), 4) == 0,
               "bad magic (expected 'GCSM'): not a gradcomp sparse message");
  const auto version = detail::load_le<std::uint16_t>(p + 4);
  require_wire(version == wire_version, "unsupported wire version ", version,
               " (this build reads version ", wire_version, ")");
  const auto vt_code = static_cast<std::uint8_t>(p[6]);
  require_wire(vt_code >= 1 && vt_code <= 4, "unknown value type code ", unsigned{vt_code},
               " (1 fp32, 2 fp16, 3 bf16, 4 quantized)");
  const auto enc_code = static_cast<std::uint8_t>(p[7]);
  require_wire(enc_code <= 2, "unknown index encoding code ", unsigned{enc_code},
               " (0 none, 1 u32, 2 delta_varint)");
  const auto vt = static_cast<value_type>(vt_code);
  const auto enc = static_cast<index_encoding>(enc_code);
  const auto dense_length = detail::load_le<std::uint64_t>(p + 8);
  const auto nnz = detail::load_le<std::uint64_t>(p + 16);
  const auto index_bytes = detail::load_le<std::uint64_t>(p + 24);
  require_wire(nnz <= dense_length, "nnz ", nnz, " exceeds the dense length ", dense_length);

  const std::uint64_t body = bytes.size() - wire_header_bytes;
  require_wire(index_bytes <= body, "index section of ", index_bytes, " bytes exceeds the ", body,
               " bytes after the header");
  if (vt == value_type::quantized) {
    // at least one bit per value after a 9-byte prefix (the exact size is checked with the codes)
    require_wire(body - index_bytes >= detail::quantized_prefix_bytes &&
                     nnz <= (body - index_bytes - detail::quantized_prefix_bytes) * 8,
                 "nnz ", nnz, " quantized codes do not fit in the ", body - index_bytes,
                 " bytes after the indices (truncated message?)");
  } else {
    const std::uint64_t value_bytes_per = value_size_bytes(vt);
    require_wire(nnz <= (body - index_bytes) / value_bytes_per, "nnz ", nnz, " values of ",
                 value_bytes_per, " bytes do not fit in the ", body - index_bytes,
                 " bytes after the indices (truncated message?)");
    require_wire(index_bytes + nnz * value_bytes_per == body, "message has ", bytes.size(),
                 " bytes, header declares ",
                 wire_header_bytes + index_bytes + nnz * value_bytes_per, " (trailing bytes)");
  }
  if (enc == index_encoding::none) {
    require_wire(nnz == dense_length, "dense message (no indices) carries ", nnz,
                 " values for dense length ", dense_length);
    require_wire(index_bytes == 0, "dense message declares ", index_bytes, " index bytes");
  } else {
    require_wire(dense_length <= max_sparse_dense_length_elements, "sparse dense length ",
                 dense_length, " exceeds the 32-bit index limit ",
                 max_sparse_dense_length_elements);
  }
  if (enc == index_encoding::u32) {
    require_wire(index_bytes == 4 * nnz, "u32 index section has ", index_bytes,
                 " bytes, expected 4 x nnz = ", 4 * nnz);
  } else if (enc == index_encoding::delta_varint) {
    require_wire(index_bytes >= nnz && index_bytes <= 5 * nnz, "varint index section of ",
                 index_bytes, " bytes cannot hold ", nnz, " indices (1 to 5 bytes each)");
  }

  out.clear(dense_length);
  out.dense = enc == index_encoding::none;
  out.values_type = vt;
  const std::byte* q = p + wire_header_bytes;
  if (enc == index_encoding::u32) {
    out.indices.resize(nnz);
    detail::decode_u32_indices(q, nnz, dense_length, out.indices.data());
  } else if (enc == index_encoding::delta_varint) {
    out.indices.resize(nnz);
    detail::decode_varint_indices(q, q + index_bytes, nnz, dense_length, out.indices.data());
  }
  q += index_bytes;
  if (vt == value_type::quantized) {
    detail::decode_quantized(q, body - index_bytes, nnz, out);
    return;
  }
  out.values.resize(nnz);
  detail::decode_values(q, nnz, vt, out.values.data());
}

//! @brief Convenience form of decode() returning a new message.
//! @throws gradcomp::wire_error as decode().
[[nodiscard]] inline sparse_message decode(std::span<const std::byte> bytes) {
  sparse_message m;
  decode(bytes, m);
  return m;
}

//! @brief Name of an index encoding as used by the tools ("none", "u32", "delta_varint").
[[nodiscard]] constexpr std::string_view to_string(index_encoding e) noexcept {
  switch (e) {
  case index_encoding::none:
    return "none";
  case index_encoding::u32:
    return "u32";
  case index_encoding::delta_varint:
    return "delta_varint";
  }
  return "unknown";
}

} // namespace gradcomp
