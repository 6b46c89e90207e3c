// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::strategy: the merge strategies by name, and plan(), which runs
//! one of them.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/dlgs_greedy.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/mgwfbp.hpp>
#include <gradcomp/schedule/optimal.hpp>
#include <gradcomp/schedule/size_threshold.hpp>
#include <gradcomp/schedule/two_segment.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gradcomp::schedule {

//! @brief The merge strategies, each returning groups of consecutive layers.
enum class strategy {
  per_layer,      //!< every layer alone (plain WFBP).
  single,         //!< one message after backward.
  size_threshold, //!< buckets closed at a byte cap (DDP 25 MiB, Horovod fusion).
  two_segment,    //!< S4: the best single split point.
  dlgs_greedy,    //!< S1 Algorithm 2.
  mgwfbp,         //!< the MG-WFBP rule.
  optimal,        //!< exact dynamic program (E1/E2, docs/planner.md).
};

//! Every strategy, in the order above (the planner's output order).
inline constexpr std::array<strategy, 7> all_strategies{
    strategy::per_layer,   strategy::single, strategy::size_threshold, strategy::two_segment,
    strategy::dlgs_greedy, strategy::mgwfbp, strategy::optimal};

//! The strategy's name, as in the enum ("per_layer", ..., "optimal").
[[nodiscard]] constexpr std::string_view name(strategy s) noexcept {
  switch (s) {
  case strategy::per_layer:
    return "per_layer";
  case strategy::single:
    return "single";
  case strategy::size_threshold:
    return "size_threshold";
  case strategy::two_segment:
    return "two_segment";
  case strategy::dlgs_greedy:
    return "dlgs_greedy";
  case strategy::mgwfbp:
    return "mgwfbp";
  case strategy::optimal:
    return "optimal";
  }
  return "?";
}

//! The strategy called `text`, or nothing.
[[nodiscard]] constexpr std::optional<strategy> strategy_from_name(std::string_view text) noexcept {
  for (const strategy s : all_strategies) {
    if (name(s) == text) {
      return s;
    }
  }
  return std::nullopt;
}

//! Parameters of the strategies that need more than the profile and the model.
struct plan_options {
  std::uint64_t bucket_bytes = ddp_bucket_bytes; //!< size_threshold's cap.
};

//! @brief The grouping strategy `s` chooses for `profile` under `model`. Costs: O(L) for
//! per_layer, single and size_threshold, O(L^2) for two_segment, dlgs_greedy and mgwfbp, see
//! optimal() for optimal. Deterministic.
//! @throws std::invalid_argument if the profile, the model or the options are invalid.
[[nodiscard]] inline grouping plan(strategy s,
                                   const layer_profile& profile,
                                   const cost_model& model,
                                   const plan_options& options = {}) {
  validate(profile);
  detail::validate(model);
  switch (s) {
  case strategy::per_layer:
    return per_layer(profile.size());
  case strategy::single:
    return single(profile.size());
  case strategy::size_threshold:
    return size_threshold(profile, options.bucket_bytes);
  case strategy::two_segment:
    return two_segment(profile, model);
  case strategy::dlgs_greedy:
    return dlgs_greedy(profile, model);
  case strategy::mgwfbp:
    return mgwfbp(profile, model);
  case strategy::optimal:
    return optimal(profile, model);
  }
  gradcomp::detail::require(false, "plan: unknown strategy");
  return {};
}

} // namespace gradcomp::schedule
