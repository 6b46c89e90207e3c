// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The profile in backward order with the cost functions bound to it, and the one
//! implementation of the iteration-time recurrences (S1 eqs. 2-5, 7) that the simulator, the
//! strategies and the exact planner all share.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::schedule::detail {

//! Times of one group, as the recurrence computes them.
struct group_step {
  double backward_start = 0.0; //!< compute clock when the group's first layer starts.
  double backward_end = 0.0;   //!< ... when its last layer's backward ends.
  double compress_start = 0.0;
  double compress_end = 0.0; //!< the message is ready.
  double communicate_start = 0.0;
  double communicate_end = 0.0;
  std::uint64_t numel = 0;
  std::uint64_t bytes = 0;
};

//! A message's seconds while backward runs (T) and after it (T').
struct message_costs {
  double during_backward = 0.0;
  double after_backward = 0.0;
};

//! @brief A validated profile in backward order (position p = forward index L - 1 - p) with
//! prefix sums of the elements, and the model's cost functions applied to groups.
class backward_view {
public:
  //! @throws std::invalid_argument if the profile or the model is invalid.
  backward_view(const layer_profile& profile, const cost_model& model) : model_(&model) {
    gradcomp::schedule::validate(profile);
    gradcomp::schedule::detail::validate(model);
    const std::size_t n = profile.size();
    backward_seconds_.resize(n);
    prefix_numel_.assign(n + 1, 0);
    for (std::size_t p = 0; p < n; ++p) {
      const layer& l = profile.layers[n - 1 - p];
      backward_seconds_[p] = l.backward_seconds;
      prefix_numel_[p + 1] = prefix_numel_[p] + l.numel;
    }
    forward_seconds_ = profile.forward_seconds;
    backward_end_ = forward_seconds_;
    for (const double t : backward_seconds_) {
      backward_end_ += t;
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return backward_seconds_.size(); }
  [[nodiscard]] double forward_seconds() const noexcept { return forward_seconds_; }
  [[nodiscard]] double backward_seconds(std::size_t position) const noexcept {
    return backward_seconds_[position];
  }
  [[nodiscard]] const cost_model& model() const noexcept { return *model_; }
  [[nodiscard]] bool on_compute_stream() const noexcept {
    return model_->placement == compression_placement::on_compute_stream;
  }
  //! Elements of the layers at backward positions [begin, end).
  [[nodiscard]] std::uint64_t numel(std::size_t begin, std::size_t end) const noexcept {
    return prefix_numel_[end] - prefix_numel_[begin];
  }
  //! Message bytes of a group of `numel` elements.
  [[nodiscard]] std::uint64_t bytes(std::uint64_t numel) const {
    return model_->message.bytes(numel);
  }
  //! s(numel), 0 without a compression function. @throws std::invalid_argument if not >= 0.
  [[nodiscard]] double compression_seconds(std::uint64_t numel) const {
    return model_->compression_seconds
               ? checked_cost(model_->compression_seconds(numel), "compression_seconds", numel)
               : 0.0;
  }
  //! T(bytes). @throws std::invalid_argument if not finite and >= 0.
  [[nodiscard]] double communication_seconds(std::uint64_t bytes) const {
    return checked_cost(model_->communication_seconds(bytes), "communication_seconds", bytes);
  }
  //! The costs of one message: T(bytes) and T'(bytes) (T again without the model's
  //! communication_seconds_after_backward). @throws std::invalid_argument if not finite and >= 0.
  [[nodiscard]] message_costs message(std::uint64_t bytes) const {
    const double t = communication_seconds(bytes);
    return {t, model_->communication_seconds_after_backward
                   ? checked_cost(model_->communication_seconds_after_backward(bytes),
                                  "communication_seconds_after_backward", bytes)
                   : t};
  }
  //! K: the end of backward, t_f + the sum of the backward seconds (compressions excluded).
  [[nodiscard]] double backward_end() const noexcept { return backward_end_; }
  //! When a message with costs `c` that starts at `start` ends (cost_model's
  //! communication_seconds_after_backward): start + T before K, start + T' from K on, the
  //! remaining fraction at T' when it straddles K. Non-decreasing in `start`.
  [[nodiscard]] double message_end(double start, const message_costs& c) const noexcept {
    if (start >= backward_end_) {
      return start + c.after_backward;
    }
    if (start + c.during_backward <= backward_end_) {
      return start + c.during_backward;
    }
    // during_backward > backward_end_ - start > 0 here
    return backward_end_ + (1.0 - (backward_end_ - start) / c.during_backward) * c.after_backward;
  }

  //! @brief Runs the recurrences over the groups ending at `ends` (ascending backward
  //! positions, the last equal to size(); not checked), calling `on_layer(p, start, end)` for
  //! every layer and `on_group(step)` for every group; returns t_iter. O(L) plus the cost
  //! function calls (2 per group).
  //!
  //! The model (gradcomp-plan's, S1 eqs. 2-5 and 7 generalised to groups): a compute clock
  //! starts at t_f; for each group in backward order the clock advances by each of its layers'
  //! backward seconds; its compression takes s(numel); on the compute stream the clock advances
  //! by s and the group is ready at the clock (S1: tau_b[l] = tau_s[l+1] + t_s[l+1]); off it the
  //! compression starts at max(clock, end of the previous compression) and the group is ready
  //! when it ends; its message of bytes(numel) bytes starts at max(ready, end of the previous
  //! message) and takes T(bytes) (S1 eq. 5: one channel, in order; after backward T', see
  //! message_end()); t_iter is the end of the last message (S1 eq. 7).
  template <class OnLayer, class OnGroup>
  double run(std::span<const std::size_t> ends, OnLayer&& on_layer, OnGroup&& on_group) const {
    const bool on_stream = on_compute_stream();
    double clock = forward_seconds_;
    double compress_end = 0.0; // every time is >= 0, so 0 is a neutral "previous end"
    double communicate_end = 0.0;
    std::size_t begin = 0;
    for (const std::size_t end : ends) {
      group_step step;
      step.backward_start = clock;
      for (std::size_t p = begin; p < end; ++p) {
        const double start = clock;
        clock += backward_seconds_[p];
        on_layer(p, start, clock);
      }
      step.backward_end = clock;
      step.numel = numel(begin, end);
      step.bytes = bytes(step.numel);
      const double s = compression_seconds(step.numel);
      if (on_stream) {
        step.compress_start = clock;
        clock += s;
        compress_end = clock;
      } else {
        step.compress_start = std::max(clock, compress_end);
        compress_end = step.compress_start + s;
      }
      step.compress_end = compress_end;
      step.communicate_start = std::max(compress_end, communicate_end);
      communicate_end = message_end(step.communicate_start, message(step.bytes));
      step.communicate_end = communicate_end;
      on_group(step);
      begin = end;
    }
    return communicate_end;
  }

  //! t_iter of the groups ending at `ends` (see run()).
  [[nodiscard]] double t_iter(std::span<const std::size_t> ends) const {
    return run(
        ends, [](std::size_t, double, double) {}, [](const group_step&) {});
  }

private:
  const cost_model* model_;
  std::vector<double> backward_seconds_;
  std::vector<std::uint64_t> prefix_numel_;
  double forward_seconds_ = 0.0;
  double backward_end_ = 0.0;
};

} // namespace gradcomp::schedule::detail
