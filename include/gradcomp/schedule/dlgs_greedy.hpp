// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::dlgs_greedy: S1's layer-merging scan (Algorithm 2).
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/detail/backward_view.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <cstddef>
#include <vector>

namespace gradcomp::schedule {

//! @brief S1 Algorithm 2: start from per_layer; for l = L down to 2 (backward positions
//! p = 0 .. L-2) tentatively merge layer l into layer l-1 (position p+1 joins the group that
//! holds p), re-simulate the whole iteration, and keep the merge if the simulated t_iter
//! strictly decreases. Greedy, not optimal (docs/planner.md, "A counterexample to the greedy
//! rules"; see optimal()). O(L^2) (L - 1 simulations); deterministic.
//! @throws std::invalid_argument as simulate().
[[nodiscard]] inline grouping dlgs_greedy(const layer_profile& profile, const cost_model& model) {
  const detail::backward_view view(profile, model);
  const std::size_t n = view.size();
  // ends[0 .. closed) are decided; the open group ends at `open_end`; then singletons.
  std::vector<std::size_t> ends(n);
  for (std::size_t p = 0; p < n; ++p) {
    ends[p] = p + 1;
  }
  double current = view.t_iter(ends);
  std::vector<std::size_t> closed;
  std::vector<std::size_t> candidate;
  candidate.reserve(n);
  for (std::size_t p = 0; p + 1 < n; ++p) {
    // the open group is [closed.back() or 0, p + 1); try extending it to p + 2
    candidate.assign(closed.begin(), closed.end());
    for (std::size_t e = p + 2; e <= n; ++e) {
      candidate.push_back(e);
    }
    const double t = view.t_iter(candidate);
    if (t < current) {
      current = t;
    } else {
      closed.push_back(p + 1);
    }
  }
  closed.push_back(n);
  return grouping_from_ends(closed, n);
}

} // namespace gradcomp::schedule
