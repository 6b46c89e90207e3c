// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Little-endian stores and loads of unsigned integers at a byte pointer, as the wire
//! format (gradcomp/sparse/wire.hpp) writes every integer: the same bytes on every platform.
#pragma once

#include <cstddef>

namespace gradcomp::detail {

//! Writes `v` at `p` as sizeof(U) bytes, least significant first. @tparam U an unsigned type.
template <class U>
void store_le(std::byte* p, U v) noexcept {
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
  }
}

//! Reads sizeof(U) bytes at `p`, least significant first. @tparam U an unsigned type.
template <class U>
[[nodiscard]] U load_le(const std::byte* p) noexcept {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    v |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
  }
  return v;
}

} // namespace gradcomp::detail
