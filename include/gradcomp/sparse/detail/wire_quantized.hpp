// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The quantized values section of the wire format (gradcomp/sparse/wire.hpp, value type
//! 4): its size (prefix, segment table, packed codes), its encoder and its validating decoder.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/detail/little_endian.hpp>
#include <gradcomp/sparse/detail/varint.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gradcomp::detail {

//! Whether a quantized message has a value 0 (it then needs a magnitude bit even at 1 level).
inline bool quantized_has_zero(const sparse_message& m) noexcept {
  return std::any_of(m.values.begin(), m.values.end(), [](float v) { return v == 0.0f; });
}

//! Bytes of the prefix of a quantized values section: scale, levels, code width.
inline constexpr std::size_t quantized_prefix_bytes = 9;

//! Bytes of `nnz` packed codes of `bits` bits each. @pre nnz x bits does not overflow.
[[nodiscard]] constexpr std::uint64_t packed_code_bytes(std::uint64_t nnz, unsigned bits) noexcept {
  return (nnz * bits + 7) / 8;
}

//! The code width of a quantized message: quantized_code_bits of its levels and whether a value
//! is 0. O(nnz).
inline unsigned quantized_bits_of(const sparse_message& m) noexcept {
  return quantized_code_bits(m.quantization_levels, quantized_has_zero(m));
}

//! Bytes of a quantized message's segment table: 0 without segments, else the count (4) and
//! per segment a varint count and a 4-byte scale. O(segments). @pre counts below 2^32.
inline std::size_t segment_table_bytes(const sparse_message& m) noexcept {
  if (m.quantization_segments.empty()) {
    return 0;
  }
  std::size_t bytes = 4;
  for (const quantization_segment& s : m.quantization_segments) {
    bytes += varint_size(static_cast<std::uint32_t>(s.values)) + 4;
  }
  return bytes;
}

// Writes m's quantized values section at p (values_section_bytes(m, bits) bytes; `bits` is
// quantized_bits_of(m)).
// @throws std::invalid_argument naming the first value that is not scale x j / levels, or the
// first bad scale or segment.
inline void encode_quantized(const sparse_message& m, unsigned bits, std::byte* p) {
  require(valid_quantization_levels(m.quantization_levels), "quantized message: levels ",
          m.quantization_levels, " outside [1, ", max_quantization_levels, "]");
  m.validate_segments();
  const bool segmented = !m.quantization_segments.empty();
  store_le<std::uint32_t>(p, segmented ? 0u : std::bit_cast<std::uint32_t>(m.quantization_scale));
  store_le<std::uint32_t>(p + 4, m.quantization_levels);
  p[8] = static_cast<std::byte>(bits);
  p += quantized_prefix_bytes;
  if (segmented) {
    store_le<std::uint32_t>(p, static_cast<std::uint32_t>(m.quantization_segments.size()));
    p += 4;
    for (const quantization_segment& s : m.quantization_segments) {
      p = write_varint(static_cast<std::uint32_t>(s.values), p);
      store_le<std::uint32_t>(p, std::bit_cast<std::uint32_t>(s.scale));
      p += 4;
    }
  }
  std::uint64_t acc = 0; // bit accumulator, least significant bits first
  unsigned held = 0;
  m.for_each_quantization_scale([&](std::size_t i, float scale) {
    const std::optional<std::int32_t> j =
        sparse_message::quantization_code(m.values[i], scale, m.quantization_levels);
    require(j.has_value(), "quantized message value ", m.values[i], " at position ", i,
            " is not scale ", scale, " x j / ", m.quantization_levels,
            " for an integer |j| <= ", m.quantization_levels);
    const std::uint32_t code =
        bits == 1 ? (*j < 0 ? 1u : 0u)
                  : (*j < 0 ? 1u : 0u) | (static_cast<std::uint32_t>(*j < 0 ? -*j : *j) << 1);
    acc |= std::uint64_t{code} << held;
    held += bits;
    while (held >= 8) {
      *p++ = static_cast<std::byte>(acc & 0xffu);
      acc >>= 8;
      held -= 8;
    }
  });
  if (held > 0) {
    *p = static_cast<std::byte>(acc & 0xffu);
  }
}

// Reads the segment table of a quantized values section from [q, end) into out (segments of
// at least one value, valid scales, counts summing to nnz); returns the position after it.
// @throws wire_error naming the failed check.
inline const std::byte* decode_segment_table(const std::byte* q,
                                             const std::byte* end,
                                             std::uint64_t nnz,
                                             std::vector<quantization_segment>& out) {
  require_wire(end - q >= 4, "quantized segment table: ", end - q,
               " bytes left, its segment count needs 4");
  const auto count = load_le<std::uint32_t>(q);
  q += 4;
  require_wire(count >= 1 && count <= nnz, "quantized segment table: ", count, " segments for ",
               nnz, " values (expected 1 to ", nnz, ")");
  require_wire(static_cast<std::uint64_t>(end - q) >= std::uint64_t{count} * 5,
               "quantized segment table: ", count, " segments need at least ",
               std::uint64_t{count} * 5, " bytes, ", end - q, " left");
  out.resize(count);
  std::uint64_t total = 0;
  for (std::uint32_t s = 0; s < count; ++s) {
    std::uint32_t values = 0;
    require_wire(read_varint(q, end, values),
                 "quantized segment table: malformed varint count of segment ", s);
    require_wire(end - q >= 4, "quantized segment table: segment ", s, "'s scale is truncated");
    const float scale = std::bit_cast<float>(load_le<std::uint32_t>(q));
    q += 4;
    require_wire(values >= 1 && values <= nnz - total, "quantized segment ", s, " has ", values,
                 " values, ", nnz - total, " of the ", nnz, " remain (and at least 1 is needed)");
    require_wire(valid_quantization_scale(scale), "quantized segment ", s, " scale ", scale,
                 " is not finite and >= 2^-111");
    out[s] = quantization_segment{values, scale};
    total += values;
  }
  require_wire(total == nnz, "quantized segments hold ", total, " values, the message carries ",
               nnz);
  return q;
}

// Reads a quantized values section of `section` bytes at q holding nnz codes into out (values,
// scale, levels), validating everything. @throws wire_error naming the failed check.
inline void decode_quantized(const std::byte* q,
                             std::uint64_t section,
                             std::uint64_t nnz,
                             sparse_message& out) {
  require_wire(section >= quantized_prefix_bytes, "quantized values section of ", section,
               " bytes is shorter than its ", quantized_prefix_bytes, "-byte prefix");
  const std::byte* const end = q + section;
  const auto scale_bits = load_le<std::uint32_t>(q);
  const float scale = std::bit_cast<float>(scale_bits);
  const auto levels = load_le<std::uint32_t>(q + 4);
  const auto bits = static_cast<unsigned>(q[8]);
  const bool segmented = scale_bits == 0; // +0.0: a segment table follows
  require_wire(segmented || valid_quantization_scale(scale), "quantized scale ", scale,
               " is not finite and >= 2^-111 (nor +0, the mark of a segment table)");
  require_wire(valid_quantization_levels(levels), "quantized levels ", levels, " outside [1, ",
               max_quantization_levels, "]");
  const unsigned wide = quantized_code_bits(levels, true);
  require_wire(bits == wide || (bits == 1 && levels == 1), "quantized code width ", bits,
               " bits for ", levels, " levels (expected ", wide,
               levels == 1 ? ", or 1 without zeros)" : ")");
  q += quantized_prefix_bytes;
  if (segmented) {
    q = decode_segment_table(q, end, nnz, out.quantization_segments);
  } else {
    out.quantization_segments.clear();
  }
  require_wire(static_cast<std::uint64_t>(end - q) == packed_code_bytes(nnz, bits),
               "quantized values section has ", end - q, " code bytes, ", nnz, " codes of ", bits,
               " bits need ", packed_code_bytes(nnz, bits));
  out.quantization_scale = segmented ? 0.0f : scale;
  out.quantization_levels = levels;
  out.values.resize(nnz);
  const std::uint32_t mask = (1u << bits) - 1u;
  std::uint64_t acc = 0;
  unsigned held = 0;
  bool zero = false;
  std::uint64_t i = 0;
  // the codes of positions [i, i + count), all of scale `run_scale`
  const auto decode_run = [&](std::uint64_t count, float run_scale) {
    for (const std::uint64_t run_end = i + count; i < run_end; ++i) {
      while (held < bits) {
        acc |= std::uint64_t{static_cast<std::uint8_t>(*q++)} << held;
        held += 8;
      }
      const auto code = static_cast<std::uint32_t>(acc & mask);
      acc >>= bits;
      held -= bits;
      std::int32_t j = 0;
      if (bits == 1) {
        j = code != 0 ? -1 : 1;
      } else {
        const std::uint32_t magnitude = code >> 1;
        require_wire(magnitude <= levels, "quantized code at position ", i, " has magnitude ",
                     magnitude, " above the ", levels, " levels");
        require_wire(magnitude != 0 || (code & 1u) == 0, "quantized code at position ", i,
                     " is a negative zero");
        j = (code & 1u) != 0 ? -static_cast<std::int32_t>(magnitude)
                             : static_cast<std::int32_t>(magnitude);
        zero |= magnitude == 0;
      }
      out.values[i] = quantized_value(run_scale, j, levels);
    }
  };
  if (segmented) {
    for (const quantization_segment& seg : out.quantization_segments) {
      decode_run(seg.values, seg.scale);
    }
  } else {
    decode_run(nnz, scale);
  }
  require_wire(acc == 0, "quantized codes: the last byte's unused bits are not 0");
  require_wire(bits == 1 || levels != 1 || zero,
               "quantized codes of 2 bits at 1 level without a zero (not the canonical 1-bit "
               "form)");
}

} // namespace gradcomp::detail
