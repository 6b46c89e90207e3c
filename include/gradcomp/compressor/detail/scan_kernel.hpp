// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The threshold filter's inner loop: scan a range, optionally accumulating error
//! feedback (r += g) on the way, and append every (index, value) whose magnitude key reaches a
//! threshold. An AVX2 kernel (branch-free stream compaction through a permutation table) is
//! chosen at run time when the CPU has it; otherwise an SSE2 / portable kernel runs. Both give
//! identical output.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GRADCOMP_X86_DISPATCH 1
#include <immintrin.h>
#endif

namespace gradcomp::detail {

//! One chunk's hits: `indices` / `values` are used as raw buffers (their size is the capacity
//! in use); `stored` entries are valid. After the cap was exceeded nothing more is stored,
//! `overflow` is set, and `count` keeps counting every hit.
struct hit_list {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::size_t stored = 0;
  std::size_t count = 0;
  bool overflow = false;

  void reset() noexcept {
    stored = 0;
    count = 0;
    overflow = false;
  }
  //! Makes room for `more` entries past `stored`.
  void reserve_more(std::size_t more) {
    if (stored + more > indices.size()) {
      const std::size_t size = std::max<std::size_t>(2 * indices.size(), stored + more + 1024);
      indices.resize(size);
      values.resize(size);
    }
  }
  //! Applies the cap after a block: past `limit` stored hits, stop storing (keep counting).
  void apply_cap(std::size_t limit) noexcept {
    if (stored > limit) {
      count += stored;
      stored = 0;
      overflow = true;
    }
  }
  //! Ends the scan: `count` becomes the total; an overflowed list keeps no entries.
  void finish() noexcept {
    count += stored;
    if (overflow) {
      stored = 0;
    }
  }
};

//! Magnitude key of v: the 31 low bits (|v| order for non-NaN; NaN above infinity).
[[nodiscard]] inline std::uint32_t scan_key(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
}

//! Portable kernel. Accumulate: x is the residual r, g the gradient; r[i] += g[i] first.
template <bool Accumulate>
void scan_portable(float* x,
                   const float* g,
                   std::size_t b,
                   std::size_t e,
                   std::uint32_t key,
                   std::size_t limit,
                   hit_list& hits) {
  constexpr std::size_t block = 8;
  std::size_t i = b;
  for (; i + block <= e; i += block) {
    unsigned mask = 0;
    for (std::size_t j = 0; j < block; ++j) {
      float v = x[i + j];
      if constexpr (Accumulate) {
        v = v + g[i + j];
        x[i + j] = v;
      }
      mask |= (scan_key(v) >= key ? 1u : 0u) << j;
    }
    if (mask != 0) {
      hits.reserve_more(block);
      for (; mask != 0; mask &= mask - 1) {
        const std::size_t j = i + static_cast<std::size_t>(std::countr_zero(mask));
        hits.indices[hits.stored] = static_cast<std::uint32_t>(j);
        hits.values[hits.stored++] = x[j];
      }
      hits.apply_cap(limit);
    }
  }
  for (; i < e; ++i) {
    if constexpr (Accumulate) {
      x[i] = x[i] + g[i];
    }
    if (scan_key(x[i]) >= key) {
      hits.reserve_more(1);
      hits.indices[hits.stored] = static_cast<std::uint32_t>(i);
      hits.values[hits.stored++] = x[i];
      hits.apply_cap(limit);
    }
  }
}

#ifdef GRADCOMP_X86_DISPATCH

//! Lane order for compaction: entry m lists the set bits of m (lowest first), padded with 0.
inline constexpr auto compaction_table = [] {
  std::array<std::array<std::int32_t, 8>, 256> table{};
  for (unsigned m = 0; m < 256; ++m) {
    int out = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if ((m >> lane) & 1u) {
        table[m][static_cast<std::size_t>(out++)] = lane;
      }
    }
  }
  return table;
}();

//! AVX2 kernel: compare 8 keys at once, then write all 8 lanes permuted so that the hits come
//! first, and advance by their count: no data-dependent branch.
template <bool Accumulate>
__attribute__((target("avx2,popcnt"))) void scan_avx2(float* x,
                                                      const float* g,
                                                      std::size_t b,
                                                      std::size_t e,
                                                      std::uint32_t key,
                                                      std::size_t limit,
                                                      hit_list& hits) {
  constexpr std::size_t block = 8;
  // keys are below 2^31, so a signed compare against key - 1 is exact (key 0: everything)
  const __m256i below = _mm256_set1_epi32(static_cast<std::int32_t>(key) - 1);
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  // the list's state in locals, so that the stores below cannot make the compiler reload it
  std::uint32_t* indices = hits.indices.data();
  float* values = hits.values.data();
  std::size_t capacity = hits.indices.size();
  std::size_t stored = hits.stored;
  std::size_t i = b;
  for (; i + block <= e; i += block) {
    __m256 v = _mm256_loadu_ps(x + i);
    if constexpr (Accumulate) {
      v = _mm256_add_ps(v, _mm256_loadu_ps(g + i));
      _mm256_storeu_ps(x + i, v);
    }
    const __m256i keys = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
    const auto mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(keys, below))));
    if (stored + block > capacity) { // rare: grow the buffers
      hits.stored = stored;
      hits.reserve_more(block);
      indices = hits.indices.data();
      values = hits.values.data();
      capacity = hits.indices.size();
    }
    const __m256i lanes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(compaction_table[mask].data()));
    _mm256_storeu_ps(values + stored, _mm256_permutevar8x32_ps(v, lanes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(indices + stored),
                        _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<std::int32_t>(i))));
    stored += static_cast<std::size_t>(_mm_popcnt_u32(mask));
    if (stored > limit) { // over the cap: keep counting, stop storing
      hits.count += stored;
      stored = 0;
      hits.overflow = true;
    }
  }
  hits.stored = stored;
  scan_portable<Accumulate>(x, g, i, e, key, limit, hits);
}

[[nodiscard]] inline bool cpu_has_avx2() noexcept {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  return has;
}

#endif

//! Scans [b, e) of x (after x[i] += g[i] when Accumulate) and appends the hits with index and
//! value to `hits`, storing at most about `limit` (see hit_list). Indices must fit in 32 bits.
template <bool Accumulate>
void scan_hits(float* x,
               const float* g,
               std::size_t b,
               std::size_t e,
               std::uint32_t key,
               std::size_t limit,
               hit_list& hits) {
#ifdef GRADCOMP_X86_DISPATCH
  if (cpu_has_avx2()) {
    scan_avx2<Accumulate>(x, g, b, e, key, limit, hits);
    return;
  }
#endif
  scan_portable<Accumulate>(x, g, b, e, key, limit, hits);
}

} // namespace gradcomp::detail
