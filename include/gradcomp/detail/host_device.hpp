// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GRADCOMP_HOST_DEVICE and the float bit casts that helpers shared by the host
//! compressors and the CUDA backend (gradcomp/cuda/) use, so that both compute bit-identical
//! keys, roundings and cuts from one definition.
//!
//! Without a CUDA compiler the macro expands to nothing and the casts are std::bit_cast; the
//! core headers stay standard C++20.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define GRADCOMP_HOST_DEVICE __host__ __device__
#else
#define GRADCOMP_HOST_DEVICE
#endif

namespace gradcomp::detail {

//! The IEEE-754 bit pattern of `v`. O(1); no rounding.
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint32_t float_bits(float v) noexcept {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  return std::bit_cast<std::uint32_t>(v);
#endif
}

//! The float whose IEEE-754 bit pattern is `bits`. O(1).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline float bits_float(std::uint32_t bits) noexcept {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

} // namespace gradcomp::detail
