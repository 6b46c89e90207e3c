// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exact arithmetic for coded gradient packets (S3, last bullets; docs/coded.md, "Exact
//! coding"): float sums do not decode exactly (the error is about 2^-24 |sum|, and receivers
//! that cancel different terms round differently, so replicas drift), so packets are coded
//! either
//! - in **fixed point**: float -> int32 with a per-tensor power-of-two scale, sums and
//!   differences wrap around modulo 2^32 (done in uint32: signed overflow is undefined
//!   behaviour), decoded back once at the end; sums are exact and independent of order, so
//!   partial sums can be coded and all replicas stay bit-identical; or
//! - by **XOR of the float bit patterns**: exact for every value (NaN and infinities included),
//!   but pure delivery: an XOR-coded packet cannot be summed.
//!
//! Combining r slices into a packet and cancelling the r - 1 known ones recovers the missing
//! slice bit for bit in both schemes. Slices may be shorter than the packet; they are treated as
//! zero-padded (adding or XOR-ing zero changes nothing), as the send rule pads every slice to
//! the longest (docs/coded.md, "Send rule and decoding"). Host code, standard library only;
//! every function is O(length) and deterministic.
#pragma once

#include <gradcomp/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace gradcomp::coded {

// ---- fixed point ---------------------------------------------------------------------------

//! @brief The largest magnitude of a fixed-point code, 2^31 - 1. Codes lie in
//! [-fixed_point_max_code, fixed_point_max_code] (symmetric: -2^31 is never produced by
//! encode_fixed_point, though it can appear in wrapped intermediate sums).
inline constexpr std::int32_t fixed_point_max_code = 2147483647;

//! @brief The scale for fixed-point coding of values whose magnitudes are at most
//! `max_abs_value`, when up to `summed_terms` codes are summed before the sum is decoded.
//!
//! Returns the largest power of two S with max_abs_value x S <= Q, Q = floor((2^31 - 1) /
//! summed_terms), so every code has |round(x S)| <= Q and any sum of summed_terms codes lies in
//! [-(2^31 - 1), 2^31 - 1]: it cannot overflow (the headroom S <= (2^31 - 1) / (10 m) that
//! CSSGD's fixed range [-10, 10] would need, here with the agreed maximum instead of 10;
//! docs/coded.md, "Exact coding"). A power of two makes x S and q / S exact in double, so
//! encoding rounds once.
//!
//! max_abs_value must be the same on every rank (the transport agrees on it by an allreduce of
//! max |value| over all ranks and parts), so all ranks get the same scale. summed_terms is the
//! number of codes in the largest sum that is decoded: for a coded exchange whose receivers sum
//! all C(n, r) part gradients in fixed point and decode once, C(n, r) (placement::part_count).
//! Wrapped intermediate values (coded packets that sum r slices, partial sums) are harmless:
//! arithmetic is exact modulo 2^32 and only the decoded value must lie in int32's range.
//!
//! Error bound (for this scale): |x - q / S| <= 0.5 / S per element (q = the code of x), and
//! |sum_i x_i - (sum_i q_i) / S| <= m 0.5 / S for a sum of m <= summed_terms codes. The step
//! 1 / S satisfies max_abs_value / Q <= 1 / S < 2 max_abs_value / Q (about
//! max_abs_value summed_terms 2^-31 to twice that). max_abs_value = 0 (all values zero) gives
//! the scale for 1.0. O(1).
//! @throws std::invalid_argument naming the value and the limit if max_abs_value is negative,
//! NaN or infinite, summed_terms is outside [1, 2^31 - 1], or max_abs_value is so small that
//! S would not be a finite double.
[[nodiscard]] inline double fixed_point_scale(double max_abs_value, std::size_t summed_terms) {
  gradcomp::detail::require(std::isfinite(max_abs_value) && max_abs_value >= 0.0,
                            "fixed_point_scale: max |value| ", max_abs_value,
                            " is not a finite value >= 0");
  gradcomp::detail::require(summed_terms >= 1 &&
                                summed_terms <= static_cast<std::size_t>(fixed_point_max_code),
                            "fixed_point_scale: summed term count ", summed_terms,
                            " is outside [1, ", fixed_point_max_code, "]");
  const double limit =
      static_cast<double>(static_cast<std::size_t>(fixed_point_max_code) / summed_terms);
  const double max_abs = max_abs_value > 0.0 ? max_abs_value : 1.0;
  // start near log2(limit / max_abs), then settle on the largest e with max_abs 2^e <= limit
  // (ldexp by a power of two is exact, so the test is exact)
  int e = std::ilogb(limit) - std::ilogb(max_abs);
  while (std::ldexp(max_abs, e) > limit) {
    --e;
  }
  while (std::ldexp(max_abs, e + 1) <= limit) {
    ++e;
  }
  const double scale = std::ldexp(1.0, e);
  gradcomp::detail::require(std::isfinite(scale) && scale > 0.0, "fixed_point_scale: max |value| ",
                            max_abs_value, " is too small: the scale 2^", e,
                            " is not a finite double");
  return scale;
}

namespace detail {

inline void check_scale(double scale, const char* function) {
  gradcomp::detail::require(std::isfinite(scale) && scale > 0.0, function, ": scale ", scale,
                            " is not a finite value > 0");
}

inline void check_same_length(std::size_t input,
                              std::size_t output,
                              const char* function,
                              const char* input_name,
                              const char* output_name) {
  gradcomp::detail::require(input == output, function, ": ", input, " ", input_name, " but ",
                            output, " ", output_name, " (the lengths must be equal)");
}

inline void check_fits(std::size_t slice, std::size_t packet, const char* function) {
  gradcomp::detail::require(slice <= packet, function, ": a slice of ", slice,
                            " elements is longer than the packet of ", packet, " elements");
}

[[nodiscard]] constexpr std::int32_t wrapping_add(std::int32_t a, std::int32_t b) noexcept {
  // uint32 arithmetic is modulo 2^32; converting back to int32 is modular since C++20
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

[[nodiscard]] constexpr std::int32_t wrapping_subtract(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b));
}

} // namespace detail

//! @brief Encodes floats as fixed-point codes: codes[i] = round(values[i] x scale), rounding
//! halves away from zero, saturated to [-(2^31 - 1), 2^31 - 1] (infinities and values beyond
//! the agreed maximum saturate; saturated values lose the error bound and the headroom).
//! With a power-of-two scale from fixed_point_scale the product is exact, so
//! |values[i] - codes[i] / scale| <= 0.5 / scale for every |values[i]| <= max_abs_value.
//! Deterministic on every IEEE-754 platform (no dependence on the rounding mode).
//! @param[in] values n floats.
//! @param[in] scale finite, > 0 (normally from fixed_point_scale, the same on every rank).
//! @param[out] codes n int32 codes.
//! @throws std::invalid_argument naming both lengths if they differ, naming the scale if it is
//! not finite and positive, or naming the index of a NaN value (NaN has no code).
inline void
encode_fixed_point(std::span<const float> values, double scale, std::span<std::int32_t> codes) {
  detail::check_same_length(values.size(), codes.size(), "encode_fixed_point", "values", "codes");
  detail::check_scale(scale, "encode_fixed_point");
  constexpr double limit = fixed_point_max_code;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (std::isnan(v)) {
      throw std::invalid_argument(gradcomp::detail::concat(
          "gradcomp: encode_fixed_point: value ", i, " is NaN, which has no fixed-point code"));
    }
    const double t = std::round(static_cast<double>(v) * scale);
    codes[i] = t >= limit    ? fixed_point_max_code
               : t <= -limit ? -fixed_point_max_code
                             : static_cast<std::int32_t>(t);
  }
}

//! @brief Decodes fixed-point codes to doubles: values[i] = codes[i] / scale, exact for a
//! power-of-two scale (so |x - decode(encode(x))| <= 0.5 / scale, and a decoded sum of m codes
//! is within m 0.5 / scale of the exact sum of the encoded values).
//! @param[in] codes n codes (a sum of codes, wrapped or not, is decoded as its int32 value).
//! @param[in] scale the scale they were encoded with.
//! @param[out] values n doubles.
//! @throws std::invalid_argument naming both lengths if they differ, or the scale if it is not
//! finite and positive.
inline void
decode_fixed_point(std::span<const std::int32_t> codes, double scale, std::span<double> values) {
  detail::check_same_length(codes.size(), values.size(), "decode_fixed_point", "codes", "values");
  detail::check_scale(scale, "decode_fixed_point");
  for (std::size_t i = 0; i < codes.size(); ++i) {
    values[i] = static_cast<double>(codes[i]) / scale;
  }
}

//! @brief Decodes fixed-point codes to floats: values[i] = codes[i] / scale rounded once to the
//! nearest float. For a float x encoded with a power-of-two scale,
//! |x - decode(encode(x))| <= min(1 / scale, 0.5 / scale + ulp(result) / 2): the quantisation
//! error 0.5 / scale plus the rounding to float, which never moves the result farther from
//! q / scale than x itself is. Use the double overload when the float rounding matters.
//! @throws std::invalid_argument naming both lengths if they differ, or the scale if it is not
//! finite and positive.
inline void
decode_fixed_point(std::span<const std::int32_t> codes, double scale, std::span<float> values) {
  detail::check_same_length(codes.size(), values.size(), "decode_fixed_point", "codes", "values");
  detail::check_scale(scale, "decode_fixed_point");
  for (std::size_t i = 0; i < codes.size(); ++i) {
    values[i] = static_cast<float>(static_cast<double>(codes[i]) / scale);
  }
}

//! @brief packet[i] += slice[i] modulo 2^32 for i < slice.size() (a shorter slice counts as
//! zero-padded). Exact and order-independent.
//! @throws std::invalid_argument naming both lengths if the slice is longer than the packet.
inline void add_fixed_point(std::span<const std::int32_t> slice, std::span<std::int32_t> packet) {
  detail::check_fits(slice.size(), packet.size(), "add_fixed_point");
  for (std::size_t i = 0; i < slice.size(); ++i) {
    packet[i] = detail::wrapping_add(packet[i], slice[i]);
  }
}

//! @brief packet[i] -= slice[i] modulo 2^32 for i < slice.size(): the exact inverse of
//! add_fixed_point.
//! @throws std::invalid_argument naming both lengths if the slice is longer than the packet.
inline void subtract_fixed_point(std::span<const std::int32_t> slice,
                                 std::span<std::int32_t> packet) {
  detail::check_fits(slice.size(), packet.size(), "subtract_fixed_point");
  for (std::size_t i = 0; i < slice.size(); ++i) {
    packet[i] = detail::wrapping_subtract(packet[i], slice[i]);
  }
}

//! @brief The coded packet of S3 "Exchange" in fixed point: packet = the sum modulo 2^32 of the
//! slices, each zero-padded to the packet's length (normally placement::packet_elements).
//! Intermediate and final values may wrap; cancel_fixed_point undoes the known terms exactly.
//! O(packet length + total slice length).
//! @param[in] slices the r slices (any number is allowed; none gives a zero packet).
//! @param[out] packet overwritten.
//! @throws std::invalid_argument naming both lengths if a slice is longer than the packet
//! (checked before anything is written).
inline void combine_fixed_point(std::span<const std::span<const std::int32_t>> slices,
                                std::span<std::int32_t> packet) {
  for (const std::span<const std::int32_t> s : slices) {
    detail::check_fits(s.size(), packet.size(), "combine_fixed_point");
  }
  std::fill(packet.begin(), packet.end(), std::int32_t{0});
  for (const std::span<const std::int32_t> s : slices) {
    add_fixed_point(s, packet);
  }
}

//! @brief Decoding (S3: "receiver j subtracts the terms it already knows"): subtracts every
//! known slice from a packet modulo 2^32. When `known_slices` are all terms of the packet but
//! one, the packet then holds exactly that one, bit for bit (zero-padded).
//! @param[in] known_slices the r - 1 slices the receiver owns.
//! @param[in,out] packet the received packet; on return, the missing slice.
//! @throws std::invalid_argument naming both lengths if a slice is longer than the packet
//! (checked before anything is written).
inline void cancel_fixed_point(std::span<const std::span<const std::int32_t>> known_slices,
                               std::span<std::int32_t> packet) {
  for (const std::span<const std::int32_t> s : known_slices) {
    detail::check_fits(s.size(), packet.size(), "cancel_fixed_point");
  }
  for (const std::span<const std::int32_t> s : known_slices) {
    subtract_fixed_point(s, packet);
  }
}

// ---- XOR of bit patterns -------------------------------------------------------------------

//! @brief words[i] = the IEEE-754 bit pattern of values[i] (a bit copy: exact for every value,
//! NaN payloads, infinities and -0 included).
//! @throws std::invalid_argument naming both lengths if they differ.
inline void encode_bits(std::span<const float> values, std::span<std::uint32_t> words) {
  detail::check_same_length(values.size(), words.size(), "encode_bits", "values", "words");
  for (std::size_t i = 0; i < values.size(); ++i) {
    words[i] = std::bit_cast<std::uint32_t>(values[i]);
  }
}

//! @brief values[i] = the float whose bit pattern is words[i]: the exact inverse of
//! encode_bits.
//! @throws std::invalid_argument naming both lengths if they differ.
inline void decode_bits(std::span<const std::uint32_t> words, std::span<float> values) {
  detail::check_same_length(words.size(), values.size(), "decode_bits", "words", "values");
  for (std::size_t i = 0; i < words.size(); ++i) {
    values[i] = std::bit_cast<float>(words[i]);
  }
}

//! @brief packet[i] ^= slice[i] for i < slice.size() (a shorter slice counts as zero-padded).
//! Its own inverse.
//! @throws std::invalid_argument naming both lengths if the slice is longer than the packet.
inline void xor_into(std::span<const std::uint32_t> slice, std::span<std::uint32_t> packet) {
  detail::check_fits(slice.size(), packet.size(), "xor_into");
  for (std::size_t i = 0; i < slice.size(); ++i) {
    packet[i] ^= slice[i];
  }
}

//! @brief The coded packet of S3 "Exchange" by XOR (docs/coded.md, "Send rule and decoding", as
//! Coded TeraSort codes, docs/references.md [CTS]): packet = the XOR of the slices, each
//! zero-padded to the packet's length.
//! @param[in] slices the r slices (none gives a zero packet).
//! @param[out] packet overwritten.
//! @throws std::invalid_argument naming both lengths if a slice is longer than the packet
//! (checked before anything is written).
inline void combine_xor(std::span<const std::span<const std::uint32_t>> slices,
                        std::span<std::uint32_t> packet) {
  for (const std::span<const std::uint32_t> s : slices) {
    detail::check_fits(s.size(), packet.size(), "combine_xor");
  }
  std::fill(packet.begin(), packet.end(), std::uint32_t{0});
  for (const std::span<const std::uint32_t> s : slices) {
    xor_into(s, packet);
  }
}

//! @brief Decoding by XOR: XORs every known slice out of the packet. When `known_slices` are
//! all terms of the packet but one, the packet then holds exactly that one (zero-padded).
//! @param[in] known_slices the r - 1 slices the receiver owns.
//! @param[in,out] packet the received packet; on return, the missing slice.
//! @throws std::invalid_argument naming both lengths if a slice is longer than the packet
//! (checked before anything is written).
inline void cancel_xor(std::span<const std::span<const std::uint32_t>> known_slices,
                       std::span<std::uint32_t> packet) {
  for (const std::span<const std::uint32_t> s : known_slices) {
    detail::check_fits(s.size(), packet.size(), "cancel_xor");
  }
  for (const std::span<const std::uint32_t> s : known_slices) {
    xor_into(s, packet);
  }
}

} // namespace gradcomp::coded
