// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The pieces of gradcomp::pipeline's checkpoint that are not error feedback:
//! detail::pipeline_shape (layer sizes, parts, scope, momentum; checked on load) and the
//! grouping in use (detail::save_grouping, detail::load_grouping: validated on load).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

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

//! Writes a grouping: its tag, the group count, each group's [begin, end).
inline void save_grouping(state_writer& w, const schedule::grouping& grouping) {
  w.tag("grouping");
  w.u64(grouping.size());
  for (const schedule::layer_group& g : grouping) {
    w.u64(g.begin);
    w.u64(g.end);
  }
}

//! Reads what save_grouping() wrote, for `layers` layers.
//! @throws state_error if the count is 0 or above `layers`, or the grouping is not valid.
[[nodiscard]] inline schedule::grouping load_grouping(state_reader& r, std::size_t layers) {
  r.expect_tag("grouping");
  const std::uint64_t count = r.u64("grouping size");
  if (count == 0 || count > layers) {
    throw state_error(
        concat("gradcomp state: a grouping of ", count, " groups for ", layers, " layers"));
  }
  schedule::grouping grouping(static_cast<std::size_t>(count));
  for (schedule::layer_group& g : grouping) {
    g.begin = static_cast<std::size_t>(r.u64("group begin"));
    g.end = static_cast<std::size_t>(r.u64("group end"));
  }
  if (!schedule::is_valid_grouping(grouping, layers)) {
    throw state_error(concat("gradcomp state: the checkpoint's grouping of ", count,
                             " groups is not valid for ", layers, " layers"));
  }
  return grouping;
}

} // namespace gradcomp::detail
