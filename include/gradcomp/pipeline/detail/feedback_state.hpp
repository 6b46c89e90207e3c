// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::feedback_state: the pipeline's error feedback, per (part, layer) or per
//! (part, group), and what acts on it between iterations: residual and velocity access,
//! rescaling, dropping non-finite values, giving sent values back, density and factor-masking
//! control (detail::load_pipeline reads and restores its checkpoint state).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/compression_scope.hpp>
#include <gradcomp/pipeline/detail/group_feedback.hpp>
#include <gradcomp/pipeline/detail/group_layout.hpp>
#include <gradcomp/pipeline/detail/layer_slots.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief The pipeline's error feedback: compression_scope::per_layer, one gradcomp::
//! error_feedback per (part, layer) slot and the slot's last message; per_group, every part's
//! residual and velocity of all layers side by side (detail::group_feedback; the per-group
//! compressors live in the groups' detail::group_state, which the operations that need them
//! take). Also the prototype compressor, the momentum and its factor masking. Training thread
//! only; all but the compression is for between iterations.
//! @tparam Compressor the pipeline's gradcomp::compressor.
template <compressor Compressor>
class feedback_state {
public:
  using group_type = group_state<Compressor>; //!< a group's state (its per-group compressors)

  //! @brief The error feedback of every slot of `slots` (which must outlive this object) in
  //! `scope`, started from `prototype`, with momentum correction `mc`. Memory: 4n bytes of
  //! residual per layer and part (8n with momentum correction; per group add 4n of staging).
  //! @throws std::invalid_argument if mc is refused by gradcomp::error_feedback, or (per
  //! group) the buffers' size overflows std::size_t.
  feedback_state(const layer_slots& slots,
                 const Compressor& prototype,
                 momentum_correction mc,
                 compression_scope scope)
      : slots_(slots), scope_(scope), prototype_(prototype),
        momentum_(static_cast<float>(mc.momentum)), factor_masking_(mc.factor_masking) {
    if (scope_ == compression_scope::per_layer) {
      feedback_.reserve(slots.count());
      for (std::size_t part = 0; part < slots.parts(); ++part) {
        for (const std::size_t n : slots.numel()) {
          feedback_.emplace_back(n, prototype, mc);
        }
      }
    } else {
      check_momentum_correction<Compressor>(mc);
      group_feedback_ = group_feedback(slots.numel(), slots.parts(), momentum_ > 0.0f);
    }
    layer_messages_.resize(slots.count());
  }
  feedback_state(const feedback_state&) = delete;
  feedback_state& operator=(const feedback_state&) = delete;

  //! The scope of error feedback and selection. O(1).
  [[nodiscard]] compression_scope scope() const noexcept { return scope_; }
  //! Whether the scope is compression_scope::per_group. O(1).
  [[nodiscard]] bool per_group() const noexcept { return scope_ == compression_scope::per_group; }
  //! The momentum of the correction (0 = off). O(1).
  [[nodiscard]] float momentum() const noexcept { return momentum_; }
  //! The compressor every new layer's or group's state starts from. O(1).
  [[nodiscard]] const Compressor& prototype() const noexcept { return prototype_; }

  //! @brief per_layer: compresses gradient `g` of `layer` of `part` with the slot's error
  //! feedback into the slot's message. O(n) plus the compressor's cost.
  //! @throws gradcomp::nonfinite_error (nonfinite_policy::raise) naming the layer, the part and
  //! the index within the layer (layer_slots::throw_nonfinite); the residual then holds the
  //! accumulation.
  selection_stats compress_layer(std::size_t part, std::size_t layer, std::span<const float> g) {
    const std::size_t slot = slots_.slot(part, layer);
    try {
      return feedback_[slot].compress(g, layer_messages_[slot]);
    } catch (const nonfinite_error& e) {
      slots_.throw_nonfinite(e, part, layer, e.index());
    }
  }
  //! per_group: copies gradient `g` of `layer` of `part` into the staging buffer. O(n).
  void stage(std::size_t part, std::size_t layer, std::span<const float> g) {
    group_feedback_.stage(part, layer, g);
  }
  //! @brief per_layer: `state`'s message of `part` becomes the concatenation of its layers'
  //! messages of that part (detail::concatenate_layers; `offset_of` by forward index). O(nnz).
  //! @throws std::invalid_argument as append_concatenated().
  void
  concatenate(group_type& state, std::size_t part, std::span<const std::uint64_t> offset_of) const {
    concatenate_layers(
        state.messages[part], state,
        std::span<const sparse_message>(layer_messages_).subspan(part * slots_.layers()),
        offset_of);
  }
  //! @brief per_group: compresses `state`'s staged gradient of `part` with the group's
  //! compressor, residual and velocity of that part into its message of that part. O(n) plus
  //! the compressor's cost.
  //! @throws whatever the compressor throws (nonfinite_error: its index within the group).
  selection_stats compress_group(group_type& state, std::size_t part) {
    return group_feedback_.compress(state.compressors[part], part, state.layers.front(),
                                    static_cast<std::size_t>(state.numel), momentum_,
                                    factor_masking_, state.messages[part]);
  }

  //! @brief The error feedback of `layer` (one part per rank), per_layer only. O(1).
  //! @throws std::out_of_range if there are several parts per rank, layer is out of range or
  //! the scope is per_group.
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t layer) {
    if (slots_.parts() != 1) {
      throw std::out_of_range("pipeline: feedback(layer) with several parts per rank: use "
                              "feedback(part, layer)");
    }
    return feedback_.at(layer);
  }
  //! @brief The error feedback of `layer` of `part`, per_layer only. O(1).
  //! @throws std::out_of_range if part or layer is out of range or the scope is per_group.
  [[nodiscard]] error_feedback<Compressor>& feedback(std::size_t part, std::size_t layer) {
    if (part >= slots_.parts() || layer >= slots_.layers()) {
      throw std::out_of_range("pipeline: feedback(part, layer) out of range");
    }
    return feedback_.at(slots_.slot(part, layer));
  }
  //! The residual of `layer` of `part`, either scope. O(1).
  //! @throws std::invalid_argument if part or layer is out of range.
  [[nodiscard]] std::span<const float> residual(std::size_t part, std::size_t layer) const {
    slots_.require_slot(part, layer);
    if (!per_group()) {
      return feedback_[slots_.slot(part, layer)].residual();
    }
    return group_feedback_.residual(part, layer, slots_.numel(layer));
  }
  //! The velocity of `layer` of `part` (empty without momentum correction), either scope. O(1).
  //! @throws std::invalid_argument if part or layer is out of range.
  [[nodiscard]] std::span<const float> velocity(std::size_t part, std::size_t layer) const {
    slots_.require_slot(part, layer);
    if (!per_group()) {
      return feedback_[slots_.slot(part, layer)].velocity();
    }
    return group_feedback_.velocity(part, layer, slots_.numel(layer));
  }

  //! Multiplies every residual and velocity by `factor`. O(total elements).
  void rescale(float factor) noexcept {
    for (auto& f : feedback_) {
      f.rescale(factor);
    }
    group_feedback_.rescale(factor);
  }
  //! Zeroes every NaN and infinity of the residuals and velocities; returns how many.
  //! O(total elements).
  std::size_t drop_non_finite() noexcept {
    std::size_t count = group_feedback_.drop_non_finite();
    for (auto& f : feedback_) {
      count += f.drop_non_finite();
    }
    return count;
  }
  //! @brief Gives every value of the last messages back to the residual it came from: each
  //! slot's message (per_layer), or each of `groups`' messages (per_group). O(elements sent).
  //! @returns how many. @throws std::invalid_argument if a slot's message does not fit its
  //! layer (error_feedback::return_sent; e.g. one never built: the in-place path builds none).
  std::size_t return_sent(std::span<const group_type> groups) {
    std::size_t count = 0;
    if (!per_group()) {
      for (std::size_t slot = 0; slot < feedback_.size(); ++slot) {
        count += feedback_[slot].return_sent(layer_messages_[slot]);
      }
      return count;
    }
    for (const group_type& state : groups) {
      for (std::size_t p = 0; p < slots_.parts(); ++p) {
        count += group_feedback_.add_sent(p, state.layers.front(),
                                          static_cast<std::size_t>(state.numel), state.messages[p]);
      }
    }
    return count;
  }
  //! @brief One part per rank, pipeline_policy::selecting_transport: for each of `groups` that
  //! holds a global selection (then cleared), its sent values outside it go back to the
  //! residuals they came from (per layer or per group; `offset_of` by forward index).
  //! O(nnz + k) per group. @returns how many.
  //! @throws std::invalid_argument if a layer's message does not fit its layer.
  std::size_t return_unselected(std::span<group_type> groups,
                                std::span<const std::uint64_t> offset_of) {
    std::size_t count = 0;
    for (group_type& state : groups) {
      if (!state.has_selection) {
        continue;
      }
      state.has_selection = false;
      const std::span<const std::uint32_t> g(state.selected);
      if (!per_group()) {
        for (const std::size_t l : state.layers) {
          count += feedback_[l].return_unselected(layer_messages_[l], g, offset_of[l]);
        }
      } else {
        count += group_feedback_.add_unselected(
            state.layers.front(), static_cast<std::size_t>(state.numel), state.messages.front(), g);
      }
    }
    return count;
  }

  //! @brief Sets density `d` on the prototype, every slot's compressor and every compressor of
  //! `groups`. O(layers x parts + groups x parts).
  //! @throws std::invalid_argument naming `d` if it is outside (0, 1] (nothing changes).
  void set_density(double d, std::span<group_type> groups) requires density_compressor<Compressor> {
    check_density(d);
    prototype_.set_density(d);
    for (auto& f : feedback_) {
      f.compressor().set_density(d);
    }
    for (group_type& state : groups) {
      for (Compressor& c : state.compressors) {
        c.set_density(d);
      }
    }
  }
  //! @brief per_layer: one density per layer (every part of a layer gets its layer's).
  //! O(layers x parts). @throws std::invalid_argument if the scope is per_group, if there is
  //! not one density per layer, or naming the first density outside (0, 1]; nothing changes.
  void
  set_layer_densities(std::span<const double> densities) requires density_compressor<Compressor> {
    require(!per_group(), "pipeline: set_layer_densities() needs compression_scope::per_layer "
                          "(per group, use set_density)");
    require(densities.size() == slots_.layers(), "pipeline: ", densities.size(), " densities for ",
            slots_.layers(), " layers");
    for (const double d : densities) {
      check_density(d);
    }
    for (std::size_t slot = 0; slot < feedback_.size(); ++slot) {
      feedback_[slot].compressor().set_density(densities[slot % slots_.layers()]);
    }
  }
  //! Switches momentum factor masking for every layer's (or group's) error feedback. O(slots).
  void set_factor_masking(bool on) noexcept {
    factor_masking_ = on;
    for (auto& f : feedback_) {
      f.set_factor_masking(on);
    }
  }

  //! The error feedback of every slot, by slot (per_layer; empty per_group). O(1).
  [[nodiscard]] const std::vector<error_feedback<Compressor>>& slot_feedback() const noexcept {
    return feedback_;
  }
  //! The residual and velocity buffers (per_group; empty per_layer). O(1).
  [[nodiscard]] const group_feedback& group_buffers() const noexcept { return group_feedback_; }
  //! @brief Takes a loaded checkpoint's state (detail::load_pipeline): the prototype, every
  //! slot's error feedback (as slot_feedback()) and, per_group, the buffers that
  //! group_feedback::read_state() returned. O(1); throws only what moving a Compressor throws.
  void commit(Compressor prototype,
              std::vector<error_feedback<Compressor>> feedback,
              std::pair<std::vector<float>, std::vector<float>> buffers) {
    prototype_ = std::move(prototype);
    feedback_ = std::move(feedback);
    if (per_group()) {
      group_feedback_.adopt(std::move(buffers));
    }
  }

private:
  const layer_slots& slots_;
  compression_scope scope_;
  Compressor prototype_;
  float momentum_;
  bool factor_masking_;                              // momentum_correction::factor_masking
  std::vector<error_feedback<Compressor>> feedback_; // per_layer: one per slot
  group_feedback group_feedback_;                    // per_group: parts x all layers
  std::vector<sparse_message> layer_messages_;       // per slot: its last message (per_layer)
};

} // namespace gradcomp::detail
