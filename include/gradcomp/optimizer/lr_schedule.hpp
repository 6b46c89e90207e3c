// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Learning-rate schedules by step: linear warm-up ([GOYAL17]'s gradual warm-up), then
//! polynomial decay ([YOU17] pair it with LARS) or step decay (He et al. 2016; [GOYAL17]
//! divide the rate by 10 at fixed epochs). Pure functions of the step: every rank computes the
//! same rate without communicating.
#pragma once

#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace gradcomp {

namespace detail {
//! The linear warm-up both schedules share: base (s + 1) / warmup_steps for step s <
//! warmup_steps (the caller checks that). O(1).
[[nodiscard]] inline double linear_warmup(double base, std::size_t s, std::size_t warmup_steps) {
  return base * static_cast<double>(s + 1) / static_cast<double>(warmup_steps);
}
//! Checks a schedule's peak rate `base` (finite, >= 0), naming `schedule` and the value.
inline void check_base_rate(const char* schedule, double base) {
  require(std::isfinite(base) && base >= 0.0, schedule, ": base ", base,
          " must be finite and >= 0");
}
} // namespace detail

//! @brief Learning rate with linear warm-up then polynomial decay ([YOU17] pair LARS with "poly"
//! decay of power 2; [GOYAL17]'s gradual warm-up):
//! at(s) = base (s + 1) / warmup_steps for s < warmup_steps, then
//! base (1 - (s - warmup_steps) / (total_steps - warmup_steps))^power, 0 from total_steps on.
struct warmup_poly_schedule {
  double base = 0.1;            //!< peak learning rate, >= 0 and finite
  std::size_t warmup_steps = 0; //!< steps of linear warm-up (0: none)
  std::size_t total_steps = 1;  //!< > warmup_steps
  double power = 2.0;           //!< decay exponent, >= 0

  //! @throws std::invalid_argument naming the field if the schedule is malformed.
  void validate() const {
    detail::check_base_rate("warmup_poly_schedule", base);
    detail::require(total_steps > warmup_steps, "warmup_poly_schedule: total_steps ", total_steps,
                    " must exceed warmup_steps ", warmup_steps);
    detail::require(power >= 0.0, "warmup_poly_schedule: power ", power, " is negative");
  }
  //! The learning rate of step s (0-based). O(1). @throws what validate() throws.
  [[nodiscard]] double at(std::size_t s) const {
    validate();
    if (s < warmup_steps) {
      return detail::linear_warmup(base, s, warmup_steps);
    }
    if (s >= total_steps) {
      return 0.0;
    }
    const double left = 1.0 - static_cast<double>(s - warmup_steps) /
                                  static_cast<double>(total_steps - warmup_steps);
    return base * std::pow(left, power);
  }
};

//! @brief Learning rate with linear warm-up then step decay (He et al. 2016, "Deep Residual
//! Learning", sec. 3.4; [GOYAL17] sec. 5.1 train ResNet-50 so, x0.1 at epochs 30, 60 and 80):
//! at(s) = base (s + 1) / warmup_steps for s < warmup_steps, then base x factor^j, where j is
//! the number of milestones <= s. Milestones are steps (0-based): the rate of step `milestone`
//! is already the decayed one.
struct warmup_step_schedule {
  double base = 0.1;                   //!< peak learning rate, >= 0 and finite
  std::size_t warmup_steps = 0;        //!< steps of linear warm-up (0: none)
  std::vector<std::size_t> milestones; //!< strictly ascending, each >= warmup_steps
  double factor = 0.1;                 //!< multiplier at each milestone, in (0, 1]

  //! @throws std::invalid_argument naming the value and its limit if base is negative or not
  //! finite, factor is outside (0, 1], or a milestone falls inside the warm-up or does not
  //! follow the one before it.
  void validate() const {
    detail::check_base_rate("warmup_step_schedule", base);
    detail::require(factor > 0.0 && factor <= 1.0, "warmup_step_schedule: factor ", factor,
                    " is outside (0, 1]");
    for (std::size_t j = 0; j < milestones.size(); ++j) {
      detail::require(milestones[j] >= warmup_steps, "warmup_step_schedule: milestone ",
                      milestones[j], " falls inside the warm-up's ", warmup_steps, " steps");
      detail::require(j == 0 || milestones[j] > milestones[j - 1],
                      "warmup_step_schedule: milestone ", milestones[j],
                      " does not follow the milestone before it, ", j == 0 ? 0 : milestones[j - 1]);
    }
  }
  //! The learning rate of step s (0-based). O(number of milestones). @throws what validate()
  //! throws.
  [[nodiscard]] double at(std::size_t s) const {
    validate();
    if (s < warmup_steps) {
      return detail::linear_warmup(base, s, warmup_steps);
    }
    const auto passed =
        std::count_if(milestones.begin(), milestones.end(), [s](std::size_t m) { return m <= s; });
    return base * std::pow(factor, static_cast<double>(passed));
  }
};

} // namespace gradcomp
