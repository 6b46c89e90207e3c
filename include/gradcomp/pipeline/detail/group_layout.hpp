// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::group_state and detail::group_layout: the pipeline's state of each group of
//! consecutive layers (messages, averages, per-group compressors) for a grouping, and how a
//! group's message is assembled from its layers' and read back per layer.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/sparse/concatenate.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::detail {

//! @brief One group of the pipeline's grouping: its layers, what is pending in this iteration,
//! its messages and average buffers (one message per part).
//! @tparam Compressor the pipeline's compressor (compression_scope::per_group keeps one per
//! part).
template <class Compressor>
struct group_state {
  std::vector<std::size_t> layers; // forward indices, ascending
  std::uint64_t numel = 0;
  std::size_t pending = 0; // (part, layer) reports missing (caller's thread only)
  // one per part: written by the caller before it is marked ready, read by the comm thread
  std::vector<sparse_message> messages;
  std::vector<float> average; // written by the comm thread, read after finish()
  // in place: this iteration's gradients (caller), summed by the transport (comm thread),
  // then swapped with `average`
  std::vector<float> staging;
  // compression_scope::per_group: the group's compressor state, one per part
  std::vector<Compressor> compressors;
  // pipeline_policy::selecting_transport: the global selection of the group's last completed
  // exchange (written by the comm thread, read after finish() waited)
  std::vector<std::uint32_t> selected;
  bool has_selection = false;
};

//! @brief The group state of a grouping: the groups (sending order) and, per layer (forward
//! order), its group and its element offset within the group.
template <class Compressor>
struct group_layout {
  std::vector<group_state<Compressor>> groups;
  std::vector<std::size_t> group_of;
  std::vector<std::uint64_t> offset_of;
};

//! @brief The group state of grouping `g` (valid for the layers of `numel`, forward order):
//! zeroed averages (and staging buffers when `in_place`), every layer of each of the `parts`
//! parts pending, and with `per_group` one copy of `prototype` per part. O(total elements).
template <class Compressor>
[[nodiscard]] group_layout<Compressor> make_group_layout(const schedule::grouping& g,
                                                         std::span<const std::size_t> numel,
                                                         std::size_t parts,
                                                         bool in_place,
                                                         bool per_group,
                                                         const Compressor& prototype) {
  const std::size_t layers = numel.size();
  group_layout<Compressor> layout;
  layout.group_of.resize(layers);
  layout.offset_of.resize(layers);
  layout.groups.resize(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    group_state<Compressor>& state = layout.groups[i];
    // backward positions [begin, end) are forward indices L-1-begin down to L-end
    const std::size_t first = schedule::forward_index(g[i].end - 1, layers);
    const std::size_t last = schedule::forward_index(g[i].begin, layers);
    std::uint64_t offset = 0;
    for (std::size_t l = first; l <= last; ++l) {
      state.layers.push_back(l);
      layout.group_of[l] = i;
      layout.offset_of[l] = offset;
      offset += numel[l];
    }
    state.numel = offset;
    state.pending = state.layers.size() * parts;
    state.messages.resize(parts);
    state.average.assign(static_cast<std::size_t>(offset), 0.0f);
    if (in_place) {
      state.staging.assign(static_cast<std::size_t>(offset), 0.0f);
    }
    if (per_group) {
      state.compressors.assign(parts, prototype);
    }
  }
  return layout;
}

//! @brief compression_scope::per_layer: `message` becomes the concatenation of the messages of
//! `state`'s layers (`layer_messages` holds one part's, by forward index) in forward order,
//! each layer's indices shifted by its offset in the group (`offset_of`, by forward index).
//! @throws std::invalid_argument as append_concatenated().
template <class Compressor>
void concatenate_layers(sparse_message& message,
                        const group_state<Compressor>& state,
                        std::span<const sparse_message> layer_messages,
                        std::span<const std::uint64_t> offset_of) {
  begin_concatenation(message, state.numel);
  for (std::size_t i = 0; i < state.layers.size(); ++i) {
    const std::size_t l = state.layers[i];
    append_concatenated(message, layer_messages[l], offset_of[l], i == 0);
  }
}

//! The layer of `state` that holds element `index` of the group (offsets `offset_of`, by
//! forward index). O(layers of the group).
template <class Compressor>
[[nodiscard]] std::size_t layer_at(const group_state<Compressor>& state,
                                   std::span<const std::uint64_t> offset_of,
                                   std::size_t index) noexcept {
  std::size_t l = state.layers.front();
  for (const std::size_t candidate : state.layers) {
    if (offset_of[candidate] <= index) {
      l = candidate;
    }
  }
  return l;
}

//! @brief compression_scope::per_group: each layer's share of the group's `message` (one part's)
//! into `layer_stats` (that part's, by forward index): numel and k_selected (the selected
//! elements in the layer's range), the rest zero. The message's indices are ascending.
//! O(layers of the group + nnz).
template <class Compressor>
void count_layer_selections(const sparse_message& message,
                            const group_state<Compressor>& state,
                            std::span<const std::size_t> numel,
                            std::span<const std::uint64_t> offset_of,
                            std::span<selection_stats> layer_stats) {
  // the message's indices are ascending: count those of each layer's range
  std::size_t j = 0;
  for (const std::size_t l : state.layers) {
    selection_stats& ls = layer_stats[l];
    ls = selection_stats{};
    ls.numel = numel[l];
    if (message.dense) {
      ls.k_selected = numel[l];
      continue;
    }
    const std::uint64_t end = offset_of[l] + numel[l];
    const std::size_t first = j;
    while (j < message.indices.size() && message.indices[j] < end) {
      ++j;
    }
    ls.k_selected = j - first;
  }
}

} // namespace gradcomp::detail
