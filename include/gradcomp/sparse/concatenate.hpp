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
#include <vector>

namespace gradcomp {

namespace detail {

//! Appends a run of `count` values of scale `scale` to `segments`, extending the last segment
//! when its scale is the same, splitting at max_quantization_segment_values. O(1) amortized.
inline void push_quantization_segment(std::vector<quantization_segment>& segments,
                                      std::uint64_t count,
                                      float scale) {
  while (count > 0) {
    if (segments.empty() || segments.back().scale != scale ||
        segments.back().values == max_quantization_segment_values) {
      segments.push_back(quantization_segment{0, scale});
    }
    const std::uint64_t room = max_quantization_segment_values - segments.back().values;
    const std::uint64_t take = count < room ? count : room;
    segments.back().values += take;
    count -= take;
  }
}

//! The scales of quantized `layer` (same levels as `group`), about to be appended after the
//! group's values: nothing while both have the one same scale, else the group switches to
//! segments (what it carries so far, one segment) and gets the layer's. O(segments of layer).
inline void append_quantization_scales(sparse_message& group, const sparse_message& layer) {
  if (group.values.empty()) { // nothing carried yet: the layer's form as it is
    group.quantization_scale = layer.quantization_scale;
    group.quantization_segments = layer.quantization_segments;
    return;
  }
  if (group.quantization_segments.empty() && layer.quantization_segments.empty() &&
      group.quantization_scale == layer.quantization_scale) {
    return;
  }
  if (group.quantization_segments.empty()) {
    push_quantization_segment(group.quantization_segments, group.values.size(),
                              group.quantization_scale);
    group.quantization_scale = 0.0f;
  }
  if (layer.quantization_segments.empty()) {
    push_quantization_segment(group.quantization_segments, layer.values.size(),
                              layer.quantization_scale);
  } else {
    for (const quantization_segment& seg : layer.quantization_segments) {
      push_quantization_segment(group.quantization_segments, seg.values, seg.scale);
    }
  }
}

} // namespace detail

//! @brief Starts an empty concatenation of `dense_length` elements in `group` (capacity kept).
//! The result is dense only while every part appended to it is dense; it keeps the first
//! part's value type (fp32 when the parts' types differ, or when quantized parts differ in
//! levels: each part's values stay exact, but are sent as 4-byte floats). Quantized parts of the
//! same levels but different scales stay quantized, with a quantization segment per scale
//! (sparse_message::quantization_segments: per-layer scales). O(1).
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
    group.quantization_segments = layer.quantization_segments;
  } else if (group.values_type != layer.values_type ||
             (layer.values_type == value_type::quantized &&
              group.quantization_levels != layer.quantization_levels)) {
    group.values_type = value_type::fp32; // every value is a float: exact in fp32
    group.quantization_scale = 0.0f;
    group.quantization_levels = 0;
    group.quantization_segments.clear();
  } else if (layer.values_type == value_type::quantized) {
    gradcomp::detail::append_quantization_scales(group, layer);
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
