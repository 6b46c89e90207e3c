// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::pipeline's checkpoint: detail::pipeline_shape (layer sizes, parts, scope,
//! momentum; checked on load), and what save_state() writes in which order and how
//! load_state() reads it all before it changes anything (detail::save_pipeline,
//! detail::load_pipeline).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/detail/feedback_state.hpp>
#include <gradcomp/pipeline/detail/layer_slots.hpp>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief A pipeline's shape as its checkpoint records it: the layer sizes (forward order), the
//! parts per rank, whether the scope is per group, and the momentum.
struct pipeline_shape {
  std::span<const std::size_t> numel;
  std::size_t parts = 1;
  bool per_group = false;
  float momentum = 0.0f;

  //! Writes the pipeline's tag and the shape.
  void save_state(state_writer& w) const {
    w.tag("pipeline");
    w.u64(numel.size());
    for (const std::size_t n : numel) {
      w.u64(n);
    }
    w.u64(parts);
    w.flag(per_group);
    w.f32(momentum);
  }
  //! Reads what save_state() wrote and checks it against this shape.
  //! @throws state_error naming what differs.
  void expect(state_reader& r) const {
    r.expect_tag("pipeline");
    r.expect_u64("pipeline layers", numel.size());
    for (std::size_t l = 0; l < numel.size(); ++l) {
      r.expect_u64(concat("pipeline layer ", l, " elements"), numel[l]);
    }
    r.expect_u64("pipeline parts per rank", parts);
    if (r.flag("pipeline compression scope") != per_group) {
      throw state_error("gradcomp state: the checkpoint's compression scope differs from this "
                        "pipeline's (per_layer vs per_group)");
    }
    expect_momentum(r, "pipeline momentum", momentum);
  }
};

//! The shape `feedback` records, with the slots `slots` (layer sizes, parts). O(1).
template <class Compressor>
[[nodiscard]] pipeline_shape shape_of(const layer_slots& slots,
                                      const feedback_state<Compressor>& feedback) noexcept {
  return {slots.numel(), slots.parts(), feedback.per_group(), feedback.momentum()};
}

//! @brief pipeline::save_state: the shape, the prototype, the grouping and re-planning status
//! (`replan`, a detail::replanning), then every slot's error feedback (per_layer), or every
//! group's compressors (of `iteration`, a detail::iteration_engine) then the residuals and
//! velocities (per_group). O(total elements).
template <class Compressor, class Replanning, class Iteration>
void save_pipeline(state_writer& w,
                   const layer_slots& slots,
                   const feedback_state<Compressor>& feedback,
                   const Replanning& replan,
                   const Iteration& iteration) {
  shape_of(slots, feedback).save_state(w);
  feedback.prototype().save_state(w);
  replan.save_state(w);
  for (const auto& f : feedback.slot_feedback()) {
    f.save_state(w);
  }
  if (feedback.per_group()) {
    for (const auto& state : iteration.groups()) {
      for (const Compressor& c : state.compressors) {
        c.save_state(w);
      }
    }
    feedback.group_buffers().save_state(w);
  }
}

//! @brief pipeline::load_state: reads what save_pipeline() wrote, checking the shape and the
//! grouping, into copies (the error feedback) and new group state (the per-group compressors
//! start from the current prototype), checks that the reader's payload ends, and only then
//! commits to `feedback`, `replan` and `iteration`: all or nothing. O(total elements); peak
//! memory about twice the residuals and velocities, plus the new group buffers.
//! @throws state_error naming what differs or is invalid; nothing changed then.
template <class Compressor, class Replanning, class Iteration>
void load_pipeline(state_reader& r,
                   const layer_slots& slots,
                   feedback_state<Compressor>& feedback,
                   Replanning& replan,
                   Iteration& iteration) {
  shape_of(slots, feedback).expect(r);
  Compressor prototype = feedback.prototype();
  prototype.load_state(r);
  auto plan = replan.read_state(r, slots.layers());
  std::vector<error_feedback<Compressor>> slot_feedback = feedback.slot_feedback();
  for (auto& f : slot_feedback) {
    f.load_state(r);
  }
  auto layout = iteration.layout_of(plan.grouping, feedback);
  std::pair<std::vector<float>, std::vector<float>> buffers;
  if (feedback.per_group()) {
    for (auto& state : layout.groups) {
      for (Compressor& c : state.compressors) {
        c = feedback.prototype();
        c.load_state(r);
      }
    }
    buffers = feedback.group_buffers().read_state(r);
  }
  r.require_end(); // a pipeline's state is a whole payload (gradcomp::load_state)
  // everything read: commit
  feedback.commit(std::move(prototype), std::move(slot_feedback), std::move(buffers));
  replan.commit(std::move(plan));
  iteration.adopt(std::move(layout), feedback.per_group());
}

} // namespace gradcomp::detail
