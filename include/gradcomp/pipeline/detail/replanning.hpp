// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::replanning: the pipeline's grouping in use and its online re-planning (the
//! warm-up's measurements, whether it re-planned, and the policy it keeps to re-plan once) with
//! their checkpoint (with the grouping's: detail::save_grouping, detail::load_grouping); built
//! from detail::replan_status and detail::kept_grouping_policy.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/pipeline/detail/backward_timer.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

namespace gradcomp::detail {

//! Writes a grouping: its tag, the group count, each group's [begin, end).
inline void save_grouping(state_writer& w, const schedule::grouping& grouping) {
  w.tag("grouping");
  w.u64(grouping.size());
  for (const schedule::layer_group& g : grouping) {
    w.u64(g.begin);
    w.u64(g.end);
  }
}

//! Reads what save_grouping() wrote, for `layers` layers.
//! @throws state_error if the count is 0 or above `layers`, or the grouping is not valid.
[[nodiscard]] inline schedule::grouping load_grouping(state_reader& r, std::size_t layers) {
  r.expect_tag("grouping");
  const std::uint64_t count = r.u64("grouping size");
  if (count == 0 || count > layers) {
    throw state_error(
        concat("gradcomp state: a grouping of ", count, " groups for ", layers, " layers"));
  }
  schedule::grouping grouping(static_cast<std::size_t>(count));
  for (schedule::layer_group& g : grouping) {
    g.begin = static_cast<std::size_t>(r.u64("group begin"));
    g.end = static_cast<std::size_t>(r.u64("group end"));
  }
  if (!schedule::is_valid_grouping(grouping, layers)) {
    throw state_error(concat("gradcomp state: the checkpoint's grouping of ", count,
                             " groups is not valid for ", layers, " layers"));
  }
  return grouping;
}

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

//! @brief The grouping the pipeline uses and how it may change once: the first grouping (the
//! policy's), the warm-up's backward times (timer()) and, at the end of the warm-up, the
//! policy's re-planned grouping (replan_if_due(), then switch_to()). Training thread only.
//! @tparam Grouping a pipeline_policy::grouping_policy.
//! @tparam Clock    a steady std::chrono clock.
template <class Grouping, class Clock>
class replanning {
public:
  //! @brief Asks `grouping` (kept, moved from, if it can re-plan) for the first grouping of
  //! layers of `numel` elements, validates it, then prepares the warm-up (allocating its
  //! timestamp record). O(layers + the record).
  //! @throws whatever the policy's groups() throws, std::invalid_argument if the grouping is
  //! not a partition of the layers into consecutive groups in backward order, or if
  //! warmup_iterations() is so large that the record would not fit in memory.
  replanning(Grouping& grouping, std::span<const std::size_t> numel)
      : policy_(grouping), grouping_(policy_.first_grouping(grouping, numel)) {
    schedule::validate(grouping_, numel.size());
    policy_.start(status_, numel.size());
  }

  //! The grouping in use. O(1).
  [[nodiscard]] const schedule::grouping& groups() const noexcept { return grouping_; }
  //! True once switch_to() took a re-planned grouping. O(1).
  [[nodiscard]] bool replanned() const noexcept { return status_.replanned; }
  //! The per-layer medians of the warm-up's backward times; empty before it ended. O(1).
  [[nodiscard]] std::span<const double> medians() const noexcept { return status_.times.medians(); }
  //! The warm-up's backward timer (it measures nothing without re-planning). O(1).
  [[nodiscard]] backward_timer<Clock>& timer() noexcept { return status_.times; }

  //! @brief At the end of the warm-up, once: the policy's re-planned grouping, validated
  //! (kept_grouping_policy::replan_if_due); otherwise nothing. O(W L) then, O(1) otherwise.
  //! @throws whatever replan() throws, or std::invalid_argument if its grouping is not valid;
  //! it is then never asked again.
  [[nodiscard]] std::optional<schedule::grouping>
  replan_if_due(std::span<const std::size_t> numel) {
    return policy_.replan_if_due(status_, numel);
  }
  //! Uses `next` (from replan_if_due()) from now on: replanned() becomes true. Never throws.
  void switch_to(schedule::grouping next) noexcept {
    grouping_.swap(next);
    status_.replanned = true;
  }

  //! @brief What load_state reads before it commits (commit()).
  struct loaded_state {
    schedule::grouping grouping; //!< the grouping in use, validated
    replan_status<Clock> status; //!< the re-planning status
  };
  //! Checkpoint state: the grouping in use (detail::save_grouping), then the status.
  void save_state(state_writer& w) const {
    save_grouping(w, grouping_);
    status_.save_state(w);
  }
  //! @brief Reads what save_state() wrote for `layers` layers into a new loaded_state. Changes
  //! nothing here. @throws state_error as load_grouping() and replan_status::load_state().
  [[nodiscard]] loaded_state read_state(state_reader& r, std::size_t layers) const {
    loaded_state s{load_grouping(r, layers), status_};
    s.status.load_state(r);
    return s;
  }
  //! Takes what read_state() read. Never throws.
  void commit(loaded_state&& s) noexcept {
    status_ = std::move(s.status);
    grouping_.swap(s.grouping);
  }

private:
  [[no_unique_address]] kept_grouping_policy<Grouping> policy_;
  schedule::grouping grouping_; // in use
  replan_status<Clock> status_;
};

} // namespace gradcomp::detail
