// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::batched_exact_top_k: exact top-k with error feedback on many small
//! layers of one flat buffer (a PyTorch DDP bucket) per call, with a number of launches and host
//! round trips that does not grow with the number of layers.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/compressor_base.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/batched_message.cuh>
#include <gradcomp/cuda/detail/batched_compressor_base.cuh>
#include <gradcomp/cuda/detail/segmented_select.cuh>
#include <gradcomp/cuda/detail/select.cuh>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcomp::cuda {

//! @brief Exact top-k by magnitude of every layer of a flat buffer (S1 Algorithm 1 per layer,
//! k_l = ceil(density x n_l) clamped to [1, n_l]; 0 for an empty layer), with error feedback
//! (and DGC momentum correction) over all layers in one pass. Layer l's message, residual,
//! velocity and stats equal those of gradcomp::exact_top_k (and of the single-layer
//! gradcomp::cuda::exact_top_k) called on that layer alone, bit for bit: k_l pairs, ascending
//! layer-local indices, ties at the k-th magnitude to the lower index, NaN above infinity, sent
//! values rounded to `values` with the rounding error left in the residual.
//!
//! Layout: L layers are given by L + 1 element offsets (offsets[0] == 0, non-decreasing, the
//! last at most the buffer's length n_elements), layer l = [offsets[l], offsets[l+1]) of the
//! buffer, as a DDP bucket holds its parameters' gradients. Elements past offsets[L] belong to
//! no layer: they are neither accumulated nor selected. Empty layers are allowed (an empty
//! message of dense length 0). Each layer has at most max_batched_layer_elements elements; the
//! buffer at most 2^32 (32-bit positions).
//!
//! Algorithm: one pass writes, for each element, a 64-bit key (layer, magnitude descending) and
//! its position; one stable sort by key leaves each layer's elements in place, largest first,
//! ties in index order; layer l's first k_l sorted positions are its top-k; one sort of the K =
//! sum k_l selected positions restores index order; one pass writes the pairs and one (shared
//! with the single-layer compressors) rounds them and updates residual and velocity. The sorts
//! are the backend's (Thrust's radix sorts on the device, std::sort in the same order on the
//! host); Thrust has no segmented top-k.
//!
//! Per call, whatever L: no host round trip (every k_l is known on the host); about 20 kernel
//! launches on a GPU (the two radix sorts are most of them; Thrust/CUB choose the count); when
//! the offsets differ from the previous call's, one upload of 16 (L + 1) bytes first. The
//! message's copy_to() is one transfer and one round trip. Single-layer calls take, per layer,
//! 5-8 round trips and 10-20 launches, plus 2 round trips to copy the message.
//! Bytes moved (N = offsets[L], K pairs): error feedback 12N (20N with momentum), keys 16N, the
//! sort about 200N, then O(K + L). Work: a binary search of the offsets per element and pair
//! (O((N + K) log L)) and the radix sorts' O(N + K) (std::sort's O(N log N) on the host
//! backend). Thrust's sorts are told not to synchronise (par_nosync). Device memory: 12N bytes of
//! keys and positions, 4K of positions, Thrust's sort storage (about 12N), all grow-only:
//! steady-state calls allocate nothing (allocation_count()). Deterministic.
//!
//! Options: gradcomp::exact_top_k_options (`threads` unused). Not thread-safe per object;
//! distinct objects may run on distinct streams concurrently.
template <class Backend>
class basic_batched_exact_top_k
    : public detail::batched_compressor_base<basic_batched_exact_top_k<Backend>,
                                             exact_top_k_options,
                                             Backend> {
  using base = detail::
      batched_compressor_base<basic_batched_exact_top_k<Backend>, exact_top_k_options, Backend>;

public:
  using typename base::message_type;

  //! @throws std::invalid_argument if the density is outside (0, 1].
  explicit basic_batched_exact_top_k(exact_top_k_options o = {}) : base(o) {}
  //! Shorthand for `basic_batched_exact_top_k(exact_top_k_options{.density = density})` (the
  //! other options at their defaults). @throws std::invalid_argument if `density` is outside
  //! (0, 1].
  explicit basic_batched_exact_top_k(double density)
      : base(exact_top_k_options{.density = density}) {}

  //! @private Implementation hook of detail::batched_compressor_base (compress(),
  //! compress_accumulate() and compress_accumulate_momentum() are the entry points). On a GPU it
  //! returns once the work is queued (no host round trip, except the allocations of a call that
  //! grows a buffer); the message is complete when the stream gets there, which out.copy_to() on
  //! the same stream waits for. Returns the batch's totals: numel = offsets[L], k_target =
  //! k_selected = sum of k_l, exact (when numel > 0), threshold 0 (each layer's is in
  //! out.copy_to(layers, stats)).
  selection_stats run(const detail::context<Backend>& ctx,
                      const detail::value_source& src,
                      bool layout_changed,
                      message_type& out) {
    const std::vector<std::uint64_t>& offsets = this->offsets_;
    if (layout_changed) { // host, O(L)
      pair_offsets_.resize(offsets.size());
      pair_offsets_[0] = 0;
      for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
        pair_offsets_[l + 1] =
            pair_offsets_[l] +
            this->target_k(static_cast<std::size_t>(offsets[l + 1] - offsets[l]));
      }
    }
    const std::size_t bounds = offsets.size();
    const auto n = static_cast<std::size_t>(offsets.back());
    const auto k = static_cast<std::size_t>(pair_offsets_.back());
    out.prepare(offsets, pair_offsets_, this->options_.values);
    selection_stats stats;
    stats.numel = n;
    stats.k_target = k;
    stats.k_selected = k;
    stats.exact = n > 0;
    if (n == 0) {
      return stats;
    }
    const auto layout = this->device_layout(ctx, 2);
    if (layout.uploaded) {
      ctx.backend.copy_from_host(layout.words + bounds, pair_offsets_.data(),
                                 bounds * sizeof(std::uint64_t));
    }
    detail::materialize(ctx, src, n);
    const std::uint32_t* selected = detail::segmented_top_k_select(
        ctx, this->segments_, src.values(), {layout.words, layout.words + bounds, bounds - 1, n, k},
        out.index_storage(), out.value_storage(), out.threshold_storage());
    detail::finish_selection(ctx, selected, out.value_storage(), k, src, this->options_.values);
    return stats;
  }

private:
  std::vector<std::uint64_t> pair_offsets_;
};

#if defined(__CUDACC__)
//! @brief Batched exact top-k on CUDA device memory.
using batched_exact_top_k = basic_batched_exact_top_k<device_backend>;
#endif

} // namespace gradcomp::cuda
