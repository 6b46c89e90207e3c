// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The pipeline's grouping policy concept (which consecutive layers share a message), the
//! optional re-planning extension (a new grouping from backward times measured online), and two
//! policies: a given grouping, and one planned (and optionally re-planned) by a merge strategy.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <concepts>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief Opt-in tag: a grouping policy declares `using grouping_concept = grouping_policy_tag;`
//! (as compressors and transports opt in with theirs): a type that merely has a groups()
//! member is not taken for a policy, whose groupings every rank must compute identically.
struct grouping_policy_tag {};

} // namespace gradcomp

namespace gradcomp::pipeline_policy {

//! @brief A grouping policy: declares `using grouping_concept = gradcomp::grouping_policy_tag;`
//! and `groups(numel)` returns the grouping (schedule::grouping: groups of
//! consecutive backward positions, in backward order) for layers of the given sizes (elements
//! per layer, forward order). Must be deterministic: every rank must get the same grouping.
template <class G>
concept grouping_policy = std::same_as<typename G::grouping_concept, grouping_policy_tag> &&
    requires(const G& g, std::span<const std::size_t> numel) {
  { g.groups(numel) } -> std::convertible_to<schedule::grouping>;
};

//! @brief A grouping policy that can also plan again from backward times the pipeline measured
//! (online profiling).
//!
//! Required members, besides groups():
//! * `replan(numel, backward_seconds)`: the grouping for layers of `numel` elements (forward
//!   order) whose backward times are `backward_seconds` (seconds per layer, forward order, same
//!   length, each >= 0: the medians the pipeline measured over its warm-up). Must be
//!   deterministic; may throw (the pipeline then keeps its grouping and finish() rethrows).
//! * `warmup_iterations()`: after how many finished iterations the pipeline calls replan()
//!   (once); 0 means never. Read once, at the pipeline's construction; must not throw.
//!
//! The pipeline calls replan() on the training thread at the end of finish(), while its
//! communication thread is idle, so a collective replan() (mpi::agreed_grouping) is allowed:
//! every rank re-plans at the same iteration when warmup_iterations() is the same everywhere.
//! The policy must be move-constructible: the pipeline keeps it.
template <class G>
concept replanning_policy = grouping_policy<G> && std::move_constructible<G> &&
    requires(const G& g, std::span<const std::size_t> numel, std::span<const double> seconds) {
  { g.replan(numel, seconds) } -> std::convertible_to<schedule::grouping>;
  { g.warmup_iterations() } -> std::convertible_to<std::size_t>;
};

//! @brief A grouping given explicitly (validated by the pipeline); empty means per_layer. Not a
//! replanning_policy: the grouping never changes.
struct fixed_grouping {
  using grouping_concept = grouping_policy_tag; //!< opts in (pipeline_policy::grouping_policy).
  schedule::grouping grouping{};                //!< the groups; empty: one group per layer.

  //! `grouping`, or schedule::per_layer(numel.size()) when it is empty. O(groups).
  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    return grouping.empty() ? schedule::per_layer(numel.size()) : grouping;
  }
};

//! @brief A grouping chosen by a merge strategy (schedule::plan) for the layer sizes, the given
//! backward seconds per layer (forward order; empty: all zero) and the cost model. O(plan).
//! Deterministic (as schedule::plan), not collective.
//!
//! A replanning_policy: with `replan_after` > 0, the pipeline measures the backward time of
//! every layer over its first `replan_after` iterations and then asks replan() for a grouping
//! planned with the same strategy, model, forward seconds and options but the measured
//! backward seconds (the medians) instead of `backward_seconds`.
//! @throws std::invalid_argument (from groups() or replan()) if the backward seconds' count
//! differs from the layer count, or the profile or model is invalid.
struct planned_grouping {
  using grouping_concept = grouping_policy_tag; //!< opts in (pipeline_policy::grouping_policy).
  schedule::strategy strategy = schedule::strategy::per_layer; //!< the merge strategy.
  schedule::cost_model model{}; //!< the network model (alpha, beta) the strategy plans with.
  std::vector<double> backward_seconds{}; //!< per layer, forward order (s); empty: all zero.
  double forward_seconds = 0.0;           //!< t_f (s).
  schedule::plan_options options{};       //!< the strategy's options (schedule::plan).
  //! Finished iterations after which the pipeline re-plans from its measurements (once);
  //! 0: never (the grouping of groups() stays).
  std::size_t replan_after = 0;

  //! The grouping for `numel` (forward order) with `backward_seconds`. O(plan).
  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    return plan_with(numel, backward_seconds);
  }

  //! The grouping for `numel` with the measured `measured_seconds` (per layer, forward order,
  //! in [0, schedule::max_layer_seconds]) in place of `backward_seconds`. O(plan).
  //! @throws std::invalid_argument if the counts differ, or the profile or model is invalid.
  [[nodiscard]] schedule::grouping replan(std::span<const std::size_t> numel,
                                          std::span<const double> measured_seconds) const {
    gradcomp::detail::require(measured_seconds.size() == numel.size(),
                              "planned_grouping: ", measured_seconds.size(),
                              " measured backward times for ", numel.size(), " layers");
    return plan_with(numel, measured_seconds);
  }

  //! `replan_after`. O(1).
  [[nodiscard]] std::size_t warmup_iterations() const noexcept { return replan_after; }

  //! @brief The iteration time, seconds, that this policy's model predicts for grouping `g` of
  //! layers `numel` with `backward_seconds` (S1 eqs. 2-7: schedule::t_iter_seconds), for
  //! comparing a plan's prediction with measured iterations. O(L).
  //! @throws std::invalid_argument if `g` is not a valid grouping of the layers, or the counts,
  //! profile or model are invalid.
  [[nodiscard]] double predicted_iteration_seconds(std::span<const std::size_t> numel,
                                                   const schedule::grouping& g) const {
    return schedule::t_iter_seconds(profile_for(numel, backward_seconds), model, g);
  }

private:
  [[nodiscard]] schedule::layer_profile profile_for(std::span<const std::size_t> numel,
                                                    std::span<const double> seconds) const {
    gradcomp::detail::require(seconds.empty() || seconds.size() == numel.size(),
                              "planned_grouping: ", seconds.size(), " backward times for ",
                              numel.size(), " layers");
    schedule::layer_profile profile;
    profile.forward_seconds = forward_seconds;
    profile.layers.reserve(numel.size());
    for (std::size_t i = 0; i < numel.size(); ++i) {
      profile.layers.push_back({{}, numel[i], seconds.empty() ? 0.0 : seconds[i]});
    }
    return profile;
  }

  [[nodiscard]] schedule::grouping plan_with(std::span<const std::size_t> numel,
                                             std::span<const double> seconds) const {
    return schedule::plan(strategy, profile_for(numel, seconds), model, options);
  }
};

static_assert(grouping_policy<fixed_grouping>);
static_assert(grouping_policy<planned_grouping>);
static_assert(!replanning_policy<fixed_grouping>);
static_assert(replanning_policy<planned_grouping>);

} // namespace gradcomp::pipeline_policy
