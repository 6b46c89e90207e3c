// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::optimal: the grouping with the least simulated t_iter, exactly
//! (E1 and E2, docs/planner.md, "The exact program (E1 and E2)"), where the greedy rules (S1
//! Algorithm 2, MG-WFBP) are not optimal.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/detail/backward_view.hpp>
#include <gradcomp/schedule/detail/exact_search.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

namespace gradcomp::schedule {

//! @brief A grouping whose simulated t_iter (gradcomp::schedule::simulate) is the least of all
//! 2^(L-1) groupings of consecutive layers, for any cost functions (not necessarily monotone or
//! affine) and both placements.
//!
//! Algorithm: a dynamic program over group end points.
//! * No compression function: E1, one state per prefix (the least end of its last
//!   message): F[j] = min over i < j of max(K_j, F[i]) + T(bytes of [i, j)), K_j the compute
//!   clock after position j. O(L^2) time, O(L) memory.
//! * With compression, on the compute stream: E2, the Pareto front of (compute clock after the
//!   last compression, end of the last message) per prefix.
//! * With compression off the compute stream (serialized on its own stream, as in this model):
//!   the same Pareto DP over (end of the last compression, end of the last message). One state
//!   is not enough there: a grouping with an earlier last message can have a later compression
//!   stream (test "one state per prefix is not exact with a compression stream").
//! Optimality argument: see detail::exact_search (both state maps are non-decreasing in each
//! coordinate, so dominated states never lead to a better end). Time O(L^2 W log W), W the
//! largest front (ResNet-50's 161 tensors: see benchmark/schedule/plan.cpp); deterministic
//! (ties go to the earliest state in (a, f, parent) order).
//! @throws std::invalid_argument as simulate().
[[nodiscard]] inline grouping optimal(const layer_profile& profile, const cost_model& model) {
  const detail::backward_view view(profile, model);
  const detail::exact_search_result r = detail::exact_search(view, true);
  return grouping_from_ends(r.ends, view.size());
}

} // namespace gradcomp::schedule
