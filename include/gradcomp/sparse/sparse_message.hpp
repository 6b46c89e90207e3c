// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::sparse_message: the (index, value) pairs a compressor selected from one
//! gradient, with the gradient's dense length.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace gradcomp {

//! @brief Largest dense length a sparse (indexed) message can address: indices are 32-bit.
inline constexpr std::uint64_t max_sparse_dense_length_elements =
    std::uint64_t{std::numeric_limits<std::uint32_t>::max()} + 1;

//! @brief A run of consecutive carried values of a quantized message that share one scale
//! (sparse_message::quantization_segments): per-bucket scales (QSGD's buckets) or the per-layer
//! scales of a message concatenated from layers.
struct quantization_segment {
  //! Values in the segment, [1, max_quantization_segment_values].
  std::uint64_t values = 0;
  //! Their scale: finite and >= min_quantization_scale.
  float scale = 0.0f;
  //! Member-wise equality.
  friend bool operator==(const quantization_segment&, const quantization_segment&) = default;
};

//! @brief The most values one quantization_segment may hold: 2^32 - 1 (a longer run is several
//! segments of the same scale).
inline constexpr std::uint64_t max_quantization_segment_values =
    std::numeric_limits<std::uint32_t>::max();

//! @brief A compressed gradient: either sparse (ascending 32-bit indices + values) or dense
//! (all `dense_length_elements` values, no indices).
//!
//! Invariants (checked by validate(), kept by every compressor and by wire decoding):
//! * sparse layout: `indices.size() == values.size() <= dense_length_elements`, indices strictly
//!   ascending and `< dense_length_elements`, `dense_length_elements <= 2^32`;
//! * dense layout: `indices` empty and `values.size() == dense_length_elements`;
//! * every value is exactly representable in `values_type` (compressors round to it, so that
//!   error feedback keeps the rounding error; encoding then loses nothing); for
//!   value_type::quantized: `quantization_levels` in [1, max_quantization_levels] and every
//!   value quantized_value(scale, j, levels) for an integer |j| <= levels, where scale is
//!   `quantization_scale` (finite and >= min_quantization_scale, 2^-111) when
//!   `quantization_segments` is empty, else the scale of the value's segment (segments of at
//!   least one value each, their counts summing to nnz, every scale valid).
//! Memory: 8 bytes per nonzero (sparse) or 4 per element (dense) plus the vectors' capacity,
//! which is kept when a message is reused, so steady-state compression allocates nothing.
struct sparse_message {
  //! Length of the gradient this message was taken from, in elements.
  std::uint64_t dense_length_elements = 0;
  //! True when the message carries every element in order and no indices.
  bool dense = false;
  //! Type the values are representable in, and are encoded as on the wire.
  value_type values_type = value_type::fp32;
  //! Ascending element indices of the selected values (empty when `dense`).
  std::vector<std::uint32_t> indices;
  //! Selected values, one per index (or all values when `dense`).
  std::vector<float> values;
  //! value_type::quantized only, without segments: the scale every value is a multiple of (see
  //! values_type). Ignored when `quantization_segments` is not empty.
  float quantization_scale = 0.0f;
  //! value_type::quantized only: the levels per sign (values scale x j / levels, |j| <= levels).
  std::uint32_t quantization_levels = 0;
  //! value_type::quantized only: empty when every value shares `quantization_scale`; else the
  //! carried values in order, split into runs with a scale each (counts summing to nnz).
  std::vector<quantization_segment> quantization_segments;

  //! Number of values carried (k for a top-k message, the dense length for a dense one).
  [[nodiscard]] std::size_t nnz() const noexcept { return values.size(); }

  //! Fraction of the dense gradient carried: nnz / dense length (0 for an empty gradient).
  [[nodiscard]] double density() const noexcept {
    return dense_length_elements == 0
               ? 0.0
               : static_cast<double>(nnz()) / static_cast<double>(dense_length_elements);
  }

  //! Empties the message for reuse, keeping the vectors' capacity. O(1).
  void clear(std::uint64_t dense_length) noexcept {
    dense_length_elements = dense_length;
    dense = false;
    values_type = value_type::fp32;
    indices.clear();
    values.clear();
    quantization_scale = 0.0f;
    quantization_levels = 0;
    quantization_segments.clear();
  }

  //! @brief The code j of `v` in a quantization of scale `scale` and `levels` levels: the
  //! integer with quantized_value(scale, j, levels) == v bit for bit and |j| <= levels, or
  //! std::nullopt if there is none (or the scale or levels are out of range). O(1).
  [[nodiscard]] static std::optional<std::int32_t>
  quantization_code(float v, float scale, std::uint32_t levels) noexcept {
    if (!valid_quantization_scale(scale) || !valid_quantization_levels(levels) || !(v == v)) {
      return std::nullopt;
    }
    const double r = std::nearbyint(static_cast<double>(v) / static_cast<double>(scale) *
                                    static_cast<double>(levels));
    if (!(std::abs(r) <= static_cast<double>(levels))) {
      return std::nullopt;
    }
    const auto j = static_cast<std::int32_t>(r);
    if (std::bit_cast<std::uint32_t>(quantized_value(scale, j, levels)) !=
        std::bit_cast<std::uint32_t>(v)) {
      return std::nullopt;
    }
    return j;
  }

  //! @brief The code of `v` in this message's single-scale quantization (`quantization_scale`,
  //! `quantization_levels`; see the static overload). O(1).
  [[nodiscard]] std::optional<std::int32_t> quantization_code(float v) const noexcept {
    return quantization_code(v, quantization_scale, quantization_levels);
  }

  //! @brief Calls `f(position, scale)` for every carried value of a quantized message in order,
  //! with the scale it is quantized with: `quantization_scale`, or its segment's. Stops at nnz
  //! (segments past it are not visited). O(nnz + segments).
  template <class F>
  void for_each_quantization_scale(F&& f) const {
    if (quantization_segments.empty()) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        f(i, quantization_scale);
      }
      return;
    }
    std::size_t i = 0;
    for (const quantization_segment& s : quantization_segments) {
      for (std::uint64_t c = 0; c < s.values && i < values.size(); ++c, ++i) {
        f(i, s.scale);
      }
    }
  }

  //! @brief Checks every invariant above. O(nnz).
  //! @throws std::invalid_argument naming the first violated invariant and its values.
  void validate() const {
    if (values_type == value_type::quantized) {
      detail::require(valid_quantization_levels(quantization_levels), "quantized message levels ",
                      quantization_levels, " outside [1, ", max_quantization_levels, "]");
      validate_segments();
      for_each_quantization_scale([&](std::size_t i, float scale) {
        detail::require(quantization_code(values[i], scale, quantization_levels).has_value(),
                        "quantized message value ", values[i], " at position ", i, " is not scale ",
                        scale, " x j / ", quantization_levels,
                        " for an integer |j| <= ", quantization_levels);
      });
    } else {
      detail::require(quantization_segments.empty(), "message of value type ",
                      to_string(values_type), " carries ", quantization_segments.size(),
                      " quantization segments");
    }
    if (dense) {
      detail::require(indices.empty(), "dense message carries ", indices.size(), " indices");
      detail::require(values.size() == dense_length_elements, "dense message has ", values.size(),
                      " values for dense length ", dense_length_elements);
      return;
    }
    detail::require(dense_length_elements <= max_sparse_dense_length_elements,
                    "sparse message dense length ", dense_length_elements,
                    " exceeds the 32-bit index limit ", max_sparse_dense_length_elements);
    detail::require(indices.size() == values.size(), "sparse message has ", indices.size(),
                    " indices but ", values.size(), " values");
    detail::require(values.size() <= dense_length_elements, "sparse message has ", values.size(),
                    " values for dense length ", dense_length_elements);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      detail::require(indices[i] < dense_length_elements, "index ", indices[i], " at position ", i,
                      " is not below the dense length ", dense_length_elements);
      detail::require(i == 0 || indices[i - 1] < indices[i],
                      "indices not strictly ascending at position ", i, ": ",
                      i == 0 ? 0 : indices[i - 1], " then ", indices[i]);
    }
  }

  //! @brief The quantization's scale invariants: `quantization_scale` valid without segments;
  //! with them, every segment's count in [1, max_quantization_segment_values] and scale valid,
  //! the counts summing to nnz. O(segments).
  //! @throws std::invalid_argument naming the segment and its count or scale.
  void validate_segments() const {
    if (quantization_segments.empty()) {
      detail::require(valid_quantization_scale(quantization_scale), "quantized message scale ",
                      quantization_scale, " is not finite and >= 2^-111");
      return;
    }
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < quantization_segments.size(); ++s) {
      const quantization_segment& seg = quantization_segments[s];
      detail::require(seg.values >= 1 && seg.values <= max_quantization_segment_values,
                      "quantization segment ", s, " has ", seg.values, " values, outside [1, ",
                      max_quantization_segment_values, "]");
      detail::require(valid_quantization_scale(seg.scale), "quantization segment ", s, " scale ",
                      seg.scale, " is not finite and >= 2^-111");
      total += seg.values;
    }
    detail::require(total == values.size(), "quantization segments hold ", total,
                    " values, the message carries ", values.size());
  }
};

//! @brief Writes the message's values into `dense` (length must equal the message's dense
//! length): selected positions get their value, all others zero. O(n + nnz).
//! @throws std::invalid_argument if the lengths differ.
inline void decompress(const sparse_message& m, std::span<float> dense) {
  detail::require(dense.size() == m.dense_length_elements, "decompress: output has ", dense.size(),
                  " elements, message dense length is ", m.dense_length_elements);
  if (m.dense) {
    std::copy(m.values.begin(), m.values.end(), dense.begin());
    return;
  }
  std::fill(dense.begin(), dense.end(), 0.0f);
  for (std::size_t i = 0; i < m.indices.size(); ++i) {
    dense[m.indices[i]] = m.values[i];
  }
}

//! @brief Adds `scale * value` of every carried element into `dense` (the aggregation a
//! receiver does: sum the workers' messages, then average with scale = 1/W). O(nnz).
//! @throws std::invalid_argument if the lengths differ.
inline void accumulate(const sparse_message& m, std::span<float> dense, float scale = 1.0f) {
  detail::require(dense.size() == m.dense_length_elements, "accumulate: output has ", dense.size(),
                  " elements, message dense length is ", m.dense_length_elements);
  if (m.dense) {
    for (std::size_t i = 0; i < m.values.size(); ++i) {
      dense[i] += scale * m.values[i];
    }
    return;
  }
  for (std::size_t i = 0; i < m.indices.size(); ++i) {
    dense[m.indices[i]] += scale * m.values[i];
  }
}

} // namespace gradcomp
