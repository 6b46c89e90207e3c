// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::mgwfbp: the MG-WFBP merge rule (Shi, Chu, Li, INFOCOM 2019 /
//! TPDS 2021; docs/references.md [MGWFBP]) as its PyTorch code applies it (repository
//! HKBU-HPML/MG-WFBP, _generate_groups_mgwfbp; docs/planner.md, "The strategies").
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/detail/backward_view.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <cstddef>
#include <vector>

namespace gradcomp::schedule {

//! @brief The MG-WFBP rule. Scan l = L .. 2 (backward positions p = 0 .. L-2); layer l's
//! current group is the group holding p (layers merged into it so far), layer l-1 is
//! position p+1 as its own group. With tau_c(l) and t_c(l) the start and duration of the
//! group's message and r the time layer l-1's message would be ready (its compression end;
//! its backward end without compression), all simulated with the groups so far:
//! if r < tau_c(l) + t_c(l) (the group's message is not finished when l-1 is ready) and either
//! tau_c(l) > r (it has not started yet) or r - tau_c(l) < a, layer l-1 joins the group;
//! otherwise the group is closed. a is the startup cost of a message, T(bytes of 0 elements).
//! Each decision re-simulates the groups up to p+1 (the code's recomputation of tau_c).
//! Not optimal (docs/planner.md, "A counterexample to the greedy rules"; see optimal()). O(L^2);
//! deterministic.
//! @throws std::invalid_argument as simulate().
[[nodiscard]] inline grouping mgwfbp(const layer_profile& profile, const cost_model& model) {
  const detail::backward_view view(profile, model);
  const std::size_t n = view.size();
  const double startup = view.communication_seconds(view.bytes(0));
  std::vector<std::size_t> ends; // decided group ends, then the open group and l-1 alone
  for (std::size_t p = 0; p + 1 < n; ++p) {
    const std::size_t closed = ends.size();
    ends.push_back(p + 1);    // the open group holding p ends at p + 1
    ends.push_back(p + 2);    // layer l-1 alone
    double tau_c = 0.0;       // the group's message starts
    double message_end = 0.0; // tau_c(l) + t_c(l)
    double ready = 0.0;
    std::size_t index = 0;
    view.run(
        ends, [](std::size_t, double, double) {},
        [&](const detail::group_step& s) {
          if (index == closed) {
            tau_c = s.communicate_start;
            message_end = s.communicate_end;
          } else if (index == closed + 1) {
            ready = s.compress_end;
          }
          ++index;
        });
    ends.resize(closed);
    const bool merge = ready < message_end && (tau_c > ready || ready - tau_c < startup);
    if (!merge) {
      ends.push_back(p + 1);
    }
  }
  ends.push_back(n);
  return grouping_from_ends(ends, n);
}

} // namespace gradcomp::schedule
