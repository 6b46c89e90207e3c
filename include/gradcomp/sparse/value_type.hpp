// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The element types a message's values may take on the wire, and rounding to them.
#pragma once

#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_round.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gradcomp {

//! @brief Value type of a message on the wire. The numeric codes are part of the wire format.
enum class value_type : std::uint8_t {
  fp32 = 1, //!< IEEE binary32, 4 bytes per value (exact).
  fp16 = 2, //!< IEEE binary16, 2 bytes per value (11-bit significand, max 65504).
  bf16 = 3, //!< bfloat16, 2 bytes per value (8-bit significand, fp32's exponent range).
};

//! @brief Bytes one value of type `t` occupies on the wire: 4, 2 or 2.
[[nodiscard]] constexpr std::size_t value_size_bytes(value_type t) noexcept {
  return t == value_type::fp32 ? 4 : 2;
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
  }
  return "unknown";
}

//! @brief The value type called `name` ("fp32", "fp16", "bf16": the inverse of to_string), or
//! std::nullopt for any other name. O(1).
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
//! O(1); deterministic.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float round_to(value_type t, float v) noexcept {
  switch (t) {
  case value_type::fp32:
    return v;
  case value_type::fp16:
    return detail::half_bits_to_float(detail::float_to_half_bits_saturating(v));
  case value_type::bf16:
    return detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(v));
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
