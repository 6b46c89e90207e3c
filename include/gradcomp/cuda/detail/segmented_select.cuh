// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The segmented exact top-k behind gradcomp::cuda::basic_batched_exact_top_k: the
//! layers of one flat buffer ranked by a single sort on (layer, magnitude descending, position),
//! the first k_l of each layer's segment kept, their indices restored to ascending order. Written
//! once over a backend (backend.cuh) with Thrust algorithms and the host-and-device function
//! objects below; every key and cut is the host exact top-k's (magnitude_key, ties to the lower
//! index), so each layer's selection equals gradcomp::exact_top_k's on that layer.
#pragma once

#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/buffer.cuh>
#include <gradcomp/cuda/detail/functors.cuh>
#include <gradcomp/cuda/detail/select.cuh>
#include <gradcomp/cuda/detail/thrust_config.cuh>
#include <gradcomp/detail/host_device.hpp>

#include <cstddef>
#include <cstdint>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_scan.h>

namespace gradcomp::cuda::detail {

//! The segment holding position p, for `segments` >= 1 segments [bounds[l], bounds[l+1]) with
//! bounds[0] == 0 <= p < bounds[segments] and bounds non-decreasing: the largest l <
//! `segments` with bounds[l] <= p, which is never an empty segment. O(log segments).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::size_t
segment_of(const std::uint64_t* bounds, std::size_t segments, std::uint64_t p) noexcept {
  std::size_t lo = 0;
  std::size_t hi = segments;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (bounds[mid] <= p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

//! Sort key of a value of layer `layer`: the layer in the high 32 bits, the magnitude key
//! reversed in the low 31, so that ascending keys run layer by layer and, within a layer, from
//! the largest magnitude down (NaN above infinity, as magnitude_key orders them).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint64_t segment_rank_key(std::size_t layer,
                                                                         float v) noexcept {
  return (static_cast<std::uint64_t>(layer) << 32) |
         (0x7fffffffu - gradcomp::detail::magnitude_key(v));
}

//! Where a batch's layout lives in Backend memory: `layers` + 1 element offsets of the layers
//! and `layers` + 1 offsets of their pairs in the message (pair_offsets[l + 1] - pair_offsets[l]
//! = k_l), for n elements and k pairs in all.
struct segment_layout {
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  std::size_t layers;
  std::size_t n;
  std::size_t k;
};

//! Element i: its sort key (segment_rank_key of its layer and value) and its position (the
//! identity the backend's sort_positions_by_key starts from).
struct segment_key_op {
  const float* values;
  const std::uint64_t* offsets;
  std::size_t layers;
  std::uint64_t* keys;
  std::uint32_t* order;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t i) const noexcept {
    keys[i] = segment_rank_key(segment_of(offsets, layers, i), values[i]);
    order[i] = static_cast<std::uint32_t>(i);
  }
};

//! Message position j of layer l: the element ranked j - pair_offsets[l] in l's sorted segment
//! (which starts at offsets[l], since the sort keeps layers in place).
struct segment_head_op {
  const std::uint32_t* order;
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  std::size_t layers;
  GRADCOMP_HOST_DEVICE std::uint32_t operator()(std::size_t j) const noexcept {
    const std::size_t l = segment_of(pair_offsets, layers, j);
    return order[offsets[l] + (j - pair_offsets[l])];
  }
};

//! The k_l-th largest magnitude key of layer l (k_l = pair_offsets[l + 1] - pair_offsets[l] >=
//! 1), read through the sorted positions `order` (layer l's segment starts at offsets[l]).
[[nodiscard]] GRADCOMP_HOST_DEVICE inline std::uint32_t
segment_kth_key(const float* values,
                const std::uint32_t* order,
                const std::uint64_t* offsets,
                const std::uint64_t* pair_offsets,
                std::size_t l) noexcept {
  const std::uint64_t k = pair_offsets[l + 1] - pair_offsets[l];
  return gradcomp::detail::magnitude_key(values[order[offsets[l] + k - 1]]);
}

//! Layer l's threshold: the magnitude of its k_l-th largest key (0 for an empty layer), read
//! through the sorted positions.
struct segment_threshold_op {
  const float* values;
  const std::uint32_t* order;
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  GRADCOMP_HOST_DEVICE float operator()(std::size_t l) const noexcept {
    return pair_offsets[l + 1] == pair_offsets[l] ? 0.0f
                                                  : gradcomp::detail::key_magnitude(segment_kth_key(
                                                        values, order, offsets, pair_offsets, l));
  }
};

//! Message position j, once the selected buffer positions ascend: the layer's own index and the
//! value.
struct segment_pair_op {
  const std::uint32_t* selected;
  const float* values;
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  std::size_t layers;
  std::uint32_t* out_indices;
  float* out_values;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t j) const noexcept {
    const std::uint32_t i = selected[j];
    out_indices[j] = static_cast<std::uint32_t>(i - offsets[segment_of(pair_offsets, layers, j)]);
    out_values[j] = values[i];
  }
};

//! What a batched call does with layer l, one 64-bit word per layer next to the layout: nothing
//! (an empty layer), an exact top-k_l, or a selection at the layer's remembered threshold key.
enum class segment_mode : std::uint64_t { none = 0, exact = 1, threshold = 2 };

//! 1 when element i (< n) lies in a layer of segment_mode::threshold and its magnitude key is at
//! least that layer's remembered key (taken as the host reuse call takes it: key_at_least of
//! its magnitude); 0 otherwise, and for i == n (the closing rank of an exclusive scan).
struct segment_over_threshold_op {
  const float* values;
  const std::uint64_t* offsets;
  const std::uint64_t* modes;
  const std::uint32_t* keys;
  std::size_t layers;
  std::size_t n;
  GRADCOMP_HOST_DEVICE std::uint32_t operator()(std::size_t i) const noexcept {
    if (i >= n) {
      return 0u;
    }
    const std::size_t l = segment_of(offsets, layers, i);
    return modes[l] == static_cast<std::uint64_t>(segment_mode::threshold) &&
                   gradcomp::detail::magnitude_key(values[i]) >=
                       gradcomp::detail::key_at_least(gradcomp::detail::key_magnitude(keys[l]))
               ? 1u
               : 0u;
  }
};

//! Layer l's count of elements over its threshold, from ranks (the exclusive scan of
//! segment_over_threshold_op over [0, n]): ranks[offsets[l + 1]] - ranks[offsets[l]].
struct segment_count_op {
  const std::uint32_t* ranks;
  const std::uint64_t* offsets;
  GRADCOMP_HOST_DEVICE std::uint32_t operator()(std::size_t l) const noexcept {
    return ranks[offsets[l + 1]] - ranks[offsets[l]];
  }
};

//! Element i over its layer's threshold (ranks[i + 1] != ranks[i]) goes to position ranks[i]
//! of `selected`: a stable compaction, ascending by position.
struct segment_compact_op {
  const std::uint32_t* ranks;
  std::uint32_t* selected;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t i) const noexcept {
    if (ranks[i + 1] != ranks[i]) {
      selected[ranks[i]] = static_cast<std::uint32_t>(i);
    }
  }
};

//! Layer l after a batched threshold-reuse call: an exact layer remembers its k_l-th largest
//! key (read through the sorted positions `order`), a threshold layer the key it applied (as
//! the host: key_at_least of the remembered key's magnitude); thresholds[l] = that key's
//! magnitude, 0 for an empty layer (whose key is kept).
struct segment_remember_op {
  const float* values;
  const std::uint32_t* order; // null when no layer is exact
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  const std::uint64_t* modes;
  std::uint32_t* keys;
  float* thresholds;
  GRADCOMP_HOST_DEVICE void operator()(std::size_t l) const noexcept {
    if (modes[l] == static_cast<std::uint64_t>(segment_mode::exact)) {
      keys[l] = segment_kth_key(values, order, offsets, pair_offsets, l);
    } else if (modes[l] == static_cast<std::uint64_t>(segment_mode::threshold)) {
      keys[l] = gradcomp::detail::key_at_least(gradcomp::detail::key_magnitude(keys[l]));
    } else {
      thresholds[l] = 0.0f;
      return;
    }
    thresholds[l] = gradcomp::detail::key_magnitude(keys[l]);
  }
};

//! What a batch keeps between calls besides Thrust's storage, in Backend's memory: sort keys and
//! positions (n each), the selected positions (k), and the layout (2 x (layers + 1)).
template <class Backend>
struct segment_workspace {
  buffer<std::uint64_t, Backend> keys;
  buffer<std::uint32_t, Backend> order;
  buffer<std::uint32_t, Backend> selected;
  buffer<std::uint64_t, Backend> layout;
};

//! Ranks every layer of x[0, b.n) (b.n >= 1; b.offsets and b.layers used): returns the
//! positions sorted by (layer, magnitude descending, position), in ws.order, so that layer l's
//! elements stay at [offsets[l], offsets[l+1]), largest first, ties in index order. No host
//! round trip; launches: one key pass and the backend's stable sort of n (key, position) pairs.
//! Bytes: 4n read + 12n written for the keys, then the sort's (about 12n per radix pass).
template <class Backend>
const std::uint32_t* segment_rank(const context<Backend>& ctx,
                                  segment_workspace<Backend>& ws,
                                  const float* x,
                                  const segment_layout& b) {
  std::uint64_t* keys = ws.keys.reserve(b.n);
  std::uint32_t* order = ws.order.reserve(b.n);
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(ctx.policy(), first, first + b.n,
                   segment_key_op{x, b.offsets, b.layers, keys, order});
  ctx.backend.sort_positions_by_key(ctx.ws.thrust_storage, keys, order, b.n);
  return order;
}

//! The pair pass: message position j < b.k gets the buffer position selected[j] (ascending) as
//! its layer's own index, and its value. One launch; O(b.k) work, a binary search of the pair
//! offsets each.
template <class Backend>
void segment_write_pairs(const context<Backend>& ctx,
                         const std::uint32_t* selected,
                         const float* x,
                         const segment_layout& b,
                         std::uint32_t* indices,
                         float* values) {
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(
      ctx.policy(), first, first + b.k,
      segment_pair_op{selected, x, b.offsets, b.pair_offsets, b.layers, indices, values});
}

//! Keeps the first k_l = pair_offsets[l + 1] - pair_offsets[l] ranked positions of every layer
//! (`order` from segment_rank), restores ascending order with one sort of the b.k kept
//! positions, and writes the pairs (segment_write_pairs). Returns the kept buffer positions
//! (ascending, in ws.selected). No host round trip; launches: one gather, a sort of b.k
//! positions, one pair pass. Bytes: O(b.k) plus the sort's.
template <class Backend>
const std::uint32_t* segment_take_heads(const context<Backend>& ctx,
                                        segment_workspace<Backend>& ws,
                                        const float* x,
                                        const std::uint32_t* order,
                                        const segment_layout& b,
                                        std::uint32_t* indices,
                                        float* values) {
  std::uint32_t* selected = ws.selected.reserve(b.k);
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::transform(ctx.policy(), first, first + b.k, selected,
                    segment_head_op{order, b.offsets, b.pair_offsets, b.layers});
  ctx.backend.sort_ascending(ctx.ws.thrust_storage, selected, b.k);
  segment_write_pairs(ctx, selected, x, b, indices, values);
  return selected;
}

//! The exact top-k_l of every layer of x[0, b.n) (b.n >= 1), ties to the lower index: writes
//! layer l's pairs, ascending by the layer's own index, at [pair_offsets[l], pair_offsets[l+1])
//! of indices/values, each layer's threshold into thresholds[l], and returns the selected buffer
//! positions (ascending, b.k of them, in ws.selected) for the finishing pass. No host round
//! trip; launches: segment_rank's (a key pass, a stable sort of n (key, position) pairs), one
//! threshold pass, segment_take_heads' (a gather, a sort of k positions, a pair pass). Bytes:
//! 4n read + 12n written for the keys, the sort's (about 12n per radix pass of a 64-bit key),
//! O(k + layers) after it.
template <class Backend>
const std::uint32_t* segmented_top_k_select(const context<Backend>& ctx,
                                            segment_workspace<Backend>& ws,
                                            const float* x,
                                            const segment_layout& b,
                                            std::uint32_t* indices,
                                            float* values,
                                            float* thresholds) {
  const std::uint32_t* order = segment_rank(ctx, ws, x, b);
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::transform(ctx.policy(), first, first + b.layers, thresholds,
                    segment_threshold_op{x, order, b.offsets, b.pair_offsets});
  return segment_take_heads(ctx, ws, x, order, b, indices, values);
}

//! Counts, for every layer of segment_mode::threshold, its elements of x[0, b.n) whose keys are
//! at least its remembered key (keys[l]): writes ranks[0, b.n] (the exclusive scan of
//! segment_over_threshold_op, b.n + 1 entries) and counts[0, b.layers) (0 for the other
//! layers). Uses b.offsets and b.layers. No host round trip; launches: one scan of b.n + 1
//! flags, one pass over the layers. Bytes: 4n read (and a binary search of the offsets per
//! element), the scan's (about 8n on a GPU), 8 per layer.
template <class Backend>
void segment_count_over_threshold(const context<Backend>& ctx,
                                  const float* x,
                                  const segment_layout& b,
                                  const std::uint64_t* modes,
                                  const std::uint32_t* keys,
                                  std::uint32_t* ranks,
                                  std::uint32_t* counts) {
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::transform_exclusive_scan(
      ctx.policy(), first, first + b.n + 1, ranks,
      segment_over_threshold_op{x, b.offsets, modes, keys, b.layers, b.n}, std::uint32_t{0},
      thrust::plus<std::uint32_t>());
  thrust::transform(ctx.policy(), first, first + b.layers, counts,
                    segment_count_op{ranks, b.offsets});
}

//! When every selected pair comes from a threshold layer (b.pair_offsets[l] = ranks[offsets[l]]
//! for ranks from segment_count_over_threshold): compacts the positions over threshold into
//! selected[0, b.k), ascending, and writes the pairs (segment_write_pairs). No host round trip;
//! launches: one compaction pass over b.n, one pair pass. Bytes: 8n read, 4k + 8k written.
template <class Backend>
void segment_compact_pairs(const context<Backend>& ctx,
                           const std::uint32_t* ranks,
                           const float* x,
                           const segment_layout& b,
                           std::uint32_t* selected,
                           std::uint32_t* indices,
                           float* values) {
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(ctx.policy(), first, first + b.n, segment_compact_op{ranks, selected});
  segment_write_pairs(ctx, selected, x, b, indices, values);
}

} // namespace gradcomp::cuda::detail
