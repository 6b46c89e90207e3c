// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::grouping: a partition of a model's layers into groups of
//! consecutive layers, each compressed and sent as one message (S1 eq. 6, "layer merging").
#pragma once

#include <gradcomp/error.hpp>

#include <cstddef>
#include <vector>

namespace gradcomp::schedule {

//! @brief One group: the layers at backward positions [begin, end). Backward position p is the
//! p-th gradient to become ready, i.e. forward index L - 1 - p (position 0 is S1's layer L).
struct layer_group {
  std::size_t begin = 0; //!< first backward position, inclusive.
  std::size_t end = 0;   //!< last backward position, exclusive; end > begin.

  //! Layers in the group, end - begin. O(1).
  [[nodiscard]] std::size_t size() const noexcept { return end - begin; }
  //! Same begin and end.
  friend bool operator==(const layer_group&, const layer_group&) = default;
};

//! @brief Groups in the order their messages are sent (backward order). A valid grouping of L
//! layers is non-empty, starts at position 0, each group begins where the previous one ended,
//! and the last ends at L. There are 2^(L-1) of them.
using grouping = std::vector<layer_group>;

//! @brief Forward index (index into layer_profile::layers) of backward position `position` of
//! `layers` layers.
[[nodiscard]] constexpr std::size_t forward_index(std::size_t position, std::size_t layers) {
  return layers - 1 - position;
}

//! @brief True if `g` is a valid grouping of `layers` layers (see grouping). O(groups).
[[nodiscard]] inline bool is_valid_grouping(const grouping& g, std::size_t layers) noexcept {
  if (g.empty() || layers == 0) {
    return false;
  }
  std::size_t expected = 0;
  for (const layer_group& group : g) {
    if (group.begin != expected || group.end <= group.begin) {
      return false;
    }
    expected = group.end;
  }
  return expected == layers;
}

//! @throws std::invalid_argument if `g` is not a valid grouping of `layers` layers.
inline void validate(const grouping& g, std::size_t layers) {
  gradcomp::detail::require(is_valid_grouping(g, layers), "grouping of ", g.size(),
                            " groups is not a partition of ", layers,
                            " layers into consecutive groups in backward order");
}

//! @brief The grouping whose groups end at the given backward positions (ascending, the last
//! one equal to L). O(groups).
//! @throws std::invalid_argument if the result is not a valid grouping of `layers` layers.
[[nodiscard]] inline grouping grouping_from_ends(const std::vector<std::size_t>& ends,
                                                 std::size_t layers) {
  grouping g;
  g.reserve(ends.size());
  std::size_t begin = 0;
  for (const std::size_t end : ends) {
    g.push_back({begin, end});
    begin = end;
  }
  validate(g, layers);
  return g;
}

//! @brief per_layer: every layer its own message (plain WFBP; S1 without merging). O(L).
[[nodiscard]] inline grouping per_layer(std::size_t layers) {
  gradcomp::detail::require(layers >= 1, "per_layer: no layers");
  grouping g(layers);
  for (std::size_t p = 0; p < layers; ++p) {
    g[p] = {p, p + 1};
  }
  return g;
}

//! @brief single: all layers in one message, sent after the whole backward pass. O(1).
[[nodiscard]] inline grouping single(std::size_t layers) {
  gradcomp::detail::require(layers >= 1, "single: no layers");
  return {{0, layers}};
}

} // namespace gradcomp::schedule
