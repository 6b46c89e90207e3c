// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Converting arrays between floats and little-endian binary16 bytes (the wire format's
//! fp16 value section), with the x86 F16C instructions when the CPU has them (chosen at run
//! time, as float16_round.hpp) and the portable bit-exact conversions of float16.hpp otherwise.
//! Both paths give identical bits for every input.
#pragma once

#include <gradcomp/sparse/detail/float16.hpp>
#include <gradcomp/sparse/detail/float16_round.hpp>
#include <gradcomp/sparse/detail/little_endian.hpp>

#include <cstddef>
#include <cstdint>

namespace gradcomp::detail {

inline void halves_to_floats_portable(const std::byte* q, std::size_t n, float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = half_bits_to_float(load_le<std::uint16_t>(q + 2 * i));
  }
}

inline void floats_to_halves_portable(const float* v, std::size_t n, std::byte* p) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    store_le<std::uint16_t>(p + 2 * i, float_to_half_bits(v[i]));
  }
}

#ifdef GRADCOMP_X86_F16C_DISPATCH

//! 8 values at a time (x86 is little-endian: the bytes load as they are). Every half, NaN
//! included, converts to a float exactly; VCVTPH2PS quiets a signalling NaN where the portable
//! conversion keeps its payload bit for bit, so blocks holding a NaN take the portable path.
__attribute__((target("avx,f16c"))) inline void
halves_to_floats_f16c(const std::byte* q, std::size_t n, float* out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * i));
    const __m256 x = _mm256_cvtph_ps(h);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) [[unlikely]] {
      halves_to_floats_portable(q + 2 * i, 8, out + i);
      continue;
    }
    _mm256_storeu_ps(out + i, x);
  }
  halves_to_floats_portable(q + 2 * i, n - i, out + i);
}

//! 8 values at a time, rounded to nearest even (beyond the largest half: infinity, as IEEE and
//! float_to_half_bits). Blocks holding a NaN take the portable path, which keeps the payload's
//! high bits as float_to_half_bits does.
__attribute__((target("avx,f16c"))) inline void
floats_to_halves_f16c(const float* v, std::size_t n, std::byte* p) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) [[unlikely]] {
      floats_to_halves_portable(v + i, 8, p + 2 * i);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  floats_to_halves_portable(v + i, n - i, p + 2 * i);
}

#endif

//! The `n` little-endian binary16 values at `q` (2 n readable bytes) as floats into `out`:
//! exact, NaN payloads kept (half_bits_to_float). O(n); never throws.
inline void halves_to_floats(const std::byte* q, std::size_t n, float* out) noexcept {
#ifdef GRADCOMP_X86_F16C_DISPATCH
  if (cpu_has_f16c()) {
    halves_to_floats_f16c(q, n, out);
    return;
  }
#endif
  halves_to_floats_portable(q, n, out);
}

//! The `n` floats at `v` as little-endian binary16 at `p` (2 n writable bytes), each as
//! float_to_half_bits rounds it (nearest even; overflow to infinity; NaN payload's high bits).
//! O(n); never throws.
inline void floats_to_halves(const float* v, std::size_t n, std::byte* p) noexcept {
#ifdef GRADCOMP_X86_F16C_DISPATCH
  if (cpu_has_f16c()) {
    floats_to_halves_f16c(v, n, p);
    return;
  }
#endif
  floats_to_halves_portable(v, n, p);
}

} // namespace gradcomp::detail
