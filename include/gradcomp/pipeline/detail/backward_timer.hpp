// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::backward_timer: the per-layer backward times the pipeline measures during a
//! re-planning policy's warm-up, and their medians.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

namespace gradcomp::detail {

//! @brief Backward times of W warm-up iterations, per layer, and their per-layer medians (the
//! measurement behind pipeline's online re-planning; see pipeline::gradient_ready for what a
//! layer's backward time is). Within an iteration the reports' gaps (each from the previous
//! event: the begin-of-backward mark or the end of the previous report, so the reports' own
//! work is left out; the first report without a mark counts 0 s) add up to each layer's ready
//! time. When the iteration is done, the ready times become backward times in backward order
//! (forward index descending, the order the planner sums them in): a layer's time is its ready
//! time's running maximum minus the previous layer's, so a layer reported out of order (a bias
//! after its weight) gets 0 and the layer after it the whole gap, and the planner's sums give
//! back the ready times. Memory: 8 (W + 1) bytes per layer plus 8 W, allocated by start();
//! nothing per iteration. Not thread-safe: the training thread only.
//! @tparam Clock a steady std::chrono clock.
template <class Clock>
class backward_timer {
public:
  using time_point = typename Clock::time_point;

  //! Measures `warmup` iterations of `layers` layers (W = 0: never measures). Allocates.
  void start(std::size_t layers, std::size_t warmup) {
    layers_ = layers;
    warmup_ = warmup;
    if (warmup_ > 0) {
      samples_.assign(warmup_ * layers_, 0.0);
      column_.assign(warmup_, 0.0);
      medians_.assign(layers_, 0.0);
    }
  }
  //! True while the current iteration is one of the W measured ones. O(1).
  [[nodiscard]] bool measuring() const noexcept { return finished_ < warmup_; }
  //! True once W iterations were measured (never for W = 0). O(1).
  [[nodiscard]] bool complete() const noexcept { return warmup_ > 0 && finished_ == warmup_; }
  //! Sets this iteration's reference event (the begin-of-backward mark, or a report's end).
  void mark(time_point t) noexcept {
    last_ = t;
    have_reference_ = true;
  }
  //! Records `layer`'s ready time in this iteration: reported at `t0`, the gap from the last
  //! mark (t0 itself if there is none yet) added to the iteration's elapsed backward time. Only
  //! while measuring(). O(1).
  void record(std::size_t layer, time_point t0) noexcept {
    if (!have_reference_) {
      mark(t0);
    }
    elapsed_ += std::max(0.0, std::chrono::duration<double>(t0 - last_).count());
    samples_[finished_ * layers_ + layer] = elapsed_;
  }
  //! A new iteration starts: the next report has no reference until mark(). O(1).
  void next_iteration() noexcept {
    have_reference_ = false;
    elapsed_ = 0.0;
  }
  //! The iteration completed successfully: its ready times become backward times in backward
  //! order (see the class) and the row counts. O(L).
  void iteration_done() noexcept {
    if (!measuring()) {
      return;
    }
    double* row = samples_.data() + finished_ * layers_;
    double ready = 0.0;
    for (std::size_t l = layers_; l-- > 0;) {
      const double later = std::max(ready, row[l]);
      row[l] = later - ready;
      ready = later;
    }
    ++finished_;
  }
  //! Computes and keeps the per-layer medians of the W iterations (the mean of the two middle
  //! values for an even W). O(W L). Precondition: complete().
  std::span<const double> take_medians() {
    for (std::size_t l = 0; l < layers_; ++l) {
      for (std::size_t r = 0; r < warmup_; ++r) {
        column_[r] = samples_[r * layers_ + l];
      }
      medians_[l] = median(column_);
    }
    medians_valid_ = true;
    return medians_;
  }
  //! The medians of take_medians(); empty before it. O(1).
  [[nodiscard]] std::span<const double> medians() const noexcept {
    return medians_valid_ ? std::span<const double>(medians_) : std::span<const double>();
  }

  //! Checkpoint state: W, the iterations measured, their samples and the medians (if taken).
  void save_state(state_writer& w) const {
    w.tag("backward_timer");
    w.u64(warmup_);
    w.u64(finished_);
    w.doubles(samples_);
    w.flag(medians_valid_);
    w.doubles(medians_);
  }
  //! Restores what save_state() wrote (all or nothing). @throws state_error if W, the layer
  //! count or the counts differ, or the measured count exceeds W.
  void load_state(state_reader& r) {
    r.expect_tag("backward_timer");
    r.expect_u64("re-planning warm-up iterations", warmup_);
    const std::uint64_t finished = r.u64("re-planning iterations measured");
    if (finished > warmup_) {
      throw state_error(
          concat("gradcomp state: ", finished, " warm-up iterations measured of ", warmup_));
    }
    std::vector<double> samples(samples_.size());
    r.doubles_into("re-planning samples", samples);
    const bool valid = r.flag("re-planning medians taken");
    if (valid && (warmup_ == 0 || finished != warmup_)) {
      throw state_error(concat("gradcomp state: re-planning medians taken with ", finished, " of ",
                               warmup_, " iterations measured"));
    }
    std::vector<double> medians(medians_.size());
    r.doubles_into("re-planning medians", medians);
    finished_ = finished;
    samples_ = std::move(samples);
    medians_valid_ = valid;
    medians_ = std::move(medians);
    have_reference_ = false;
    elapsed_ = 0.0;
  }

private:
  // The median of `v` (reordered); the mean of the two middle values for an even size. O(n).
  static double median(std::vector<double>& v) {
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const double upper = v[mid];
    if (v.size() % 2 == 1) {
      return upper;
    }
    const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    return lower + (upper - lower) / 2.0;
  }

  std::size_t layers_ = 0;
  std::size_t warmup_ = 0;
  std::size_t finished_ = 0;    // successful iterations measured, <= warmup_
  std::vector<double> samples_; // warmup_ x layers_ seconds, row = iteration
  std::vector<double> column_;  // warmup_ scratch for the medians
  std::vector<double> medians_; // per layer, forward order
  bool medians_valid_ = false;
  bool have_reference_ = false; // last_ holds this iteration's previous event
  double elapsed_ = 0.0;        // this iteration's backward time so far (sum of the gaps)
  time_point last_{};
};

} // namespace gradcomp::detail
