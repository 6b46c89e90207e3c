// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The selection kernels shared by every host compressor: exact top-k by radix select on
//! the magnitude bits, threshold filtering, counting, and the workspace they reuse.
//!
//! Magnitudes are compared as the 31 low bits of the float (sign dropped): for non-NaN values
//! this orders exactly as |v|, and NaN sorts above infinity (so a NaN is always selected and
//! shows up at the receiver rather than hiding in a residual).
#pragma once

#include <gradcomp/compressor/detail/scan_kernel.hpp>
#include <gradcomp/compressor/detail/source.hpp>
#include <gradcomp/detail/host_device.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace gradcomp::detail {

[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint32_t magnitude_key(float v) noexcept {
  return float_bits(v) & 0x7fffffffu;
}

[[nodiscard]] GRADCOMP_HOST_DEVICE inline float key_magnitude(std::uint32_t key) noexcept {
  return bits_float(key);
}

//! Smallest key whose magnitude is >= t (t >= 0, finite or infinite).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint32_t key_at_least(float t) noexcept {
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
  std::vector<hit_list> chunk_hits;
  std::vector<std::size_t> chunk_counts;
  std::vector<std::uint32_t> sample_keys;
};

//! The digit of a radix select that holds the element of 1-based `rank` (counted from the
//! largest key), and how many counted elements lie in higher digits: scans `h[buckets-1]` down.
//! @pre 1 <= rank <= sum of h. O(buckets). Shared by the host and the CUDA selections.
struct digit_choice {
  std::size_t digit = 0;
  std::size_t above = 0;
};

template <class Count>
[[nodiscard]] digit_choice choose_digit(const Count* h, std::size_t buckets, std::size_t rank) {
  digit_choice c{buckets - 1, 0};
  while (c.above + static_cast<std::size_t>(h[c.digit]) < rank) {
    c.above += static_cast<std::size_t>(h[c.digit]);
    --c.digit;
  }
  return c;
}

//! The refinement digits below the first (top 11 bits): (shift, bits) of key bits 19..9, 8..0.
inline constexpr std::array<std::pair<unsigned, unsigned>, 3> radix_digits = {
    {{20, 11}, {9, 11}, {0, 9}}};

//! Adds to h[d] (d < 2^bits) the count of values whose key has digit d at `shift` and whose
//! bits above shift + bits equal those of `prefix`. The histogram of one radix refinement
//! step; O(n), host memory.
template <class Count>
void digit_histogram(const float* values,
                     std::size_t n,
                     unsigned shift,
                     unsigned bits,
                     std::uint32_t prefix,
                     Count* h) noexcept {
  const unsigned high_shift = shift + bits;
  const std::uint32_t mask = (std::uint32_t{1} << bits) - 1u;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t key = magnitude_key(values[i]);
    if ((key >> high_shift) == (prefix >> high_shift)) {
      ++h[(key >> shift) & mask];
    }
  }
}

//! The k-th largest key when every value with a key above the `known_bits` high bits of
//! `prefix` is already excluded: refines the remaining low bits digit by digit (11, 11 and 9
//! bits). `histogram(shift, bits, prefix, h)` must fill h[0, 2^bits) (zeroed by the caller)
//! with digit_histogram's counts over the values. Returns the threshold key T and, in `ties`,
//! how many values with key == T must be taken (lowest index first). `rank` is 1-based among
//! the values matching the prefix. Shared by the host and the CUDA selections.
template <class Histogram>
std::uint32_t refine_kth_key_with(std::size_t rank,
                                  std::uint32_t prefix,
                                  unsigned known_bits,
                                  std::size_t& ties,
                                  Histogram&& histogram) {
  std::array<std::size_t, radix_top_buckets> h{};
  for (const auto& [shift, bits] : radix_digits) {
    if (shift + bits > 31 - known_bits) {
      continue; // digit already decided by the prefix
    }
    const std::size_t buckets = std::size_t{1} << bits;
    std::fill(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(buckets), 0);
    histogram(shift, bits, prefix, h.data());
    const digit_choice c = choose_digit(h.data(), buckets, rank);
    rank -= c.above;
    prefix |= static_cast<std::uint32_t>(c.digit) << shift;
  }
  ties = rank;
  return prefix;
}

//! refine_kth_key_with over host `values`. O(m) per digit.
inline std::uint32_t refine_kth_key(std::span<const float> values,
                                    std::size_t rank,
                                    std::uint32_t prefix,
                                    unsigned known_bits,
                                    std::size_t& ties) {
  return refine_kth_key_with(rank, prefix, known_bits, ties,
                             [&](unsigned shift, unsigned bits, std::uint32_t p, std::size_t* h) {
                               digit_histogram(values.data(), values.size(), shift, bits, p, h);
                             });
}

//! The cut at the k-th largest key: called on values in ascending index order, it takes every
//! key > T and the first `ties` keys == T (ties broken by lower index).
struct top_k_cut {
  std::uint32_t threshold_key;
  std::size_t ties;

  [[nodiscard]] GRADCOMP_HOST_DEVICE bool take(float v) noexcept {
    const std::uint32_t key = magnitude_key(v);
    if (key > threshold_key) {
      return true;
    }
    if (key == threshold_key && ties > 0) {
      --ties;
      return true;
    }
    return false;
  }
};

//! Keeps, in place and in order, the elements of `out` (ascending indices) that are among the k
//! largest: key > T, plus the first `ties` with key == T.
inline void keep_top(sparse_message& out, std::uint32_t threshold_key, std::size_t ties) {
  top_k_cut cut{threshold_key, ties};
  std::size_t o = 0;
  for (std::size_t j = 0; j < out.values.size(); ++j) {
    if (cut.take(out.values[j])) {
      out.indices[o] = out.indices[j];
      out.values[o++] = out.values[j];
    }
  }
  out.indices.resize(o);
  out.values.resize(o);
}

//! Selects every value with key >= threshold_key, ascending by index, into `out` as long as
//! there are at most `cap` of them; returns how many there are (also when more than cap, in
//! which case `out` is left empty). Materializes the source first when `first_pass`.
template <class Source>
std::size_t threshold_select(const Source& src,
                             bool first_pass,
                             std::size_t n,
                             std::uint32_t threshold_key,
                             std::size_t cap,
                             unsigned threads,
                             selection_workspace& ws,
                             sparse_message& out) {
  const std::size_t chunks = chunk_count(n);
  if (ws.chunk_hits.size() < chunks) {
    ws.chunk_hits.resize(chunks);
  }
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    hit_list& hits = ws.chunk_hits[c];
    hits.reset();
    if constexpr (Source::accumulates) {
      if (first_pass) { // the error-feedback accumulation, fused with the compare
        src.scan_first_pass(b, e, threshold_key, cap, hits);
        hits.finish();
        return;
      }
    }
    // a read-only source needs no materializing; an accumulating one was handled above
    scan_hits<false>(const_cast<float*>(src.materialized()), nullptr, b, e, threshold_key, cap,
                     hits);
    hits.finish();
  });
  std::size_t total = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    total += ws.chunk_hits[c].count;
  }
  out.dense = false;
  out.indices.clear();
  out.values.clear();
  if (total > cap) {
    return total;
  }
  out.indices.resize(total);
  out.values.resize(total);
  // chunk c's hits go after those of chunks 0..c-1: copy them in parallel, one chunk each
  ws.chunk_offsets.resize(chunks);
  std::size_t offset = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    ws.chunk_offsets[c] = offset;
    offset += ws.chunk_hits[c].stored;
  }
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t, std::size_t) {
    const hit_list& hits = ws.chunk_hits[c];
    const auto stored = static_cast<std::ptrdiff_t>(hits.stored);
    const auto at = static_cast<std::ptrdiff_t>(ws.chunk_offsets[c]);
    std::copy(hits.indices.begin(), hits.indices.begin() + stored, out.indices.begin() + at);
    std::copy(hits.values.begin(), hits.values.begin() + stored, out.values.begin() + at);
  });
  return total;
}

//! Radix select: a parallel histogram of the top 11 key bits, one pass that emits the elements
//! above the k-th bucket and gathers that bucket's candidates, refinement of the bucket, merge.
template <class Source>
std::uint32_t radix_top_k_select(const Source& src,
                                 bool first_pass,
                                 std::size_t n,
                                 std::size_t k,
                                 unsigned threads,
                                 selection_workspace& ws,
                                 sparse_message& out) {
  const std::size_t chunks = chunk_count(n);
  ws.histograms.assign(chunks * radix_top_buckets, 0u);
  const float* const x = src.materialized();
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    // four 16-bit sub-histograms (a chunk has at most 2^16 elements, so each sub-histogram
    // counts at most 2^14): consecutive equal keys do not wait on each other's increments
    std::array<std::array<std::uint16_t, radix_top_buckets>, 4> sub{};
    for_each_tile(src, first_pass, b, e, [&](std::size_t tb, std::size_t te) {
      std::size_t i = tb;
      for (; i + 4 <= te; i += 4) {
        ++sub[0][magnitude_key(x[i]) >> radix_top_shift];
        ++sub[1][magnitude_key(x[i + 1]) >> radix_top_shift];
        ++sub[2][magnitude_key(x[i + 2]) >> radix_top_shift];
        ++sub[3][magnitude_key(x[i + 3]) >> radix_top_shift];
      }
      for (; i < te; ++i) {
        ++sub[(i - tb) % 4][magnitude_key(x[i]) >> radix_top_shift];
      }
    });
    std::uint32_t* h = ws.histograms.data() + c * radix_top_buckets;
    for (std::size_t d = 0; d < radix_top_buckets; ++d) {
      h[d] = std::uint32_t{sub[0][d]} + sub[1][d] + sub[2][d] + sub[3][d];
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
  const digit_choice choice = choose_digit(total.data(), radix_top_buckets, k);
  const std::size_t bucket = choice.digit;
  const std::size_t above = choice.above;
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
  std::size_t ties = 0;
  const std::uint32_t threshold_key = refine_kth_key(
      ws.candidate_values, k - above, bucket32 << radix_top_shift, radix_top_bits, ties);
  // merge the elements above the bucket with the chosen candidates, ascending by index
  out.dense = false;
  out.indices.resize(k);
  out.values.resize(k);
  top_k_cut cut{threshold_key, ties};
  std::size_t o = 0;
  std::size_t ia = 0;
  for (std::size_t j = 0; j < candidates; ++j) {
    if (!cut.take(ws.candidate_values[j])) {
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

//! Elements sampled by the sample-guided selection (a deterministic stride).
inline constexpr std::size_t top_k_sample_elements = 8192;

//! The sample-guided fast path of exact top-k (used when n >= 8 x 8192 and k <= n/8): sample
//! element j is at j x stride + stride/2; the sample's `rank`-th largest key is the lower key
//! of the candidates; more than `cap` candidates (or fewer than k) send the selection to the
//! radix path. Shared by the host and the CUDA selections so that both pick the same key.
struct sample_guided_plan {
  bool applies = false;
  std::size_t samples = 0, stride = 0, rank = 0, cap = 0;
  [[nodiscard]] std::size_t sample_index(std::size_t j) const noexcept {
    return j * stride + stride / 2;
  }
};

//! The plan for k of n. O(1).
[[nodiscard]] inline sample_guided_plan plan_sample_guided(std::size_t n, std::size_t k) {
  sample_guided_plan p;
  if (n < 8 * top_k_sample_elements || 8 * k > n) {
    return p;
  }
  p.applies = true;
  p.samples = top_k_sample_elements;
  p.stride = n / p.samples;
  // expected sample hits above the k-th largest: k m / n; aim 5 sigma (binomial) above it
  // so that fewer than k candidates (a wasted pass) has probability below 1e-6
  const double expected =
      static_cast<double>(k) * static_cast<double>(p.samples) / static_cast<double>(n);
  p.rank = std::min<std::size_t>(
      p.samples, static_cast<std::size_t>(expected + 5.0 * std::sqrt(expected) + 8.0));
  // the sample's rank-th key admits about rank x stride values (more than 3k at low density)
  const double upper_hits =
      static_cast<double>(p.rank) + 5.0 * std::sqrt(static_cast<double>(p.rank)) + 8.0;
  p.cap = std::max<std::size_t>(
      3 * k + 64, static_cast<std::size_t>(upper_hits * static_cast<double>(p.stride)));
  return p;
}

//! Exact top-k by magnitude of the n values `src` yields, ties broken by lower index; writes
//! the k pairs to `out` (sparse, ascending indices) and returns the k-th largest key.
//! 1 <= k <= n. Materializes the source (exactly once per element) when `first_pass`.
//!
//! Fast path (large n, k <= n/8): a strided sample of 8192 values gives a key t that about 2k
//! values (plus a safety margin) exceed; one filtering pass gathers those candidates; if they
//! number at least k (and at most a cap), the exact top k are picked among them by radix
//! refinement. Exactness does not depend on the sample, only speed: if the sample misled, the
//! radix select over the whole input runs instead. Work O(n); one read of the input on the fast
//! path (fused with error feedback), two on the radix path.
template <class Source>
std::uint32_t exact_top_k_select(const Source& src,
                                 bool first_pass,
                                 std::size_t n,
                                 std::size_t k,
                                 unsigned threads,
                                 selection_workspace& ws,
                                 sparse_message& out) {
  if (const sample_guided_plan plan = plan_sample_guided(n, k); plan.applies) {
    auto& keys = ws.sample_keys;
    keys.resize(plan.samples);
    for (std::size_t j = 0; j < plan.samples; ++j) {
      const std::size_t i = plan.sample_index(j);
      keys[j] = magnitude_key(first_pass ? src.peek(i) : src.materialized()[i]);
    }
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(plan.rank - 1),
                     keys.end(), std::greater<>());
    const std::uint32_t lower_key = keys[plan.rank - 1];
    const std::size_t cap = plan.cap;
    const std::size_t count =
        threshold_select(src, first_pass, n, lower_key, cap, threads, ws, out);
    first_pass = false;
    if (count >= k && count <= cap) {
      std::size_t ties = 0;
      const std::uint32_t threshold_key = refine_kth_key(out.values, k, 0, 0, ties);
      keep_top(out, threshold_key, ties);
      return threshold_key;
    }
  }
  return radix_top_k_select(src, first_pass, n, k, threads, ws, out);
}

//! Number of values in x[0, n) with key >= threshold_key. One read-only pass.
inline std::size_t count_at_least(const float* x,
                                  std::size_t n,
                                  std::uint32_t threshold_key,
                                  unsigned threads,
                                  selection_workspace& ws) {
  const std::size_t chunks = chunk_count(n);
  ws.chunk_counts.assign(chunks, 0);
  parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
    const auto t = static_cast<std::int32_t>(threshold_key);
    std::uint32_t count = 0;
    for (std::size_t i = b; i < e; ++i) {
      count += static_cast<std::int32_t>(magnitude_key(x[i])) >= t ? 1u : 0u;
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
