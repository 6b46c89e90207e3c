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
#include <gradcomp/cuda/detail/compressor_base.cuh>
#include <gradcomp/cuda/detail/segmented_select.cuh>
#include <gradcomp/cuda/detail/select.cuh>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::cuda {

//! @brief Largest layer, in elements, that a batched compressor takes (2^18 = 262144). The
//! batch sorts all its elements once, moving about 200 bytes per element (a radix sort of 64-bit
//! keys with 32-bit positions), where a single-layer call moves 16-20 bytes per element but
//! waits for the host 5-8 times (at least 5-10 us each). Below about 2^18 elements the round
//! trips cost more; above, compress the layer with the single-layer compressor
//! (gradcomp::cuda::exact_top_k). An estimate from bandwidth and latency, not yet measured.
inline constexpr std::size_t max_batched_layer_elements = std::size_t{1} << 18;

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
class basic_batched_exact_top_k {
public:
  using options = exact_top_k_options;
  using backend_type = Backend;
  using stream_type = typename Backend::stream_type;
  using message_type = basic_batched_device_message<Backend>;

  //! @throws std::invalid_argument if the density is outside (0, 1].
  explicit basic_batched_exact_top_k(exact_top_k_options o = {}) : options_(o) {
    gradcomp::detail::check_common_options(o);
  }
  explicit basic_batched_exact_top_k(double density)
      : basic_batched_exact_top_k(exact_top_k_options{.density = density}) {}

  [[nodiscard]] const options& get_options() const noexcept { return options_; }
  [[nodiscard]] value_type values_type() const noexcept { return options_.values; }
  //! k for an n-element layer: ceil(density x n) clamped to [1, n] (0 when n == 0).
  [[nodiscard]] std::size_t target_k(std::size_t n) const {
    return k_for_density(n, options_.density);
  }

  //! @brief Compresses every layer of x[0, n_elements) (Backend memory, read only) into `out`,
  //! ordered on `stream`. On a GPU it returns once the work is queued (no host round trip, except
  //! the allocations of a call that grows a buffer); the message is complete when the stream
  //! gets there, which out.copy_to() on the same stream waits for.
  //! @param layer_offsets_elements L + 1 element offsets on the host (see the class).
  //! @returns the batch's totals: numel = offsets[L], k_target = k_selected = sum of k_l, exact
  //! (when numel > 0), threshold 0 (each layer's is in out.copy_to(layers, stats)).
  //! @throws std::invalid_argument, naming the value and the limit, on n_elements > 2^32, a
  //! null pointer with n_elements > 0, no offsets, offsets[0] != 0, an offset below its
  //! predecessor or beyond n_elements, a layer above max_batched_layer_elements; cuda_error or
  //! thrust::system_error on a CUDA failure.
  selection_stats compress(const float* x,
                           std::size_t n_elements,
                           std::span<const std::size_t> layer_offsets_elements,
                           message_type& out,
                           stream_type stream = {}) {
    detail::check_pointer(x, n_elements, "gradient");
    return dispatch({x, nullptr, nullptr, 0.0f}, n_elements, layer_offsets_elements, out, stream);
  }

  //! @brief Error feedback fused into compression, for every layer: residual += grad; out =
  //! top-k of each layer of the residual; residual -= sent (0 where sent unchanged, the rounding
  //! error where rounded). @throws as compress().
  selection_stats compress_accumulate(float* residual,
                                      const float* grad,
                                      std::size_t n_elements,
                                      std::span<const std::size_t> layer_offsets_elements,
                                      message_type& out,
                                      stream_type stream = {}) {
    detail::check_pointer(residual, n_elements, "residual");
    detail::check_pointer(grad, n_elements, "gradient");
    return dispatch({grad, residual, nullptr, 0.0f}, n_elements, layer_offsets_elements, out,
                    stream);
  }

  //! @brief DGC momentum correction and error feedback (Lin et al. 2018, eqs. 4-6) for every
  //! layer: velocity = momentum x velocity + grad; residual += velocity; out = top-k of each
  //! layer; residual -= sent; velocity = 0 where sent. @pre 0 <= momentum < 1.
  //! @throws as compress(), and std::invalid_argument naming a bad momentum.
  selection_stats compress_accumulate_momentum(float* residual,
                                               float* velocity,
                                               const float* grad,
                                               std::size_t n_elements,
                                               std::span<const std::size_t> layer_offsets_elements,
                                               float momentum,
                                               message_type& out,
                                               stream_type stream = {}) {
    detail::check_pointer(residual, n_elements, "residual");
    detail::check_pointer(velocity, n_elements, "velocity");
    detail::check_pointer(grad, n_elements, "gradient");
    check_momentum(momentum);
    return dispatch({grad, residual, velocity, momentum}, n_elements, layer_offsets_elements, out,
                    stream);
  }

private:
  static void check_layout(std::span<const std::size_t> offsets, std::size_t n_elements) {
    using gradcomp::detail::require;
    require(!offsets.empty(),
            "layer offsets are empty: L layers need L + 1 offsets, the first 0, the last at "
            "most the buffer's ",
            n_elements, " elements");
    require(offsets[0] == 0, "layer offset 0 is ", offsets[0], ", not 0");
    for (std::size_t l = 1; l < offsets.size(); ++l) {
      require(offsets[l] <= n_elements, "layer offset ", l, " is ", offsets[l],
              ", beyond the buffer of ", n_elements, " elements");
      require(offsets[l] >= offsets[l - 1], "layer offset ", l, " is ", offsets[l],
              ", below offset ", l - 1, " (", offsets[l - 1], ")");
      require(offsets[l] - offsets[l - 1] <= max_batched_layer_elements, "layer ", l - 1, " has ",
              offsets[l] - offsets[l - 1], " elements, above the batch limit of ",
              max_batched_layer_elements, " (compress it with the single-layer compressor)");
    }
  }

  // Validates the offsets and, when they differ from the cached layout, recomputes the pair
  // offsets (host, O(L)) and marks the device copy stale.
  void set_layout(std::span<const std::size_t> offsets, std::size_t n_elements) {
    check_layout(offsets, n_elements);
    if (std::equal(offsets.begin(), offsets.end(), offsets_.begin(), offsets_.end())) {
      return;
    }
    offsets_.assign(offsets.begin(), offsets.end());
    pair_offsets_.resize(offsets_.size());
    pair_offsets_[0] = 0;
    for (std::size_t l = 0; l + 1 < offsets_.size(); ++l) {
      pair_offsets_[l + 1] =
          pair_offsets_[l] + target_k(static_cast<std::size_t>(offsets_[l + 1] - offsets_[l]));
    }
    layout_uploaded_ = false;
  }

  selection_stats dispatch(const detail::value_source& src,
                           std::size_t n_elements,
                           std::span<const std::size_t> offsets,
                           message_type& out,
                           stream_type stream) {
    set_layout(offsets, n_elements);
    const std::size_t bounds = offsets_.size();
    const auto n = static_cast<std::size_t>(offsets_.back());
    const auto k = static_cast<std::size_t>(pair_offsets_.back());
    out.prepare(offsets_, pair_offsets_, options_.values);
    selection_stats stats;
    stats.numel = n;
    stats.k_target = k;
    stats.k_selected = k;
    stats.exact = n > 0;
    if (n == 0) {
      return stats;
    }
    const detail::context<Backend> ctx{Backend{stream}, ws_};
    std::uint64_t* device_layout = segments_.layout.reserve(2 * bounds);
    if (!layout_uploaded_) {
      ctx.backend.copy_from_host(device_layout, offsets_.data(), bounds * sizeof(std::uint64_t));
      ctx.backend.copy_from_host(device_layout + bounds, pair_offsets_.data(),
                                 bounds * sizeof(std::uint64_t));
      layout_uploaded_ = true;
    }
    detail::materialize(ctx, src, n);
    const std::uint32_t* selected = detail::segmented_top_k_select(
        ctx, segments_, src.values(), {device_layout, device_layout + bounds, bounds - 1, n, k},
        out.index_storage(), out.value_storage(), out.threshold_storage());
    detail::finish_selection(ctx, selected, out.value_storage(), k, src, options_.values);
    return stats;
  }

  options options_;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> pair_offsets_;
  bool layout_uploaded_ = false;
  detail::workspace<Backend> ws_;
  detail::segment_workspace<Backend> segments_;
};

#if defined(__CUDACC__)
//! @brief Batched exact top-k on CUDA device memory.
using batched_exact_top_k = basic_batched_exact_top_k<device_backend>;
#endif

} // namespace gradcomp::cuda
