// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::basic_batched_device_message: what a batched CUDA compressor selected
//! from many layers at once, still in the backend's memory, and its copy (one transfer) into one
//! host gradcomp::sparse_message per layer, in the wire format of the single-layer messages.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/cuda/buffer.cuh>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace gradcomp::cuda {

//! @brief The pairs of `layer_count()` layers in Backend's memory (device memory for
//! device_backend): layer l's `nnz(l)` (index, value) pairs, indices local to the layer and
//! strictly ascending, at positions [pair_offset(l), pair_offset(l) + nnz(l)) of indices() and
//! values(); plus each layer's dense length, its selection stats and threshold, and the value
//! type.
//! Memory: 8 bytes per pair and 4 per layer in Backend's memory, the same again on the host for
//! the staging copy, and 16 bytes of layout and one selection_stats per layer on the host; all
//! grown on demand and kept across reuse. Not thread-safe.
template <class Backend>
class basic_batched_device_message {
public:
  //! The backend whose memory holds the pairs (device_backend or host_backend).
  using backend_type = Backend;

  //! Layers in the batch (L).
  [[nodiscard]] std::size_t layer_count() const noexcept { return layer_count_; }
  //! Length of layer l, in elements. @pre l < layer_count().
  [[nodiscard]] std::uint64_t dense_length_elements(std::size_t l) const noexcept {
    return offsets_[l + 1] - offsets_[l];
  }
  //! Pairs carried for layer l (its k). @pre l < layer_count().
  [[nodiscard]] std::size_t nnz(std::size_t l) const noexcept {
    return static_cast<std::size_t>(pair_offsets_[l + 1] - pair_offsets_[l]);
  }
  //! Position of layer l's first pair in indices() / values(). @pre l <= layer_count().
  [[nodiscard]] std::size_t pair_offset(std::size_t l) const noexcept {
    return static_cast<std::size_t>(pair_offsets_[l]);
  }
  //! Pairs carried for all layers.
  [[nodiscard]] std::size_t nnz() const noexcept { return pair_offset(layer_count_); }
  //! The type every value is exactly representable in (and encoded as on the wire).
  [[nodiscard]] value_type values_type() const noexcept { return values_type_; }
  //! Layer-local indices of all pairs, in Backend's memory (nnz() of them).
  [[nodiscard]] const std::uint32_t* indices() const noexcept { return words_.data(); }
  //! Values of all pairs, in Backend's memory (nnz() of them).
  [[nodiscard]] const float* values() const noexcept { return float_words(nnz()); }

  //! @brief Copies every layer's pairs into `layers` (resized to layer_count(); each message is
  //! sparse, of its layer's dense length, and keeps its vectors' capacity). One transfer of
  //! 8 x nnz() + 4 x layer_count() bytes to the host, ordered on `stream` (the compressing call's,
  //! or one ordered after it) and waited for (one host round trip; none when every layer is
  //! empty), then O(nnz() + layer_count()) host work.
  //! @throws what the backend's copy throws (cuda_error).
  void copy_to(std::vector<sparse_message>& layers, typename Backend::stream_type stream = {}) {
    stage(stream);
    layers.resize(layer_count_);
    const std::size_t k = nnz();
    for (std::size_t l = 0; l < layer_count_; ++l) {
      sparse_message& m = layers[l];
      m.clear(dense_length_elements(l));
      m.values_type = values_type_;
      m.indices.resize(nnz(l));
      m.values.resize(nnz(l));
      if (nnz(l) != 0) {
        const std::uint32_t* pairs = staging_.data() + pair_offset(l);
        std::memcpy(m.indices.data(), pairs, nnz(l) * sizeof(std::uint32_t));
        std::memcpy(m.values.data(), pairs + k, nnz(l) * sizeof(float));
      }
    }
  }

  //! @brief copy_to(layers), and `stats` (resized to layer_count()): layer l's selection_stats
  //! as the single-layer compressor returns them (numel, k_target, k_selected = nnz(l), the
  //! threshold the layer's selection used, exact, fallback; all 0 / false for an empty layer).
  //! The same single transfer. @throws as copy_to(layers).
  void copy_to(std::vector<sparse_message>& layers,
               std::vector<selection_stats>& stats,
               typename Backend::stream_type stream = {}) {
    copy_to(layers, stream);
    stats.resize(layer_count_);
    const std::size_t thresholds = 2 * nnz();
    for (std::size_t l = 0; l < layer_count_; ++l) {
      stats[l] = layer_stats_[l];
      std::memcpy(&stats[l].threshold, staging_.data() + thresholds + l, sizeof(float));
    }
  }

  //! @private Used by the batched compressors: empties the message for layers with element
  //! offsets `offsets` and pair offsets `pair_offsets` (layer_count() + 1 each), makes room for
  //! max(nnz(), capacity_pairs) pairs, and sets every layer's stats to those of an exact top-k
  //! (numel, k_target = k_selected = nnz(l), exact when numel > 0), which
  //! layer_stats_storage() may then change.
  void prepare(std::span<const std::uint64_t> offsets,
               std::span<const std::uint64_t> pair_offsets,
               value_type t,
               std::size_t capacity_pairs = 0) {
    layer_count_ = offsets.size() - 1;
    offsets_.assign(offsets.begin(), offsets.end());
    pair_offsets_.assign(pair_offsets.begin(), pair_offsets.end());
    values_type_ = t;
    words_.reserve(2 * std::max(nnz(), capacity_pairs) + layer_count_);
    layer_stats_.resize(layer_count_);
    for (std::size_t l = 0; l < layer_count_; ++l) {
      selection_stats& s = layer_stats_[l];
      s = selection_stats{};
      s.numel = static_cast<std::size_t>(dense_length_elements(l));
      s.k_target = nnz(l);
      s.k_selected = nnz(l);
      s.exact = s.numel > 0;
    }
  }
  //! @private Every layer's stats but the threshold (which the device writes), layer_count()
  //! of them, for the compressors to adjust after prepare().
  [[nodiscard]] std::span<selection_stats> layer_stats_storage() noexcept { return layer_stats_; }
  //! @private Writable storage for the compressors: nnz() indices.
  [[nodiscard]] std::uint32_t* index_storage() noexcept { return words_.data(); }
  //! @private Writable storage for the compressors: nnz() values.
  [[nodiscard]] float* value_storage() noexcept { return float_words(nnz()); }
  //! @private Writable storage for the compressors: layer_count() thresholds.
  [[nodiscard]] float* threshold_storage() noexcept { return float_words(2 * nnz()); }

private:
  // words_: nnz() indices, then nnz() values, then layer_count() thresholds (float bits), so
  // that one transfer brings everything to the host
  [[nodiscard]] float* float_words(std::size_t at) const noexcept {
    return reinterpret_cast<float*>(words_.data() + at);
  }
  // nothing to transfer when every layer is empty (a non-empty layer has k >= 1): the device
  // wrote nothing, and every threshold is 0
  void stage(typename Backend::stream_type stream) {
    const std::size_t words = 2 * nnz() + layer_count_;
    staging_.resize(words);
    if (nnz() == 0) {
      std::fill(staging_.begin(), staging_.end(), 0u);
      return;
    }
    const Backend backend{stream};
    backend.copy_to_host(staging_.data(), words_.data(), words * sizeof(std::uint32_t));
  }

  std::size_t layer_count_ = 0;
  std::vector<std::uint64_t> offsets_{0};
  std::vector<std::uint64_t> pair_offsets_{0};
  value_type values_type_ = value_type::fp32;
  buffer<std::uint32_t, Backend> words_;
  std::vector<std::uint32_t> staging_;
  std::vector<selection_stats> layer_stats_;
};

#if defined(__CUDACC__)
//! @brief A batched message in CUDA device memory.
using batched_device_message = basic_batched_device_message<device_backend>;
#endif

} // namespace gradcomp::cuda
