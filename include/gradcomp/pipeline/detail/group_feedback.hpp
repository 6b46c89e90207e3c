// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::group_feedback: the pipeline's error-feedback buffers for
//! compression_scope::per_group (every part's staged gradient, residual and momentum-correction
//! velocity, all layers side by side), and the operations on them that do not depend on the
//! grouping: staging, compressing a group's range, giving values back, rescaling, checkpoints.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief compression_scope::per_group's buffers: for each of `parts` parts, the staged
//! gradient, the residual and (with momentum correction) the velocity of every layer, in
//! forward order; part p's layer l starts at element p x total + (elements of layers 0..l-1).
//! A group of consecutive layers is then one contiguous range of each buffer, whatever the
//! grouping: a re-plan keeps the residuals element by element. Empty (no memory) for
//! compression_scope::per_layer, where each layer's gradcomp::error_feedback holds its own.
//! Caller's thread only.
class group_feedback {
public:
  group_feedback() = default;

  //! Buffers for the layers of `numel` (forward order) and `parts` parts, zeroed; a velocity
  //! when `with_velocity`. Memory: 8 or 12 bytes per element and part.
  //! @throws std::invalid_argument if parts x elements x 4 bytes overflow std::size_t.
  group_feedback(std::span<const std::size_t> numel, std::size_t parts, bool with_velocity)
      : first_(numel.size()) {
    for (std::size_t l = 0; l < numel.size(); ++l) {
      first_[l] = total_;
      total_ += numel[l];
    }
    require(parts >= 1 && total_ <= std::numeric_limits<std::size_t>::max() / parts / sizeof(float),
            "pipeline: ", parts, " parts of ", total_, " elements do not fit in memory");
    const auto all = static_cast<std::size_t>(total_) * parts;
    staged_.assign(all, 0.0f);
    residual_.assign(all, 0.0f);
    if (with_velocity) {
      velocity_.assign(all, 0.0f);
    }
  }

  //! Where layer `layer` of `part` starts in each buffer. O(1).
  [[nodiscard]] std::size_t offset(std::size_t part, std::size_t layer) const noexcept {
    return static_cast<std::size_t>(total_) * part + static_cast<std::size_t>(first_[layer]);
  }

  //! Copies layer `layer`'s gradient of `part` into the staging buffer. O(n).
  void stage(std::size_t part, std::size_t layer, std::span<const float> g) {
    std::copy(g.begin(), g.end(),
              staged_.begin() + static_cast<std::ptrdiff_t>(offset(part, layer)));
  }

  //! The residual of the `n` elements from layer `first_layer` of `part` on. O(1).
  [[nodiscard]] std::span<const float>
  residual(std::size_t part, std::size_t first_layer, std::size_t n) const {
    return std::span<const float>(residual_).subspan(offset(part, first_layer), n);
  }
  //! The velocity of the same range; empty without momentum correction. O(1).
  [[nodiscard]] std::span<const float>
  velocity(std::size_t part, std::size_t first_layer, std::size_t n) const {
    if (velocity_.empty()) {
      return {};
    }
    return std::span<const float>(velocity_).subspan(offset(part, first_layer), n);
  }

  //! One error-feedback call of `c` on the `n` staged elements from layer `first_layer` of
  //! `part` on (a group's range) with their residual and velocity (detail::
  //! compress_with_feedback), into `message`. O(n) plus the compressor's cost.
  //! @throws whatever the compressor throws (nonfinite_error under nonfinite_policy::raise).
  template <compressor Compressor>
  selection_stats compress(Compressor& c,
                           std::size_t part,
                           std::size_t first_layer,
                           std::size_t n,
                           float momentum,
                           bool factor_masking,
                           sparse_message& message) {
    const std::size_t begin = offset(part, first_layer);
    std::span<float> u; // empty without momentum correction
    if (!velocity_.empty()) {
      u = std::span<float>(velocity_.data() + begin, n);
    }
    return compress_with_feedback(c, std::span<float>(residual_.data() + begin, n), u,
                                  std::span<const float>(staged_.data() + begin, n), momentum,
                                  factor_masking, message);
  }

  //! detail::add_sent on the range's residual: `message`'s values back where they came from.
  //! Returns how many. O(nnz).
  std::size_t add_sent(std::size_t part,
                       std::size_t first_layer,
                       std::size_t n,
                       const sparse_message& message) noexcept {
    return detail::add_sent(std::span<float>(residual_.data() + offset(part, first_layer), n),
                            message);
  }
  //! detail::add_unselected on part 0's range: the values of `message` outside `selected`
  //! back to the residual. Returns how many. O(nnz + |selected|).
  std::size_t add_unselected(std::size_t first_layer,
                             std::size_t n,
                             const sparse_message& message,
                             std::span<const std::uint32_t> selected) noexcept {
    return detail::add_unselected(std::span<float>(residual_.data() + offset(0, first_layer), n),
                                  message, selected, 0);
  }

  //! Multiplies every residual and velocity by `factor`. O(elements).
  void rescale(float factor) noexcept {
    scale_in_place(residual_, factor);
    scale_in_place(velocity_, factor);
  }
  //! Zeroes every NaN and infinity of the residuals and velocities; returns how many.
  std::size_t drop_non_finite() noexcept {
    return zero_non_finite(residual_) + zero_non_finite(velocity_);
  }

  //! The residuals and velocities as load_state() reads them back (empty for per_layer).
  void save_state(state_writer& w) const {
    w.floats(residual_);
    w.floats(velocity_);
  }
  //! What save_state() wrote, read into new buffers (adopt() them once everything else of the
  //! checkpoint is read). @throws state_error naming what does not fit.
  [[nodiscard]] std::pair<std::vector<float>, std::vector<float>>
  read_state(state_reader& r) const {
    std::pair<std::vector<float>, std::vector<float>> s(residual_.size(), velocity_.size());
    r.floats_into("pipeline residuals", s.first);
    r.floats_into("pipeline velocities", s.second);
    return s;
  }
  //! Takes the buffers read_state() returned. Never throws.
  void adopt(std::pair<std::vector<float>, std::vector<float>>&& s) noexcept {
    residual_ = std::move(s.first);
    velocity_ = std::move(s.second);
  }

private:
  std::uint64_t total_ = 0;          // elements of all layers (one part)
  std::vector<std::uint64_t> first_; // each layer's first element within a part
  std::vector<float> staged_, residual_, velocity_;
};

} // namespace gradcomp::detail
