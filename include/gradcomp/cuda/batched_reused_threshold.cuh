// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::batched_reused_threshold: S1's reused threshold (exact top-k every s
//! calls, the remembered threshold between them, guarded) on many small layers of one flat
//! buffer per call, with launches and host round trips that do not grow with the number of
//! layers.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/batched_message.cuh>
#include <gradcomp/cuda/buffer.cuh>
#include <gradcomp/cuda/detail/batched_compressor_base.cuh>
#include <gradcomp/cuda/detail/segmented_select.cuh>
#include <gradcomp/cuda/detail/select.cuh>
#include <gradcomp/cuda/reused_threshold.cuh>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <vector>

namespace gradcomp::cuda {

//! @brief Reused threshold (S1, DLGS "dynamic" layer-wise sparsification) on every layer of a
//! flat buffer: per layer, its calls 0, s, 2s, ... (counting only the calls on which the layer
//! is not empty) compute the exact top-k_l and remember its k_l-th largest magnitude H_l; the
//! calls between select every |v| >= H_l; a count outside the guard band [k_l/c, c k_l] falls
//! back to the exact top-k_l for that layer, whose threshold replaces H_l. Layer l's message,
//! residual, velocity and stats (threshold, exact, fallback, k_target, k_selected) equal those
//! of one gradcomp::reused_threshold (or gradcomp::cuda::reused_threshold) per layer, called on
//! that layer alone in the same sequence, bit for bit; k_l = ceil(density x n_l) clamped to
//! [1, n_l]. The per-layer state (call count, H_l) belongs to the layer's position l: a
//! changed layout keeps layer l's state, more layers start fresh, fewer drop the tail's.
//!
//! Layout and limits as gradcomp::cuda::basic_batched_exact_top_k (L + 1 host offsets, layers
//! of at most max_batched_layer_elements elements), and the layers hold fewer than 2^32
//! elements in all (32-bit ranks).
//!
//! Algorithm per call (N = offsets[L], K pairs): error feedback over all layers in one pass;
//! when some layer reuses its threshold, one scan ranks the elements at or above their layer's
//! remembered key (a binary search of the offsets gives each element's layer; the key array
//! stays in Backend's memory), one pass over the layers turns the ranks into counts, and the L
//! counts come to the host (the call's one host round trip: the guard and the message size
//! need them). On the host, per layer: refresh (exact), reuse within the band (threshold), or
//! fallback (exact). When no layer is exact, one compaction pass writes the selected positions
//! (ascending; positions are their ranks) and one the pairs. Otherwise the segmented exact path
//! of batched_exact_top_k runs on the whole batch (one key pass, one stable sort): an exact
//! layer keeps its first k_l ranked elements, a threshold layer its first count_l (exactly the
//! elements at or above its key, since the ranks are by magnitude), then one sort of the K
//! positions and the pair pass. Last, one pass over the layers remembers the exact layers' k-th
//! keys and writes every layer's threshold, and the finishing pass shared with the single-layer
//! compressors rounds and updates residual and velocity.
//!
//! Per call, whatever L: at most one host round trip (4L bytes of counts; none when every
//! non-empty layer refreshes, as on the first call); uploads (no round trip) of 8 (L + 1) bytes
//! of modes before the count and 16 (L + 1) bytes of pair offsets and modes after it, plus the
//! offsets (8 (L + 1)) when they changed; launches: reuse-only calls about 8 (accumulation,
//! scan, counts, compaction, pairs, thresholds, finish), calls with an exact layer about 25
//! (the sorts). The message's copy_to() is one transfer and one round trip. L single-layer
//! calls take at least L round trips (2-8 L on refresh or fallback calls) and 4-20 L launches.
//! Bytes moved: error feedback 12N (20N with momentum); reuse-only calls about 24N (flags, scan,
//! compaction) + O(K + L); calls with an exact layer add the sort's about 200N. Work:
//! O(N log L) for the binary searches, plus the sorts on exact calls (std::sort's
//! O(N log N) on the host backend). Device memory: 4 (N + 1) bytes of ranks, 8 per layer (key,
//! count), the exact path's 12N + 4K and Thrust's storage, the message's room for
//! sum max(k_l, floor(c k_l)) pairs: all grow-only, so steady-state calls allocate nothing
//! (allocation_count()). A call that grows the layer count past every earlier one copies the
//! remembered keys through the host once (one more round trip). Deterministic.
//!
//! Options: gradcomp::reused_threshold_options (`threads` unused). Not thread-safe per object;
//! distinct objects may run on distinct streams concurrently.
template <class Backend>
class basic_batched_reused_threshold
    : public detail::batched_compressor_base<basic_batched_reused_threshold<Backend>,
                                             reused_threshold_options,
                                             Backend> {
  using base = detail::batched_compressor_base<basic_batched_reused_threshold<Backend>,
                                               reused_threshold_options,
                                               Backend>;
  using mode = detail::segment_mode;
  static_assert(detail::reuse_guard(2.0).max_adjust_rounds == 0,
                "the batched reuse guard falls back at once, as the host's does (no re-counts)");

public:
  using typename base::message_type;

  //! @throws std::invalid_argument on density outside (0, 1], interval 0, guard_factor outside
  //! [1, 1e6], each named with its value.
  explicit basic_batched_reused_threshold(reused_threshold_options o = {}) : base(o) {
    gradcomp::detail::check_interval(o.interval);
  }

  //! Calls made so far with layer l non-empty (the ones that count for its interval); 0 for a
  //! layer not seen yet. O(1).
  [[nodiscard]] std::uint64_t calls(std::size_t l) const noexcept {
    return l < calls_.size() ? calls_[l] : 0;
  }

  //! @private Implementation hook of detail::batched_compressor_base (compress(),
  //! compress_accumulate() and compress_accumulate_momentum() are the entry points). On a GPU
  //! it returns once the work is queued (after the counts' round trip when some layer reuses its
  //! threshold); out.copy_to() on the same stream waits for the message. Totals: numel =
  //! offsets[L], k_target = sum of k_l, k_selected = K, exact when every non-empty layer ran exact
  //! top-k (and numel > 0), fallback when some layer fell back, threshold 0 (each layer's is in
  //! out.copy_to(layers, stats)).
  //! @throws std::invalid_argument when the layers hold 2^32 elements or more.
  selection_stats run(const detail::context<Backend>& ctx,
                      const detail::value_source& src,
                      bool /*layout_changed*/,
                      message_type& out) {
    const std::vector<std::uint64_t>& offsets = this->offsets_;
    const std::size_t layers = offsets.size() - 1;
    const std::size_t bounds = layers + 1;
    const auto n = static_cast<std::size_t>(offsets.back());
    gradcomp::detail::require(n < (std::uint64_t{1} << 32), "the layers hold ", n,
                              " elements, above the batched reused threshold's limit of ",
                              (std::uint64_t{1} << 32) - 1, " (32-bit ranks)");
    const reused_threshold_options& o = this->options_;
    keep_keys(ctx, layers);
    calls_.resize(layers, 0);
    plan_.assign(2 * bounds, static_cast<std::uint64_t>(mode::none));
    std::uint64_t* const modes = plan_.data() + bounds; // after the pair offsets: one upload
    std::uint64_t* const pair_offsets = plan_.data();
    bool any_threshold = false;
    for (std::size_t l = 0; l < layers; ++l) {
      if (offsets[l + 1] == offsets[l]) {
        continue; // empty: no call for the interval, as on the host
      }
      const bool refresh = detail::reuse_refreshes(calls_[l]++, o.interval);
      modes[l] = static_cast<std::uint64_t>(refresh ? mode::exact : mode::threshold);
      any_threshold = any_threshold || !refresh;
    }

    std::uint64_t* words = nullptr;
    std::uint32_t* ranks = nullptr;
    if (n > 0) {
      detail::materialize(ctx, src, n);
      words = this->device_layout(ctx, 3).words; // offsets, pair offsets, modes
      if (any_threshold) { // the call's one round trip: every threshold layer's count
        ctx.backend.copy_from_host(words + 2 * bounds, modes, bounds * sizeof(std::uint64_t));
        ranks = ranks_.reserve(n + 1);
        std::uint32_t* counts = counts_.reserve(layers);
        detail::segment_count_over_threshold(ctx, src.values(), {words, nullptr, layers, n, 0},
                                             words + 2 * bounds, keys_.data(), ranks, counts);
        host_counts_.resize(layers);
        ctx.backend.copy_to_host(host_counts_.data(), counts, layers * sizeof(std::uint32_t));
      }
    }

    // per layer on the host: the guard, the pair counts, the stats
    const auto guard = detail::reuse_guard(o.guard_factor);
    bool any_exact = false;
    bool any_fallback = false;
    std::size_t k_total = 0;
    std::size_t capacity = 0;
    fallback_.assign(layers, false);
    for (std::size_t l = 0; l < layers; ++l) {
      const std::size_t k = this->target_k(static_cast<std::size_t>(offsets[l + 1] - offsets[l]));
      std::size_t nnz = 0;
      if (modes[l] == static_cast<std::uint64_t>(mode::threshold)) {
        nnz = host_counts_[l];
        if (!in_guard_band(nnz, k, guard.guard_factor)) {
          modes[l] = static_cast<std::uint64_t>(mode::exact);
          fallback_[l] = true;
          any_fallback = true;
        }
      }
      if (modes[l] == static_cast<std::uint64_t>(mode::exact)) {
        nnz = k;
        any_exact = true;
      }
      pair_offsets[l + 1] = pair_offsets[l] + nnz;
      k_total += k;
      capacity += std::max(k, guard_capacity(k, guard.guard_factor));
    }
    const std::span<const std::uint64_t> pairs(pair_offsets, bounds);
    out.prepare(offsets, pairs, o.values, capacity);
    const std::span<selection_stats> stats = out.layer_stats_storage();
    for (std::size_t l = 0; l < layers; ++l) {
      stats[l].k_target = this->target_k(static_cast<std::size_t>(stats[l].numel));
      stats[l].exact = modes[l] == static_cast<std::uint64_t>(mode::exact);
      stats[l].fallback = fallback_[l];
    }
    const std::size_t k_selected = static_cast<std::size_t>(pair_offsets[layers]);
    selection_stats total;
    total.numel = n;
    total.k_target = k_total;
    total.k_selected = k_selected;
    total.exact = n > 0 && !any_threshold_accepted(modes, layers);
    total.fallback = any_fallback;
    if (n == 0) {
      return total;
    }

    ctx.backend.copy_from_host(words + bounds, plan_.data(), 2 * bounds * sizeof(std::uint64_t));
    const detail::segment_layout b{words, words + bounds, layers, n, k_selected};
    const float* x = src.values();
    const std::uint32_t* order = nullptr;
    const std::uint32_t* selected = nullptr;
    if (any_exact) {
      order = detail::segment_rank(ctx, this->segments_, x, b);
      selected = detail::segment_take_heads(ctx, this->segments_, x, order, b, out.index_storage(),
                                            out.value_storage());
    } else {
      std::uint32_t* compacted = this->segments_.selected.reserve(k_selected);
      detail::segment_compact_pairs(ctx, ranks, x, b, compacted, out.index_storage(),
                                    out.value_storage());
      selected = compacted;
    }
    const thrust::counting_iterator<std::size_t> first(0);
    thrust::for_each(ctx.policy(), first, first + layers,
                     detail::segment_remember_op{x, order, b.offsets, b.pair_offsets,
                                                 words + 2 * bounds, keys_.data(),
                                                 out.threshold_storage()});
    detail::finish_selection(ctx, selected, out.value_storage(), k_selected, src, o.values);
    return total;
  }

private:
  static bool any_threshold_accepted(const std::uint64_t* modes, std::size_t layers) noexcept {
    return std::any_of(modes, modes + layers, [](std::uint64_t m) {
      return m == static_cast<std::uint64_t>(mode::threshold);
    });
  }

  // Room for `layers` remembered keys; a regrown key array gets the old keys back through the
  // host (one round trip, only when the layer count exceeds every earlier one).
  void keep_keys(const detail::context<Backend>& ctx, std::size_t layers) {
    if (layers <= keys_.capacity()) {
      return;
    }
    const std::size_t kept = std::min(calls_.size(), keys_.capacity());
    key_staging_.resize(kept);
    ctx.backend.copy_to_host(key_staging_.data(), keys_.data(), kept * sizeof(std::uint32_t));
    keys_.reserve(layers);
    ctx.backend.copy_from_host(keys_.data(), key_staging_.data(), kept * sizeof(std::uint32_t));
  }

  std::vector<std::uint64_t> calls_;       // per layer: calls on it while non-empty
  std::vector<std::uint64_t> plan_;        // the call's pair offsets (L + 1), modes (L + 1)
  std::vector<std::uint32_t> host_counts_; // per layer: count at or above its key
  std::vector<bool> fallback_;             // per layer: this call's guard fell back
  std::vector<std::uint32_t> key_staging_; // keys on their way through the host
  buffer<std::uint32_t, Backend> keys_;    // per layer: remembered threshold key H_l
  buffer<std::uint32_t, Backend> counts_;  // per layer: count at or above its key
  buffer<std::uint32_t, Backend> ranks_;   // N + 1 exclusive ranks of the over-threshold flags
};

#if defined(__CUDACC__)
//! @brief Batched reused threshold on CUDA device memory.
using batched_reused_threshold = basic_batched_reused_threshold<device_backend>;
#endif

} // namespace gradcomp::cuda
