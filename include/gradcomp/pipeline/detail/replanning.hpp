// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::replan_status and detail::kept_grouping_policy: the pipeline's online
//! re-planning bookkeeping (the warm-up's measurements, whether it re-planned, and the policy it
//! keeps to re-plan once) and its checkpoint.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/detail/backward_timer.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

namespace gradcomp::detail {

//! @brief Where the pipeline's re-planning stands: the warm-up's backward times, whether the
//! policy's replan() was called (tried) and whether the pipeline switched to its grouping
//! (replanned). Copyable: pipeline::load_state reads into a copy. Training thread only.
//! @tparam Clock a steady std::chrono clock.
template <class Clock>
struct replan_status {
  backward_timer<Clock> times; //!< re-planning warm-up (never measures without it).
  bool tried = false;          //!< replan() was called (once; also when it threw).
  bool replanned = false;      //!< the pipeline uses the re-planned grouping.

  //! Checkpoint state: the flags, then the warm-up's measurements.
  void save_state(state_writer& w) const {
    w.flag(replanned);
    w.flag(tried);
    times.save_state(w);
  }
  //! @brief Restores what save_state() wrote, into this object as it goes (not all or nothing:
  //! read into a copy). @throws state_error if the flags contradict each other or the
  //! measurements (replanned without tried, tried before the warm-up ended), or as
  //! backward_timer::load_state.
  void load_state(state_reader& r) {
    replanned = r.flag("pipeline replanned");
    tried = r.flag("pipeline replan tried");
    if (replanned && !tried) {
      throw state_error("gradcomp state: the pipeline's re-planning flags are not valid");
    }
    times.load_state(r);
    if (tried && !times.complete()) {
      throw state_error("gradcomp state: the pipeline re-planned before its warm-up ended");
    }
  }
};

//! @brief The grouping policy as the pipeline keeps it: the policy itself if it is a
//! pipeline_policy::replanning_policy (asked once more, to re-plan, after its warm-up),
//! nothing (an empty object) otherwise.
//! @tparam Grouping a pipeline_policy::grouping_policy.
template <class Grouping>
class kept_grouping_policy {
public:
  //! Whether Grouping can re-plan (a pipeline_policy::replanning_policy).
  static constexpr bool can_replan = pipeline_policy::replanning_policy<Grouping>;

  //! Keeps `grouping` (moved from) if it can re-plan; else keeps nothing.
  explicit kept_grouping_policy(Grouping& grouping) : policy_(keep(grouping)) {}

  //! The first grouping of layers of `numel` elements: the kept policy's groups() if it can
  //! re-plan, else `grouping`'s. Not validated. Throws whatever groups() throws.
  [[nodiscard]] schedule::grouping first_grouping(Grouping& grouping,
                                                  std::span<const std::size_t> numel) {
    if constexpr (can_replan) {
      return policy_.groups(numel);
    } else {
      return grouping.groups(numel);
    }
  }

  //! @brief If it can re-plan: prepares `status` to measure the policy's warmup_iterations() W
  //! iterations of `layers` layers (allocates its timestamp record; W = 0: never measures).
  //! @throws std::invalid_argument if W is so large that the record would not fit in memory.
  template <class Clock>
  void start(replan_status<Clock>& status, std::size_t layers) {
    if constexpr (can_replan) {
      const auto warmup = static_cast<std::size_t>(policy_.warmup_iterations());
      require(warmup <= std::numeric_limits<std::size_t>::max() / sizeof(double) / (layers + 2),
              "pipeline: warmup_iterations() ", warmup, " is too large for ", layers, " layers");
      status.times.start(layers, warmup);
    }
  }

  //! @brief At the end of the warm-up (its W iterations measured and replan() not tried yet):
  //! marks `status` tried, and returns the policy's replan() of the per-layer medians of the
  //! measured backward times, validated for the layers of `numel`. Otherwise (also without
  //! re-planning) nothing. O(W L) then, O(1) otherwise.
  //! @throws whatever replan() throws, or std::invalid_argument if its grouping is not valid;
  //! `status` stays tried.
  template <class Clock>
  [[nodiscard]] std::optional<schedule::grouping>
  replan_if_due(replan_status<Clock>& status, std::span<const std::size_t> numel) {
    if constexpr (can_replan) {
      if (!status.times.complete() || status.tried) {
        return std::nullopt;
      }
      status.tried = true;
      schedule::grouping next = policy_.replan(numel, status.times.take_medians());
      schedule::validate(next, numel.size());
      return next;
    } else {
      return std::nullopt;
    }
  }

private:
  struct no_policy {};
  using kept_policy = std::conditional_t<can_replan, Grouping, no_policy>;

  static kept_policy keep(Grouping& grouping) {
    if constexpr (can_replan) {
      return kept_policy(std::move(grouping));
    } else {
      return no_policy{};
    }
  }

  [[no_unique_address]] kept_policy policy_;
};

} // namespace gradcomp::detail
