// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::critical_regime: Accordion's detector of the critical regimes of
//! training (fast change of the gradient norm, and the intervals after a learning-rate drop),
//! where compression should be low.
#pragma once

#include <gradcomp/error.hpp>

#include <cmath>
#include <limits>

namespace gradcomp::schedule {

//! @brief Tells, interval by interval, whether training is in a critical regime (Agarwal et
//! al., "Adaptive gradient communication via critical learning regime identification"
//! (Accordion), MLSys 2021): the norm of the gradient accumulated over an interval changed by at
//! least a fraction eta of the previous interval's norm, |n_i - n_(i-1)| / n_(i-1) >= eta
//! (Accordion's eta = 0.5), or a learning-rate drop was announced for the intervals that follow.
//! The first interval is critical (nothing to compare with), as in Accordion.
//!
//! The caller picks the interval (Accordion: an epoch; a short run: a fraction of one) and the
//! tensor (the whole model's gradient or one layer's). Deterministic: the same norms give the
//! same answers, so ranks that feed it the same (averaged) norms agree without communication.
//! O(1) per call, no allocation.
class critical_regime {
public:
  //! @brief Everything a detector holds: state() returns it, the constructor from it resumes
  //! (checkpoints: the resumed detector answers as the saved one would have).
  struct state_type {
    double eta = 0.5;          //!< the threshold.
    bool has_previous = false; //!< whether an interval has been observed.
    double previous = 0.0;     //!< the last observed norm (0 before the first).
    //! the last relative change (infinity before the first observe()).
    double last_change = std::numeric_limits<double>::infinity();
    bool critical = true;      //!< the last answer (true before the first observe()).
    int dropped_intervals = 0; //!< intervals a learning-rate drop still marks critical.
  };

  //! A detector with threshold `eta` (relative change of the norm).
  //! @throws std::invalid_argument naming the value unless eta is finite and > 0.
  explicit critical_regime(double eta = 0.5) : eta_(eta) {
    gradcomp::detail::require(std::isfinite(eta) && eta > 0, "critical_regime: eta ", eta,
                              " is not a finite value above 0");
  }

  //! A detector that goes on from a saved state(). O(1).
  //! @throws std::invalid_argument naming the value unless eta is finite and > 0, previous
  //! finite and >= 0, last_change >= 0 (infinity allowed) and dropped_intervals >= 0.
  explicit critical_regime(const state_type& s) : critical_regime(s.eta) {
    gradcomp::detail::require(std::isfinite(s.previous) && s.previous >= 0,
                              "critical_regime: saved norm ", s.previous,
                              " is not a finite value >= 0");
    gradcomp::detail::require(s.last_change >= 0, "critical_regime: saved change ", s.last_change,
                              " is not a value >= 0");
    gradcomp::detail::require(s.dropped_intervals >= 0, "critical_regime: saved ",
                              s.dropped_intervals, " intervals after a drop is below 0");
    has_previous_ = s.has_previous;
    previous_ = s.previous;
    last_change_ = s.last_change;
    critical_ = s.critical;
    dropped_intervals_ = s.dropped_intervals;
  }

  //! What the detector holds, for a checkpoint (see the constructor from it). O(1).
  [[nodiscard]] state_type state() const noexcept {
    return {eta_, has_previous_, previous_, last_change_, critical_, dropped_intervals_};
  }

  //! Ends an interval whose accumulated gradient had L2 norm `gradient_norm`; returns whether
  //! that interval was critical (also critical() afterwards): the first interval, a relative
  //! change of at least eta against the previous interval's norm (a previous norm of 0: any
  //! non-zero norm is a change), or an interval announced by learning_rate_dropped().
  //! @throws std::invalid_argument naming the value unless gradient_norm is finite and >= 0.
  bool observe(double gradient_norm) {
    gradcomp::detail::require(std::isfinite(gradient_norm) && gradient_norm >= 0,
                              "critical_regime: gradient norm ", gradient_norm,
                              " is not a finite value >= 0");
    if (!has_previous_) {
      last_change_ = std::numeric_limits<double>::infinity();
    } else if (previous_ > 0) {
      last_change_ = std::abs(gradient_norm - previous_) / previous_;
    } else {
      last_change_ = gradient_norm > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    }
    critical_ = last_change_ >= eta_ || dropped_intervals_ > 0;
    if (dropped_intervals_ > 0) {
      --dropped_intervals_;
    }
    previous_ = gradient_norm;
    has_previous_ = true;
    return critical_;
  }

  //! Announces a learning-rate drop: the next `intervals` calls of observe() report critical
  //! whatever the norms do (Accordion lowers compression after each decay). A second drop
  //! before they are used extends to the larger count.
  //! @throws std::invalid_argument if intervals < 1.
  void learning_rate_dropped(int intervals = 1) {
    gradcomp::detail::require(intervals >= 1, "critical_regime: ", intervals,
                              " intervals after a learning-rate drop is below 1");
    dropped_intervals_ = intervals > dropped_intervals_ ? intervals : dropped_intervals_;
  }

  //! Whether the last observed interval was critical (true before the first observe()).
  [[nodiscard]] bool critical() const noexcept { return critical_; }
  //! The relative change of the last observe() (infinity for the first), for reports.
  [[nodiscard]] double last_change() const noexcept { return last_change_; }
  //! The threshold eta.
  [[nodiscard]] double eta() const noexcept { return eta_; }

private:
  double eta_;
  bool has_previous_ = false;
  double previous_ = 0.0;
  double last_change_ = std::numeric_limits<double>::infinity();
  bool critical_ = true;
  int dropped_intervals_ = 0;
};

} // namespace gradcomp::schedule
