// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Unsigned LEB128 (7 bits per byte, high bit = continuation) for 32-bit values, with a
//! strict decoder: at most 5 bytes, no bits beyond 32, no redundant trailing zero bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradcomp::detail {

//! Bytes LEB128 needs for `v`: 1..5.
[[nodiscard]] constexpr std::size_t varint_size(std::uint32_t v) noexcept {
  std::size_t n = 1;
  while (v >= 0x80u) {
    v >>= 7;
    ++n;
  }
  return n;
}

//! Writes `v` at `out` and returns the position after it. `out` must have 5 bytes of room.
inline std::byte* write_varint(std::uint32_t v, std::byte* out) noexcept {
  while (v >= 0x80u) {
    *out++ = static_cast<std::byte>((v & 0x7fu) | 0x80u);
    v >>= 7;
  }
  *out++ = static_cast<std::byte>(v);
  return out;
}

//! Reads one canonical varint from [p, end). Returns false (and leaves `p` unspecified) on a
//! truncated, over-long, overflowing or non-canonical encoding.
[[nodiscard]] inline bool
read_varint(const std::byte*& p, const std::byte* end, std::uint32_t& v) noexcept {
  std::uint32_t result = 0;
  for (int i = 0; i < 5; ++i) {
    if (p == end) {
      return false;
    }
    const auto b = static_cast<std::uint32_t>(*p++);
    if (i == 4 && b > 0x0fu) {
      return false; // bits beyond 32 (or a sixth byte announced)
    }
    result |= (b & 0x7fu) << (7 * i);
    if ((b & 0x80u) == 0) {
      if (i > 0 && b == 0) {
        return false; // redundant zero byte: not the canonical (shortest) form
      }
      v = result;
      return true;
    }
  }
  return false;
}

} // namespace gradcomp::detail
