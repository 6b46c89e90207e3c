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
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

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

//! Layer l's threshold: the magnitude of its k_l-th largest key (0 for an empty layer), read
//! through the sorted positions.
struct segment_threshold_op {
  const float* values;
  const std::uint32_t* order;
  const std::uint64_t* offsets;
  const std::uint64_t* pair_offsets;
  GRADCOMP_HOST_DEVICE float operator()(std::size_t l) const noexcept {
    const std::uint64_t k = pair_offsets[l + 1] - pair_offsets[l];
    return k == 0 ? 0.0f
                  : gradcomp::detail::key_magnitude(
                        gradcomp::detail::magnitude_key(values[order[offsets[l] + k - 1]]));
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

//! What a batch keeps between calls besides Thrust's storage, in Backend's memory: sort keys and
//! positions (n each), the selected positions (k), and the layout (2 x (layers + 1)).
template <class Backend>
struct segment_workspace {
  buffer<std::uint64_t, Backend> keys;
  buffer<std::uint32_t, Backend> order;
  buffer<std::uint32_t, Backend> selected;
  buffer<std::uint64_t, Backend> layout;
};

//! The exact top-k_l of every layer of x[0, b.n) (b.n >= 1), ties to the lower index: writes
//! layer l's pairs, ascending by the layer's own index, at [pair_offsets[l], pair_offsets[l+1])
//! of indices/values, each layer's threshold into thresholds[l], and returns the selected buffer
//! positions (ascending, b.k of them, in ws.selected) for the finishing pass. No host round
//! trip; launches: one key pass, a stable sort of n (key, position) pairs, one gather, one
//! threshold pass, a sort of k positions, one pair pass. Bytes: 4n read + 12n written for the
//! keys, the sort's (about 12n per radix pass of a 64-bit key), O(k + layers) after it.
template <class Backend>
const std::uint32_t* segmented_top_k_select(const context<Backend>& ctx,
                                            segment_workspace<Backend>& ws,
                                            const float* x,
                                            const segment_layout& b,
                                            std::uint32_t* indices,
                                            float* values,
                                            float* thresholds) {
  std::uint64_t* keys = ws.keys.reserve(b.n);
  std::uint32_t* order = ws.order.reserve(b.n);
  std::uint32_t* selected = ws.selected.reserve(b.k);
  const thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(ctx.policy(), first, first + b.n,
                   segment_key_op{x, b.offsets, b.layers, keys, order});
  ctx.backend.sort_positions_by_key(ctx.ws.thrust_storage, keys, order, b.n);
  thrust::transform(ctx.policy(), first, first + b.k, selected,
                    segment_head_op{order, b.offsets, b.pair_offsets, b.layers});
  thrust::transform(ctx.policy(), first, first + b.layers, thresholds,
                    segment_threshold_op{x, order, b.offsets, b.pair_offsets});
  ctx.backend.sort_ascending(ctx.ws.thrust_storage, selected, b.k);
  thrust::for_each(
      ctx.policy(), first, first + b.k,
      segment_pair_op{selected, x, b.offsets, b.pair_offsets, b.layers, indices, values});
  return selected;
}

} // namespace gradcomp::cuda::detail
