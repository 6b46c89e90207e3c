// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::simulate: the iteration-time simulator (S1 eqs. 2-7) for any
//! grouping of consecutive layers, in both compression placements, with the timeline of every
//! layer and group.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/detail/backward_view.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcomp::schedule {

//! @brief Times of one group (one message), seconds from the start of the iteration.
struct group_times {
  layer_group layers;                  //!< backward positions [begin, end).
  std::uint64_t numel = 0;             //!< elements of the group.
  std::uint64_t message_bytes = 0;     //!< bytes of its message (cost_model::message).
  double backward_start_seconds = 0.0; //!< its first layer's backward starts.
  double backward_end_seconds = 0.0;   //!< its last layer's backward ends.
  //! its compression starts (see compression_placement).
  double compress_start_seconds = 0.0;
  double compress_end_seconds = 0.0; //!< the message is ready (= compress start if s = 0).
  //! its message starts: once it is ready and the previous message has ended.
  double communicate_start_seconds = 0.0;
  //! its message has arrived (start + T(message_bytes), or as cost_model says after backward).
  double communicate_end_seconds = 0.0;
};

//! @brief Times of one layer: its own backward, and its group's compression and message.
struct layer_times {
  std::size_t group = 0; //!< index into timeline::groups.
  //! this layer's backward starts.
  double backward_start_seconds = 0.0;
  //! this layer's backward ends (its gradient is ready).
  double backward_end_seconds = 0.0;
  //! its group's compression starts (group_times::compress_start_seconds).
  double compress_start_seconds = 0.0;
  //! its group's message is ready (group_times::compress_end_seconds).
  double compress_end_seconds = 0.0;
  //! its group's message starts (group_times::communicate_start_seconds).
  double communicate_start_seconds = 0.0;
  //! its group's message has arrived (group_times::communicate_end_seconds).
  double communicate_end_seconds = 0.0;
};

//! @brief The simulated iteration.
struct timeline {
  double t_iter_seconds = 0.0;     //!< end of the last message (S1 eq. 7).
  std::vector<group_times> groups; //!< in send (backward) order.
  std::vector<layer_times> layers; //!< by forward index, as layer_profile::layers.
};

//! @brief Simulates one iteration of `profile` under `model` with the layers merged as in `g`.
//!
//! The recurrences (S1 eqs. 2-5 and 7, groups as in eq. 6 and Algorithm 2): a compute clock
//! starts at t_f = profile.forward_seconds; groups are taken in backward order; for each group
//! the clock advances by each of its layers' backward_seconds in turn; its compression takes
//! s = model.compression_seconds(numel of the group) (0 if empty);
//! * compression on the compute stream (S1): the clock advances by s and the group is ready at
//!   the clock, so the next layer's backward waits for the compression;
//! * off the compute stream: compressions run one at a time, in order, on their own stream:
//!   start = max(clock, end of the previous compression); ready at its end;
//!
//! the message of model.message.bytes(numel) bytes starts at max(ready, end of the previous
//! message) (one channel, in order) and takes model.communication_seconds(bytes) (with
//! model.communication_seconds_after_backward: that after backward, see cost_model); t_iter is
//! the end of the last message. O(L) time and memory, 2 or 3 cost-function calls per group;
//! deterministic (the same arithmetic in the same order as every strategy's evaluation).
//! @throws std::invalid_argument if the profile, the model or the grouping is invalid, or a
//! cost function returns a value that is not finite and >= 0.
[[nodiscard]] inline timeline
simulate(const layer_profile& profile, const cost_model& model, const grouping& g) {
  const detail::backward_view view(profile, model);
  validate(g, view.size());
  std::vector<std::size_t> ends;
  ends.reserve(g.size());
  for (const layer_group& group : g) {
    ends.push_back(group.end);
  }
  const std::size_t n = view.size();
  timeline result;
  result.groups.reserve(g.size());
  result.layers.resize(n);
  result.t_iter_seconds = view.run(
      ends,
      [&](std::size_t p, double start, double end) {
        layer_times& t = result.layers[forward_index(p, n)];
        t.group = result.groups.size();
        t.backward_start_seconds = start;
        t.backward_end_seconds = end;
      },
      [&](const detail::group_step& s) {
        const layer_group& group = g[result.groups.size()];
        result.groups.push_back({group, s.numel, s.bytes, s.backward_start, s.backward_end,
                                 s.compress_start, s.compress_end, s.communicate_start,
                                 s.communicate_end});
        for (std::size_t p = group.begin; p < group.end; ++p) {
          layer_times& t = result.layers[forward_index(p, n)];
          t.compress_start_seconds = s.compress_start;
          t.compress_end_seconds = s.compress_end;
          t.communicate_start_seconds = s.communicate_start;
          t.communicate_end_seconds = s.communicate_end;
        }
      });
  return result;
}

//! @brief t_iter of `g` (simulate(...).t_iter_seconds without building the timeline). O(L).
//! @throws std::invalid_argument as simulate().
[[nodiscard]] inline double
t_iter_seconds(const layer_profile& profile, const cost_model& model, const grouping& g) {
  const detail::backward_view view(profile, model);
  validate(g, view.size());
  std::vector<std::size_t> ends;
  ends.reserve(g.size());
  for (const layer_group& group : g) {
    ends.push_back(group.end);
  }
  return view.t_iter(ends);
}

} // namespace gradcomp::schedule
