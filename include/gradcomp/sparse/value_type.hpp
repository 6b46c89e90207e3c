// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The element types a message's values may take on the wire, and rounding to them.
#pragma once

#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_round.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>

namespace gradcomp {

//! @brief Value type of a message on the wire. The numeric codes are part of the wire format.
enum class value_type : std::uint8_t {
  fp32 = 1, //!< IEEE binary32, 4 bytes per value (exact).
  fp16 = 2, //!< IEEE binary16, 2 bytes per value (11-bit significand, max 65504).
  bf16 = 3, //!< bfloat16, 2 bytes per value (8-bit significand, fp32's exponent range).
  //! Quantized: every value is quantized_value(scale, j, levels) for one level count per
  //! message (sparse_message::quantization_levels), one scale per message or per run of values
  //! (quantization_scale, or quantization_segments: per-bucket or per-layer scales) and an
  //! integer j in [-levels, levels]; on the wire the scale or the segments' scales, the level
  //! count and a packed code of 1 (sign only) or 1 + bit_width(levels) bits per value
  //! (wire.hpp). Made by the quantizing compressors (scaled_sign, terngrad, qsgd), never a
  //! compressor option `values`.
  quantized = 4,
};

//! @brief Bytes one value of type `t` occupies on the wire: 4 (fp32), 2 (fp16, bf16); 0 for
//! quantized, whose values are packed below a byte (see values_section_bytes in wire.hpp).
[[nodiscard]] constexpr std::size_t value_size_bytes(value_type t) noexcept {
  return t == value_type::fp32 ? 4 : t == value_type::quantized ? 0 : 2;
}

//! @brief The most levels a quantized message may have: 2^15 (a code of at most 17 bits, and
//! j / levels exact in float).
inline constexpr std::uint32_t max_quantization_levels = 1u << 15;

//! @brief The smallest scale a quantized message may have: 2^-111 (= 2^15 x FLT_MIN), so that
//! every nonzero value scale x j / levels is a normal float and maps back to its code exactly.
inline constexpr float min_quantization_scale = 0x1p-111f;

//! @brief Whether `scale` may be a quantized message's scale: finite and >= min_quantization_scale.
//! O(1).
[[nodiscard]] constexpr bool valid_quantization_scale(float scale) noexcept {
  return scale >= min_quantization_scale && scale <= std::numeric_limits<float>::max();
}

//! @brief Whether `levels` may be a quantized message's level count: [1, max_quantization_levels].
//! O(1).
[[nodiscard]] constexpr bool valid_quantization_levels(std::uint32_t levels) noexcept {
  return levels >= 1 && levels <= max_quantization_levels;
}

//! @brief The value of code j of a quantized message: scale x (j / levels), both operations in
//! float (so that the compressor that makes a value and the decoder that reads it compute the
//! same bits). Host and CUDA device code; O(1). @pre levels >= 1, |j| <= levels.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float
quantized_value(float scale, std::int32_t j, std::uint32_t levels) noexcept {
  return scale * (static_cast<float>(j) / static_cast<float>(levels));
}

//! @brief Bits per value a quantized message of `levels` levels takes on the wire: 1 (sign only)
//! when levels == 1 and no value is 0 (`has_zero` false), else 1 + bit_width(levels) (a sign and
//! the magnitude |j|). O(1).
[[nodiscard]] constexpr unsigned quantized_code_bits(std::uint32_t levels, bool has_zero) noexcept {
  return levels == 1 && !has_zero ? 1u : 1u + static_cast<unsigned>(std::bit_width(levels));
}

//! @brief The name used by the command-line tools and in reports ("fp32", "fp16", "bf16").
[[nodiscard]] constexpr std::string_view to_string(value_type t) noexcept {
  switch (t) {
  case value_type::fp32:
    return "fp32";
  case value_type::fp16:
    return "fp16";
  case value_type::bf16:
    return "bf16";
  case value_type::quantized:
    return "quantized";
  }
  return "unknown";
}

//! @brief The value type called `name` ("fp32", "fp16", "bf16": the inverse of to_string for the
//! types a compressor can round to), or std::nullopt for any other name, "quantized" included
//! (only the quantizing compressors make it). O(1).
[[nodiscard]] constexpr std::optional<value_type>
value_type_from_string(std::string_view name) noexcept {
  for (const value_type t : {value_type::fp32, value_type::fp16, value_type::bf16}) {
    if (name == to_string(t)) {
      return t;
    }
  }
  return std::nullopt;
}

//! @brief Rounds one value to the nearest value representable in `t` (ties to even) and returns
//! it as a float (host and CUDA device code). fp16 saturates at +-65504 instead of overflowing to
//! infinity, so that an error feedback residual `v - round_to(v)` stays finite. NaN stays NaN.
//! quantized returns v unchanged (its compressors make representable values themselves).
//! O(1); deterministic.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float round_to(value_type t, float v) noexcept {
  switch (t) {
  case value_type::fp32:
    return v;
  case value_type::fp16:
    return detail::half_bits_to_float(detail::float_to_half_bits_saturating(v));
  case value_type::bf16:
    return detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(v));
  case value_type::quantized:
    return v;
  }
  return v;
}

//! @brief What error feedback keeps of the accumulated value `acc` once `sent` = round_to(t, acc)
//! went out: the rounding error acc - sent (exact, by Sterbenz's lemma), 0 when it went out
//! unchanged (infinities included), and 0 for a NaN, which is sent as NaN: kept, it would be
//! sent again on every later call. Host and CUDA device code; O(1).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float residual_after_sending(float acc,
                                                                       float sent) noexcept {
  return acc == sent || acc != acc ? 0.0f : acc - sent;
}

//! @brief Rounds every element of `values` in place with round_to(). O(n); no allocation.
inline void round_values_to(value_type t, std::span<float> values) noexcept {
  switch (t) {
  case value_type::fp32:
  case value_type::quantized:
    return;
  case value_type::fp16:
    detail::round_to_half_saturating(values);
    return;
  case value_type::bf16:
    for (float& v : values) {
      v = detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(v));
    }
    return;
  }
}

} // namespace gradcomp
