// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::residual_monitor: what error feedback holds back in one layer, iteration by
//! iteration: the residual's share of the gradient norm and how stale the values are that
//! leave the residual (iterations they waited). A diagnostic for the accuracy gap of sparse
//! gradients (docs/fidelity.md, "Where the gap comes from").
#pragma once

#include <gradcomp/compressor/local_clipping.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp {

//! @brief One layer's error-feedback state after one iteration (residual_monitor::observe).
struct residual_observation {
  double gradient_norm = 0.0; //!< ||g||_2 of the iteration's gradient (sum in double, in order).
  double residual_norm = 0.0; //!< ||r||_2 of the residual after the iteration's selection.
  //! Elements that left the residual this iteration: residual now exactly 0, and either a
  //! nonzero gradient this iteration or a value held from earlier ones.
  std::size_t sent = 0;
  //! Of `sent`: the sum of their staleness, the iterations each one's oldest contribution
  //! waited in the residual before it left (0: sent in the iteration its gradient arrived).
  std::uint64_t sent_staleness_sum = 0;
  std::uint32_t sent_staleness_max = 0; //!< Of `sent`: the largest staleness.
  std::size_t held = 0;                 //!< elements whose residual is nonzero after the iteration.
  //! Of `held`: the sum of their ages (iterations each has been nonzero, this one included).
  std::uint64_t held_age_sum = 0;

  //! ||r|| / ||g||: how many of this iteration's gradients the residual holds back (0 when g is 0).
  [[nodiscard]] double residual_to_gradient() const noexcept {
    return gradient_norm > 0.0 ? residual_norm / gradient_norm : 0.0;
  }
  //! Mean staleness of the values sent (0 when none was).
  [[nodiscard]] double mean_sent_staleness() const noexcept {
    return sent > 0 ? static_cast<double>(sent_staleness_sum) / static_cast<double>(sent) : 0.0;
  }
  //! Mean age of the values held (0 when none is).
  [[nodiscard]] double mean_held_age() const noexcept {
    return held > 0 ? static_cast<double>(held_age_sum) / static_cast<double>(held) : 0.0;
  }
};

//! @brief Observes one layer's error-feedback residual after every iteration and keeps, per
//! element, how many consecutive iterations it has been held (nonzero). From that: the staleness
//! of each value when it leaves the residual, and the residual's norm against the gradient's.
//!
//! An element *leaves* the residual when the residual holds exactly 0 after the iteration, while
//! the iteration's gradient or the residual before it was nonzero: with float32 values every
//! library compressor and gradcomp::error_feedback leave exactly 0 where they sent (residual =
//! accumulation - sent value, exactly), also with DGC's momentum correction (factor masking);
//! values a global selection or a skipped step gave back stay held, as they should. With
//! fp16 / bf16 values a sent element keeps its rounding error and counts as held: observe
//! float32 exchanges only. Elements whose gradient and residual are both 0 are neither sent nor
//! held; an unsent accumulation that cancels to exactly 0 counts as sent.
//!
//! Deterministic; not thread-safe per object. Memory: 4 bytes per element. Not collective.
class residual_monitor {
public:
  //! @param numel the layer's elements.
  explicit residual_monitor(std::size_t numel) : age_(numel, 0) {}

  //! @brief Records one iteration: `residual` after the selection, `gradient` the iteration's
  //! gradient (what error feedback accumulated; both numel() elements). O(n), no allocation.
  //! @throws std::invalid_argument naming the lengths if either is not numel().
  residual_observation observe(std::span<const float> residual, std::span<const float> gradient) {
    detail::require(residual.size() == age_.size() && gradient.size() == age_.size(),
                    "residual_monitor: residual of ", residual.size(), " and gradient of ",
                    gradient.size(), " elements for a layer of ", age_.size());
    residual_observation o;
    o.gradient_norm = std::sqrt(sum_of_squares(gradient));
    o.residual_norm = std::sqrt(sum_of_squares(residual));
    for (std::size_t i = 0; i < age_.size(); ++i) {
      std::uint32_t& age = age_[i];
      if (residual[i] != 0.0f) {
        age = age == UINT32_MAX ? age : age + 1;
        ++o.held;
        o.held_age_sum += age;
      } else {
        if (age > 0 || gradient[i] != 0.0f) {
          ++o.sent;
          o.sent_staleness_sum += age;
          o.sent_staleness_max = std::max(o.sent_staleness_max, age);
        }
        age = 0;
      }
    }
    ++iterations_;
    total_.gradient_norm += o.gradient_norm;
    total_.residual_norm += o.residual_norm;
    total_.sent += o.sent;
    total_.sent_staleness_sum += o.sent_staleness_sum;
    total_.sent_staleness_max = std::max(total_.sent_staleness_max, o.sent_staleness_max);
    total_.held += o.held;
    total_.held_age_sum += o.held_age_sum;
    ratio_sum_ += o.residual_to_gradient();
    return o;
  }

  //! @brief The observations since the last reset_summary() (or construction), summed:
  //! gradient_norm and residual_norm are sums of the per-iteration norms, the counts and
  //! staleness sums add up, sent_staleness_max is the maximum; mean_residual_to_gradient is the
  //! mean of the per-iteration ratios ||r|| / ||g||.
  struct summary {
    residual_observation total;             //!< the sums above
    std::uint64_t iterations = 0;           //!< observations summed
    double mean_residual_to_gradient = 0.0; //!< mean over them of ||r|| / ||g||
  };
  //! The summary of the observations since the last reset_summary(). O(1).
  [[nodiscard]] summary current_summary() const noexcept {
    return {total_, iterations_,
            iterations_ > 0 ? ratio_sum_ / static_cast<double>(iterations_) : 0.0};
  }
  //! Starts a new summary (the elements' ages go on). O(1).
  void reset_summary() noexcept {
    total_ = {};
    iterations_ = 0;
    ratio_sum_ = 0.0;
  }

  //! The element count given at construction.
  [[nodiscard]] std::size_t numel() const noexcept { return age_.size(); }
  //! Element i's current age (iterations held, 0 if its residual is 0). @pre i < numel().
  [[nodiscard]] std::uint32_t age(std::size_t i) const noexcept { return age_[i]; }

private:
  std::vector<std::uint32_t> age_;
  residual_observation total_;
  std::uint64_t iterations_ = 0;
  double ratio_sum_ = 0.0;
};

} // namespace gradcomp
