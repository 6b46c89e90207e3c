// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief CRTP base of the batched CUDA compressors (many small layers of one flat buffer per
//! call): their public entry points (plain, with error feedback, with DGC momentum correction),
//! validation of the buffer and of the layer layout, and the layout's copy in Backend's memory.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/compressor_base.hpp>
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

namespace detail {

//! @brief What every batched compressor shares. Derived provides
//! `selection_stats run(const context<Backend>&, const value_source&, bool layout_changed,
//! basic_batched_device_message<Backend>&)`, called after validation with the call's layout in
//! offsets_ (L + 1 element offsets on the host; layout_changed when they differ from the
//! previous call's); it materializes the source (error feedback) when the batch is not empty,
//! selects every layer into the message and returns the batch's totals.
//!
//! Layout: L layers are given by L + 1 element offsets (offsets[0] == 0, non-decreasing, the
//! last at most the buffer's length n_elements), layer l = [offsets[l], offsets[l+1]) of the
//! buffer, as a DDP bucket holds its parameters' gradients. Elements past offsets[L] belong to
//! no layer: they are neither accumulated nor selected. Empty layers are allowed. Each layer has
//! at most max_batched_layer_elements elements; the buffer at most 2^32 (32-bit positions).
//! Validation is O(L) host work. Not thread-safe per object.
template <class Derived, class Options, class Backend>
class batched_compressor_base {
public:
  using options = Options;
  using backend_type = Backend;
  using stream_type = typename Backend::stream_type;
  using message_type = basic_batched_device_message<Backend>;

  //! @throws std::invalid_argument if the density is outside (0, 1] or the guard factor (when
  //! Options has one) outside [1, 1e6], or `nonfinite` is not propagate (no device check yet).
  explicit batched_compressor_base(const Options& o) : options_(o) {
    gradcomp::detail::check_device_options(o);
  }

  [[nodiscard]] const Options& get_options() const noexcept { return options_; }
  [[nodiscard]] value_type values_type() const noexcept { return options_.values; }
  //! k for an n-element layer: ceil(density x n) clamped to [1, n] (0 when n == 0).
  [[nodiscard]] std::size_t target_k(std::size_t n) const {
    return k_for_density(n, options_.density);
  }

  //! @brief Compresses every layer of x[0, n_elements) (Backend memory, read only) into `out`,
  //! ordered on `stream`.
  //! @param layer_offsets_elements L + 1 element offsets on the host (see the class).
  //! @returns the batch's totals (the derived class says which).
  //! @throws std::invalid_argument, naming the value and the limit, on n_elements > 2^32, a
  //! null pointer with n_elements > 0, no offsets, offsets[0] != 0, an offset below its
  //! predecessor or beyond n_elements, a layer above max_batched_layer_elements; cuda_error or
  //! thrust::system_error on a CUDA failure.
  selection_stats compress(const float* x,
                           std::size_t n_elements,
                           std::span<const std::size_t> layer_offsets_elements,
                           message_type& out,
                           stream_type stream = {}) {
    return dispatch(checked_source(x, n_elements), n_elements, layer_offsets_elements, out, stream);
  }

  //! @brief Error feedback fused into compression, for every layer: residual += grad; out =
  //! the selection of each layer of the residual; residual -= sent (0 where sent unchanged, the
  //! rounding error where rounded). Adds 12 bytes per element. @throws as compress().
  selection_stats compress_accumulate(float* residual,
                                      const float* grad,
                                      std::size_t n_elements,
                                      std::span<const std::size_t> layer_offsets_elements,
                                      message_type& out,
                                      stream_type stream = {}) {
    return dispatch(checked_source(residual, grad, n_elements), n_elements, layer_offsets_elements,
                    out, stream);
  }

  //! @brief DGC momentum correction and error feedback (Lin et al. 2018, eqs. 4-6) for every
  //! layer: velocity = momentum x velocity + grad; residual += velocity; out = the selection of
  //! each layer; residual -= sent; velocity = 0 where sent. Adds 20 bytes per element.
  //! @pre 0 <= momentum < 1.
  //! @throws as compress(), and std::invalid_argument naming a bad momentum.
  selection_stats compress_accumulate_momentum(float* residual,
                                               float* velocity,
                                               const float* grad,
                                               std::size_t n_elements,
                                               std::span<const std::size_t> layer_offsets_elements,
                                               float momentum,
                                               message_type& out,
                                               stream_type stream = {}) {
    return dispatch(checked_source(residual, velocity, grad, n_elements, momentum), n_elements,
                    layer_offsets_elements, out, stream);
  }

protected:
  //! The layout in Backend's memory, `slots` x (L + 1) words: the element offsets in the first
  //! L + 1 (uploaded here, 8 (L + 1) bytes, when stale), the other slots the derived class's.
  //! `uploaded`: the offsets were just uploaded (a new layout, or a regrown buffer whose other
  //! slots are lost too).
  struct device_layout_words {
    std::uint64_t* words;
    bool uploaded;
  };
  device_layout_words device_layout(const context<Backend>& ctx, std::size_t slots) {
    const std::size_t bounds = offsets_.size();
    const std::size_t capacity = segments_.layout.capacity();
    std::uint64_t* words = segments_.layout.reserve(slots * bounds);
    const bool upload = !layout_uploaded_ || segments_.layout.capacity() != capacity;
    if (upload) {
      ctx.backend.copy_from_host(words, offsets_.data(), bounds * sizeof(std::uint64_t));
      layout_uploaded_ = true;
    }
    return {words, upload};
  }

  Options options_;
  std::vector<std::uint64_t> offsets_; // the call's layout, L + 1 element offsets
  workspace<Backend> ws_;
  segment_workspace<Backend> segments_;

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

  selection_stats dispatch(const value_source& src,
                           std::size_t n_elements,
                           std::span<const std::size_t> offsets,
                           message_type& out,
                           stream_type stream) {
    check_layout(offsets, n_elements);
    const bool changed =
        !std::equal(offsets.begin(), offsets.end(), offsets_.begin(), offsets_.end());
    if (changed) {
      offsets_.assign(offsets.begin(), offsets.end());
      layout_uploaded_ = false;
    }
    const context<Backend> ctx{Backend{stream}, ws_};
    return static_cast<Derived&>(*this).run(ctx, src, changed, out);
  }

  bool layout_uploaded_ = false;
};

} // namespace detail
} // namespace gradcomp::cuda
