// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Concatenation of the compressed messages of consecutive slices of one vector (the
//! layers of a merge group, or of a whole model) into one message of the whole: what the
//! pipeline sends for a group with per-layer compression, and what an asynchronous-SGD worker
//! pushes for its model (gradcomp-train --sync async).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstdint>

namespace gradcomp {

//! @brief Starts an empty concatenation of `dense_length` elements in `group` (capacity kept).
//! The result is dense only while every part appended to it is dense; it keeps the first
//! part's value type (fp32 when the parts' types differ, or when quantized parts differ in scale
//! or levels: each part's values stay exact, but are sent as 4-byte floats). O(1).
inline void begin_concatenation(sparse_message& group, std::uint64_t dense_length) {
  group.clear(dense_length);
  group.dense = true;
}

//! @brief Appends `layer` (the message of the slice at element `offset`; `first`: the first
//! part appended since begin_concatenation()) to `group`. Parts must be appended in ascending
//! offset order without overlap, so the group's indices stay strictly ascending (slices not
//! appended stay zero: a sparse result then). Values are copied bit for bit. O(nnz of the
//! group so far on a dense-to-sparse switch, else O(nnz of the part)).
//! A dense result needs dense parts that cover the whole length, each starting where the
//! previous one ended; a gap switches the result to indexed form.
//! @throws std::invalid_argument if the part does not fit in the group, starts before the end
//! of what is already appended, or a sparse result would exceed the 32-bit index limit.
inline void append_concatenated(sparse_message& group,
                                const sparse_message& layer,
                                std::uint64_t offset,
                                bool first) {
  gradcomp::detail::require(offset + layer.dense_length_elements <= group.dense_length_elements,
                            "group message: layer at offset ", offset, " of ",
                            layer.dense_length_elements, " elements exceeds the group length ",
                            group.dense_length_elements);
  const std::uint64_t appended_end =
      group.dense ? group.values.size()
                  : (group.indices.empty() ? 0 : std::uint64_t{group.indices.back()} + 1);
  gradcomp::detail::require(offset >= appended_end, "group message: layer at offset ", offset,
                            " overlaps or precedes what is already appended (up to element ",
                            appended_end, "): append parts in ascending offset order");
  if (first) {
    group.values_type = layer.values_type;
    group.quantization_scale = layer.quantization_scale;
    group.quantization_levels = layer.quantization_levels;
  } else if (group.values_type != layer.values_type ||
             (layer.values_type == value_type::quantized &&
              (group.quantization_scale != layer.quantization_scale ||
               group.quantization_levels != layer.quantization_levels))) {
    group.values_type = value_type::fp32; // every value is a float: exact in fp32
    group.quantization_scale = 0.0f;
    group.quantization_levels = 0;
  }
  const bool gap = group.dense && offset > group.values.size();
  if (!layer.dense || gap) {
    gradcomp::detail::require(group.dense_length_elements <= max_sparse_dense_length_elements,
                              "group message: ", group.dense_length_elements,
                              " elements exceed the 32-bit index limit of a sparse message");
  }
  if (group.dense && (!layer.dense || gap)) {
    // switch to indexed form (a sparse part, or a gap of slices not appended that stays
    // zero): every value so far is at its own position
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

} // namespace gradcomp
