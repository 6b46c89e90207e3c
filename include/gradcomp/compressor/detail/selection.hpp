// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The selection kernels shared by every host compressor: exact top-k by radix select on
//! the magnitude bits, threshold filtering, counting, and the workspace they reuse.
//!
//! Magnitudes are compared as the 31 low bits of the float (sign dropped): for non-NaN values
//! this orders exactly as |v|, and NaN sorts above infinity (so a NaN is always selected and
//! shows up at the receiver rather than hiding in a residual).
#pragma once

#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gradcomp::detail {

[[nodiscard]] inline std::uint32_t magnitude_key(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
}

[[nodiscard]] inline float key_magnitude(std::uint32_t key) noexcept {
  return std::bit_cast<float>(key);
}

//! Smallest key whose magnitude is >= t (t >= 0, finite or infinite).
[[nodiscard]] inline std::uint32_t key_at_least(float t) noexcept {
  return t <= 0.0f ? 0u : magnitude_key(t);
}

inline constexpr unsigned radix_top_bits = 11; // first digit: key bits 30..20
inline constexpr unsigned radix_top_shift = 20;
inline constexpr std::size_t radix_top_buckets = std::size_t{1} << radix_top_bits;

//! Scratch storage reused across calls so that steady-state compression allocates nothing.
struct selection_workspace {
  std::vector<std::uint32_t> histograms; // chunks x radix_top_buckets
  std::vector<std::size_t> chunk_offsets;
  std::vector<std::uint32_t> above_indices, candidate_indices;
  std::vector<float> above_values, candidate_values;
  std::vector<std::vector<std::uint32_t>> chunk_indices;
  std::vector<std::vector<float>> chunk_values;
  std::vector<std::size_t> chunk_counts;
  std::vector<std::uint32_t> sample_keys;
};

//! Exact top-k by magnitude of the n values `src` yields (first pass: src.load), ties broken by
//! lower index; writes the k pairs to `out` (sparse, ascending indices). Returns the k-th
//! largest key. Two passes over the input (a histogram of the 11 top key bits, then a pass that
//! emits the elements above the k-th bucket and gathers that bucket's candidates), then two
//! small histogram passes over the candidates. 1 <= k <= n.
template <class Source>
std::uint32_t exact_top_k_select(const Source& src, bool first_pass, std::size_t n,
                                 std::size_t k, unsigned threads, selection_workspace& ws,
                                 sparse_message& out) {
  const std::size_t chunks = chunk_count(n);
  ws.histograms.assign(chunks * radix_top_buckets, 0u);
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::uint32_t* h = ws.histograms.data() + c * radix_top_buckets;
    std::array<std::uint32_t, radix_top_buckets> h2{};
    std::size_t i = b;
    for (; i + 1 < e; i += 2) {
      const float v0 = first_pass ? src.load(i) : src.materialized()[i];
      const float v1 = first_pass ? src.load(i + 1) : src.materialized()[i + 1];
      ++h[magnitude_key(v0) >> radix_top_shift];
      ++h2[magnitude_key(v1) >> radix_top_shift];
    }
    if (i < e) {
      ++h[magnitude_key(first_pass ? src.load(i) : src.materialized()[i]) >> radix_top_shift];
    }
    for (std::size_t d = 0; d < radix_top_buckets; ++d) {
      h[d] += h2[d];
    }
  });
  std::array<std::size_t, radix_top_buckets> total{};
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint32_t* h = ws.histograms.data() + c * radix_top_buckets;
    for (std::size_t d = 0; d < radix_top_buckets; ++d) {
      total[d] += h[d];
    }
  }
  // bucket holding the k-th largest key
  std::size_t bucket = radix_top_buckets - 1;
  std::size_t above = 0;
  while (above + total[bucket] < k) {
    above += total[bucket];
    --bucket;
  }
  const std::size_t candidates = total[bucket];
  // per-chunk write offsets for the two outputs (order of chunks = order of indices)
  ws.chunk_offsets.resize(2 * chunks);
  std::size_t above_offset = 0;
  std::size_t candidate_offset = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint32_t* h = ws.histograms.data() + c * radix_top_buckets;
    ws.chunk_offsets[2 * c] = above_offset;
    ws.chunk_offsets[2 * c + 1] = candidate_offset;
    for (std::size_t d = bucket + 1; d < radix_top_buckets; ++d) {
      above_offset += h[d];
    }
    candidate_offset += h[bucket];
  }
  ws.above_indices.resize(above);
  ws.above_values.resize(above);
  ws.candidate_indices.resize(candidates);
  ws.candidate_values.resize(candidates);
  const float* x = src.materialized();
  const auto bucket32 = static_cast<std::uint32_t>(bucket);
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::size_t a = ws.chunk_offsets[2 * c];
    std::size_t m = ws.chunk_offsets[2 * c + 1];
    for (std::size_t i = b; i < e; ++i) {
      const float v = x[i];
      const std::uint32_t digit = magnitude_key(v) >> radix_top_shift;
      if (digit >= bucket32) {
        if (digit > bucket32) {
          ws.above_indices[a] = static_cast<std::uint32_t>(i);
          ws.above_values[a++] = v;
        } else {
          ws.candidate_indices[m] = static_cast<std::uint32_t>(i);
          ws.candidate_values[m++] = v;
        }
      }
    }
  });
  // refine inside the bucket: digits of 11 then 9 bits
  std::uint32_t prefix = bucket32 << radix_top_shift;
  std::size_t remaining = k - above; // candidates still to take, 1..candidates
  constexpr std::array<std::pair<unsigned, unsigned>, 2> digits = {{{9, 11}, {0, 9}}};
  std::array<std::size_t, radix_top_buckets> h{};
  for (const auto& [shift, bits] : digits) {
    const std::uint32_t high_shift = shift + bits;
    const std::size_t buckets = std::size_t{1} << bits;
    std::fill(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(buckets), 0);
    for (float v : ws.candidate_values) {
      const std::uint32_t key = magnitude_key(v);
      if ((key >> high_shift) == (prefix >> high_shift)) {
        ++h[(key >> shift) & (buckets - 1)];
      }
    }
    std::size_t d = buckets - 1;
    std::size_t above_here = 0;
    while (above_here + h[d] < remaining) {
      above_here += h[d];
      --d;
    }
    remaining -= above_here;
    prefix |= static_cast<std::uint32_t>(d) << shift;
  }
  const std::uint32_t threshold_key = prefix;
  std::size_t ties_left = remaining; // elements equal to the threshold still to take
  // merge the elements above the bucket with the chosen candidates, ascending by index
  out.dense = false;
  out.indices.resize(k);
  out.values.resize(k);
  std::size_t o = 0;
  std::size_t ia = 0;
  for (std::size_t j = 0; j < candidates; ++j) {
    const std::uint32_t key = magnitude_key(ws.candidate_values[j]);
    bool take = key > threshold_key;
    if (!take && key == threshold_key && ties_left > 0) {
      take = true;
      --ties_left;
    }
    if (!take) {
      continue;
    }
    const std::uint32_t idx = ws.candidate_indices[j];
    while (ia < above && ws.above_indices[ia] < idx) {
      out.indices[o] = ws.above_indices[ia];
      out.values[o++] = ws.above_values[ia++];
    }
    out.indices[o] = idx;
    out.values[o++] = ws.candidate_values[j];
  }
  while (ia < above) {
    out.indices[o] = ws.above_indices[ia];
    out.values[o++] = ws.above_values[ia++];
  }
  return threshold_key;
}

//! Selects every value with key >= threshold_key, ascending by index, into `out` as long as
//! there are at most `cap` of them; returns how many there are (also when more than cap, in
//! which case `out` is left empty). Reads via src.load when `first_pass`, else materialized().
template <class Source>
std::size_t threshold_select(const Source& src, bool first_pass, std::size_t n,
                             std::uint32_t threshold_key, std::size_t cap, unsigned threads,
                             selection_workspace& ws, sparse_message& out) {
  const std::size_t chunks = chunk_count(n);
  if (ws.chunk_indices.size() < chunks) {
    ws.chunk_indices.resize(chunks);
    ws.chunk_values.resize(chunks);
  }
  ws.chunk_counts.assign(chunks, 0);
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    auto& idx = ws.chunk_indices[c];
    auto& val = ws.chunk_values[c];
    idx.clear();
    val.clear();
    std::size_t count = 0;
    for (std::size_t i = b; i < e; ++i) {
      const float v = first_pass ? src.load(i) : src.materialized()[i];
      if (magnitude_key(v) >= threshold_key) {
        if (++count <= cap) {
          idx.push_back(static_cast<std::uint32_t>(i));
          val.push_back(v);
        }
      }
    }
    ws.chunk_counts[c] = count;
  });
  std::size_t total = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    total += ws.chunk_counts[c];
  }
  out.dense = false;
  out.indices.clear();
  out.values.clear();
  if (total > cap) {
    return total;
  }
  out.indices.reserve(total);
  out.values.reserve(total);
  for (std::size_t c = 0; c < chunks; ++c) {
    out.indices.insert(out.indices.end(), ws.chunk_indices[c].begin(), ws.chunk_indices[c].end());
    out.values.insert(out.values.end(), ws.chunk_values[c].begin(), ws.chunk_values[c].end());
  }
  return total;
}

//! Number of values in x[0, n) with key >= threshold_key. One read-only pass.
inline std::size_t count_at_least(const float* x, std::size_t n, std::uint32_t threshold_key,
                                  unsigned threads, selection_workspace& ws) {
  const std::size_t chunks = chunk_count(n);
  ws.chunk_counts.assign(chunks, 0);
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::size_t count = 0;
    for (std::size_t i = b; i < e; ++i) {
      count += magnitude_key(x[i]) >= threshold_key ? 1 : 0;
    }
    ws.chunk_counts[c] = count;
  });
  std::size_t total = 0;
  for (std::size_t c : ws.chunk_counts) {
    total += c;
  }
  return total;
}

} // namespace gradcomp::detail
