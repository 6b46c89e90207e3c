// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The dynamic programs behind gradcomp::schedule::optimal (E1 and E2 of docs/planner.md,
//! "The exact program (E1 and E2)", with the compression stream of gradcomp's model), and the
//! one-state variant the tests use to show why E2's second coordinate is needed.
#pragma once

#include <gradcomp/schedule/detail/backward_view.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace gradcomp::schedule::detail {

//! What the search found.
struct exact_search_result {
  std::vector<std::size_t> ends;  //!< group end positions of the best grouping found.
  double t_iter_seconds = 0.0;    //!< its t_iter as the search computed it.
  std::size_t max_front_size = 0; //!< most states kept for one prefix (1 for the one-state DP).
};

//! @brief Dynamic program over group end points (backward positions j = 1 .. L).
//!
//! State of a grouping of the prefix [0, j): the pair (a, f), where f is the end of its last
//! message and a is the only other quantity the rest of the iteration depends on:
//! * no compression function: nothing (a = the compute clock K_j = t_f + sum of the prefix's
//!   backward seconds, the same for every grouping of the prefix);
//! * compression on the compute stream: a = the compute clock after the last compression;
//! * compression off it: a = the end of the last compression (the compression stream's end).
//! Appending the group [i, j) of m elements with s = s(m), T = T(bytes(m)) maps (a, f) to
//! a' = a + (K_j - K_i) + s (on), a' = max(K_j, a) + s (off), a' = K_j (no compression), and
//! f' = end(max(a', f)), end(s) = s + T (or, with the model's communication_seconds_after_backward,
//! backward_view::message_end, non-decreasing in s): exactly the simulator's recurrences
//! (backward_view::run).
//!
//! Why keeping the Pareto front is exact (E2). Both maps are non-decreasing in a and in f.
//! Invariant: for every grouping of [0, j), the front kept for j holds a state no later in both
//! coordinates than that grouping's state. It holds for j = 0 (one state). For j > 0, a grouping
//! of [0, j) is a grouping of some [0, i) followed by the group [i, j); by the invariant the
//! front of i holds a state no later than that prefix's state, the (monotone) map of [i, j)
//! keeps it no later, and the sweep below keeps, of all candidates, a state no later than each
//! (it drops only states that another candidate matches or beats in both coordinates). At
//! j = L the least f of the front is therefore <= the t_iter (the final f) of every grouping,
//! and it is the t_iter of the grouping rebuilt from the states' parents: the optimum over all
//! 2^(L-1) groupings. Without compression a' = K_j is the same for every state, so one state
//! per prefix (the least f) carries the invariant: E1 (docs/planner.md). With compression off the
//! compute stream one state is NOT enough (a smaller f can come with a later compression-stream
//! end); the tests show a case, so the front is kept there.
//!
//! `pareto` false keeps only the least-f state (ties: least a): exact only without compression.
//! Cost: O(L^2 W log W) time with W the largest front (1 without compression: O(L^2)), O(L W)
//! memory; deterministic. Float rounding: identical arithmetic to the simulator except the
//! on-stream clock, where a + (K_j - K_i) replaces the per-layer sums (relative 1e-15 or so).
inline exact_search_result exact_search(const backward_view& view, bool pareto) {
  struct point {
    double a = 0.0;
    double f = 0.0;
    std::uint32_t parent_end = 0;   // i: the prefix this state extends
    std::uint32_t parent_index = 0; // index of the extended state in fronts[i]
  };
  const std::size_t n = view.size();
  const bool compressing = static_cast<bool>(view.model().compression_seconds);
  const bool on_stream = view.on_compute_stream();
  std::vector<double> clock(n + 1);
  clock[0] = view.forward_seconds();
  for (std::size_t p = 0; p < n; ++p) {
    clock[p + 1] = clock[p] + view.backward_seconds(p);
  }
  std::vector<std::vector<point>> fronts(n + 1);
  fronts[0].push_back({on_stream ? clock[0] : 0.0, 0.0, 0, 0});
  exact_search_result result;
  result.max_front_size = 1;
  std::vector<point> candidates;
  for (std::size_t j = 1; j <= n; ++j) {
    candidates.clear();
    for (std::size_t i = 0; i < j; ++i) {
      const std::uint64_t m = view.numel(i, j);
      const double s = compressing ? view.compression_seconds(m) : 0.0;
      const message_costs t = view.message(view.bytes(m));
      const std::vector<point>& from = fronts[i];
      for (std::size_t k = 0; k < from.size(); ++k) {
        const point& q = from[k];
        double a = clock[j];
        if (compressing) {
          a = on_stream ? q.a + (clock[j] - clock[i]) + s : std::max(clock[j], q.a) + s;
        }
        candidates.push_back({a, view.message_end(std::max(a, q.f), t),
                              static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(k)});
      }
    }
    std::vector<point>& front = fronts[j];
    if (!pareto || !compressing) { // one state per prefix (E1)
      const auto better = [](const point& x, const point& y) {
        return x.f < y.f || (x.f == y.f && x.a < y.a);
      };
      front.push_back(*std::min_element(candidates.begin(), candidates.end(), better));
      continue;
    }
    // Cheap first cut: drop what the least-f and the least-a candidates dominate (most of
    // the candidates, as fronts are small), then sort the rest and sweep.
    const auto least_f =
        *std::min_element(candidates.begin(), candidates.end(), [](const point& x, const point& y) {
          return x.f < y.f || (x.f == y.f && x.a < y.a);
        });
    const auto least_a =
        *std::min_element(candidates.begin(), candidates.end(), [](const point& x, const point& y) {
          return x.a < y.a || (x.a == y.a && x.f < y.f);
        });
    const auto same = [](const point& x, const point& y) {
      return x.parent_end == y.parent_end && x.parent_index == y.parent_index;
    };
    const auto dominated_by = [&](const point& c, const point& by) {
      return !same(c, by) && by.a <= c.a && by.f <= c.f;
    };
    std::erase_if(candidates, [&](const point& c) {
      return dominated_by(c, least_f) || dominated_by(c, least_a);
    });
    std::sort(candidates.begin(), candidates.end(), [](const point& x, const point& y) {
      if (x.a != y.a) {
        return x.a < y.a;
      }
      if (x.f != y.f) {
        return x.f < y.f;
      }
      return x.parent_end != y.parent_end ? x.parent_end < y.parent_end
                                          : x.parent_index < y.parent_index;
    });
    double smallest_f = std::numeric_limits<double>::infinity();
    for (const point& c : candidates) {
      if (c.f < smallest_f) { // not dominated by a state with a smaller or equal a
        front.push_back(c);
        smallest_f = c.f;
      }
    }
    result.max_front_size = std::max(result.max_front_size, front.size());
  }
  // the least f of the last front (its last point: f decreases along a front)
  std::size_t index = fronts[n].size() - 1;
  result.t_iter_seconds = fronts[n][index].f;
  for (std::size_t j = n; j > 0;) {
    result.ends.push_back(j);
    const point& q = fronts[j][index];
    j = q.parent_end;
    index = q.parent_index;
  }
  std::reverse(result.ends.begin(), result.ends.end());
  return result;
}

} // namespace gradcomp::schedule::detail
