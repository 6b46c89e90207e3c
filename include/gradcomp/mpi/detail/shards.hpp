// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Contiguous shards of a gradient: where shard b of B begins (block_begin) and the
//! part of a sparse message that one shard holds (slice_message), shared by the synchronous and
//! the asynchronous parameter server.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gradcomp::mpi::detail {

//! First element of block `b` of `blocks` near-equal contiguous blocks of `n` elements:
//! floor(n b / blocks), computed without overflow. Block b ends where block b + 1 begins.
[[nodiscard]] inline std::size_t block_begin(std::size_t n, int b, int blocks) noexcept {
  const auto ub = static_cast<std::size_t>(b);
  const auto ublocks = static_cast<std::size_t>(blocks);
  return n / ublocks * ub + n % ublocks * ub / ublocks;
}

//! The quantization segments of m's carried values [first, last) (positions, not indices) into
//! `out`: none when m has none; else the segments clipped to the range, as one scale
//! (out.quantization_scale) when at most one is left (the first segment's scale for an empty
//! range). O(segments of m).
inline void slice_quantization_segments(const sparse_message& m,
                                        std::size_t first,
                                        std::size_t last,
                                        sparse_message& out) {
  out.quantization_segments.clear();
  if (m.quantization_segments.empty()) {
    return;
  }
  std::uint64_t begin = 0; // position of the segment's first value
  for (const quantization_segment& seg : m.quantization_segments) {
    const std::uint64_t end = begin + seg.values;
    const std::uint64_t lo = std::max<std::uint64_t>(begin, first);
    const std::uint64_t hi = std::min<std::uint64_t>(end, last);
    if (lo < hi) {
      out.quantization_segments.push_back(quantization_segment{hi - lo, seg.scale});
    }
    begin = end;
  }
  if (out.quantization_segments.size() <= 1) {
    out.quantization_scale = out.quantization_segments.empty()
                                 ? m.quantization_segments.front().scale
                                 : out.quantization_segments.front().scale;
    out.quantization_segments.clear();
  }
}

//! The elements [lo, hi) of `m` as a message of dense length hi - lo (indices rebased), of
//! the same layout and value type, into `out` (capacity reused). Preconditions: m is valid
//! (sparse_message::validate()), lo <= hi <= m.dense_length_elements. O(log nnz + values
//! copied); allocates only when `out`'s capacity is too small.
inline void
slice_message(const sparse_message& m, std::size_t lo, std::size_t hi, sparse_message& out) {
  out.clear(hi - lo);
  out.values_type = m.values_type;
  out.quantization_scale = m.quantization_scale;
  out.quantization_levels = m.quantization_levels;
  out.dense = m.dense;
  if (m.dense) {
    out.values.assign(m.values.begin() + static_cast<std::ptrdiff_t>(lo),
                      m.values.begin() + static_cast<std::ptrdiff_t>(hi));
    slice_quantization_segments(m, lo, hi, out);
    return;
  }
  const auto begin = std::partition_point(m.indices.begin(), m.indices.end(),
                                          [lo](std::uint32_t i) { return i < lo; });
  const auto end =
      std::partition_point(begin, m.indices.end(), [hi](std::uint32_t i) { return i < hi; });
  const auto offset = begin - m.indices.begin();
  out.values.assign(m.values.begin() + offset, m.values.begin() + (end - m.indices.begin()));
  slice_quantization_segments(m, static_cast<std::size_t>(offset),
                              static_cast<std::size_t>(end - m.indices.begin()), out);
  out.indices.resize(static_cast<std::size_t>(end - begin));
  std::transform(begin, end, out.indices.begin(),
                 [lo](std::uint32_t i) { return static_cast<std::uint32_t>(i - lo); });
}

} // namespace gradcomp::mpi::detail
