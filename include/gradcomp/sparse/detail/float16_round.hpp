// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Rounding a float array to fp16 values in place (saturating at +-65504), with the
//! x86 F16C conversion instructions when the CPU has them (chosen at run time) and the portable
//! bit-exact conversion otherwise. Both give identical bits for every input.
#pragma once

#include <gradcomp/sparse/detail/float16.hpp>

#include <cstddef>
#include <span>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GRADCOMP_X86_F16C_DISPATCH 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace gradcomp::detail {

inline void round_to_half_saturating_portable(float* v, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = half_bits_to_float(float_to_half_bits_saturating(v[i]));
  }
}

#ifdef GRADCOMP_X86_F16C_DISPATCH

//! 8 values at a time: finite values are clamped to +-65504 (the saturation), then converted to
//! half with round-to-nearest-even and back. Blocks holding a NaN take the portable path, which
//! keeps the NaN payload exactly as round_to() does.
__attribute__((target("avx,f16c"))) inline void round_to_half_saturating_f16c(float* v,
                                                                              std::size_t n) {
  const __m256 largest = _mm256_set1_ps(65504.0f);
  const __m256 smallest = _mm256_set1_ps(-65504.0f);
  const __m256 infinity = _mm256_set1_ps(__builtin_inff());
  const __m256 sign = _mm256_set1_ps(-0.0f);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
      round_to_half_saturating_portable(v + i, 8);
      continue;
    }
    const __m256 is_infinite = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), infinity, _CMP_EQ_OQ);
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, smallest), largest);
    const __m256 finite_clamped = _mm256_blendv_ps(clamped, x, is_infinite);
    const __m128i half = _mm256_cvtps_ph(finite_clamped, _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(v + i, _mm256_cvtph_ps(half));
  }
  round_to_half_saturating_portable(v + i, n - i);
}

//! AVX with OS support (GCC/Clang builtin) and the F16C bit of CPUID leaf 1 (read directly:
//! clang 14's __builtin_cpu_supports does not know "f16c").
[[nodiscard]] inline bool cpu_has_f16c() noexcept {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
}

#endif

//! Rounds every value to the nearest fp16 value (ties to even), finite values saturating at
//! +-65504; infinities stay infinite; NaN stays NaN (payload as round_to()). O(n).
inline void round_to_half_saturating(std::span<float> values) noexcept {
#ifdef GRADCOMP_X86_F16C_DISPATCH
  if (cpu_has_f16c()) {
    round_to_half_saturating_f16c(values.data(), values.size());
    return;
  }
#endif
  round_to_half_saturating_portable(values.data(), values.size());
}

} // namespace gradcomp::detail
