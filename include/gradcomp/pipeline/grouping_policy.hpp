// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The pipeline's grouping policy concept (which consecutive layers share a message) and
//! two policies: a given grouping, and one planned by a merge strategy.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <concepts>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::pipeline_policy {

//! @brief A grouping policy: `groups(numel)` returns the grouping (schedule::grouping: groups of
//! consecutive backward positions, in backward order) for layers of the given sizes (elements
//! per layer, forward order). Must be deterministic: every rank must get the same grouping.
template <class G>
concept grouping_policy = requires(const G& g, std::span<const std::size_t> numel) {
  { g.groups(numel) } -> std::convertible_to<schedule::grouping>;
};

//! @brief A grouping given explicitly (validated by the pipeline); empty means per_layer.
struct fixed_grouping {
  schedule::grouping grouping{};

  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    return grouping.empty() ? schedule::per_layer(numel.size()) : grouping;
  }
};

//! @brief A grouping chosen by a merge strategy (schedule::plan) for the layer sizes, the given
//! backward seconds per layer (forward order; empty: all zero) and the cost model. O(plan).
//! @throws std::invalid_argument (from groups()) if the backward seconds' count differs from
//! the layer count, or the profile or model is invalid.
struct planned_grouping {
  schedule::strategy strategy = schedule::strategy::per_layer;
  schedule::cost_model model{};
  std::vector<double> backward_seconds{}; //!< per layer, forward order.
  double forward_seconds = 0.0;
  schedule::plan_options options{};

  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    gradcomp::detail::require(backward_seconds.empty() || backward_seconds.size() == numel.size(),
                              "planned_grouping: ", backward_seconds.size(), " backward times for ",
                              numel.size(), " layers");
    schedule::layer_profile profile;
    profile.forward_seconds = forward_seconds;
    for (std::size_t i = 0; i < numel.size(); ++i) {
      profile.layers.push_back(
          {{}, numel[i], backward_seconds.empty() ? 0.0 : backward_seconds[i]});
    }
    return schedule::plan(strategy, profile, model, options);
  }
};

static_assert(grouping_policy<fixed_grouping>);
static_assert(grouping_policy<planned_grouping>);

} // namespace gradcomp::pipeline_policy
