// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::two_segment: S4's segment fusion, the layer list split once into
//! two fused messages at the split point the model predicts best.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/detail/backward_view.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <array>
#include <cstddef>

namespace gradcomp::schedule {

//! @brief Two groups [0, k) and [k, L) in backward order, k in [1, L-1] minimising the
//! simulated t_iter (gradcomp::schedule::simulate; the smallest such k on ties). One layer: the
//! single group. O(L^2) (L - 1 simulations); deterministic.
//! @throws std::invalid_argument as simulate().
[[nodiscard]] inline grouping two_segment(const layer_profile& profile, const cost_model& model) {
  const detail::backward_view view(profile, model);
  const std::size_t n = view.size();
  if (n == 1) {
    return single(1);
  }
  std::size_t best_split = 1;
  double best = 0.0;
  for (std::size_t k = 1; k < n; ++k) {
    const std::array<std::size_t, 2> ends{k, n};
    const double t = view.t_iter(ends);
    if (k == 1 || t < best) {
      best = t;
      best_split = k;
    }
  }
  return {{0, best_split}, {best_split, n}};
}

} // namespace gradcomp::schedule
