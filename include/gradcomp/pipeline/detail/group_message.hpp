// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Concatenation of per-layer compressed messages into one group message.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstdint>

namespace gradcomp::pipeline_detail {

//! Starts an empty group message of `dense_length` elements. A group is dense only while every
//! layer appended to it is dense; the first layer's value type is kept (fp32 on a mismatch).
inline void begin_group(sparse_message& group, std::uint64_t dense_length) {
  group.clear(dense_length);
  group.dense = true;
}

//! Appends `layer` (a message of one layer) at element offset `offset` of `group`. Layers must
//! be appended in ascending offset order, so the group's indices stay strictly ascending.
//! Values are copied bit for bit. O(nnz of the group so far on a dense-to-sparse switch, else
//! O(nnz of the layer)).
//! @throws std::invalid_argument if the layer does not fit in the group.
inline void
append_layer(sparse_message& group, const sparse_message& layer, std::uint64_t offset, bool first) {
  gradcomp::detail::require(offset + layer.dense_length_elements <= group.dense_length_elements,
                            "group message: layer at offset ", offset, " of ",
                            layer.dense_length_elements, " elements exceeds the group length ",
                            group.dense_length_elements);
  if (first) {
    group.values_type = layer.values_type;
  } else if (group.values_type != layer.values_type) {
    group.values_type = value_type::fp32;
  }
  if (!layer.dense) {
    gradcomp::detail::require(group.dense_length_elements <= max_sparse_dense_length_elements,
                              "group message: ", group.dense_length_elements,
                              " elements exceed the 32-bit index limit of a sparse message");
  }
  if (group.dense && !layer.dense) {
    // switch to indexed form: every value so far is at its own position
    group.dense = false;
    group.indices.resize(group.values.size());
    for (std::size_t i = 0; i < group.values.size(); ++i) {
      group.indices[i] = static_cast<std::uint32_t>(i);
    }
  }
  if (group.dense) {
    group.values.insert(group.values.end(), layer.values.begin(), layer.values.end());
    return;
  }
  for (std::size_t i = 0; i < layer.values.size(); ++i) {
    const std::uint64_t index = layer.dense ? i : layer.indices[i];
    group.indices.push_back(static_cast<std::uint32_t>(offset + index));
    group.values.push_back(layer.values[i]);
  }
}

} // namespace gradcomp::pipeline_detail
