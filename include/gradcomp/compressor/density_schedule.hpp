// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::density_warmup: DGC's warm-up of the density, decaying exponentially from a
//! large initial density to the target over the first epochs (Lin et al. 2018, "Deep Gradient
//! Compression", sec. 3.4 "Warm-up training").
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gradcomp {

//! @brief DGC's density warm-up (Lin et al. 2018, sec. 3.4): in the first epochs of training,
//! when the weights change fast, a very sparse update delays too much of the gradient in the
//! residual; DGC therefore starts at density 25 % and lowers it exponentially to its target
//! over the first four epochs (25 %, 6.25 %, 1.5625 %, 0.4 %, then 0.1 %).
//!
//! The density at (fractional) epoch t >= 0, with d0 = initial_density, dT = final_density and
//! E = warmup_epochs, is
//!   d(t) = d0 x (dT / d0)^(e / E)   for t < E,   and   d(t) = dT   for t >= E (and when E = 0),
//! where e = floor(t) when `stepped` (DGC: one density per epoch, an epoch being the iterations
//! [e x I, (e + 1) x I) for I iterations per epoch) and e = t otherwise (a continuous decay). It
//! is geometric: each epoch divides the density by the same ratio (dT / d0)^(-1/E), 3.98 for
//! DGC's 0.25 -> 0.001 over E = 4 (DGC's 6.25 %, 1.5625 %, 0.4 % are 6.29 %, 1.58 %, 0.398 %
//! here: the paper rounds the ratio to 4). The value is clamped to [dT, d0], so it always lies
//! in (0, 1] and never rises.
//!
//! A plain value type (aggregate; regular); validate() checks it, and every query validates.
//! Apply it at a step boundary (between iterations): `pipe.set_density(w.at_iteration(i, I))`
//! (gradcomp::pipeline::set_density) or `feedback.compressor().set_density(...)` for one
//! gradcomp::error_feedback; any gradcomp::density_compressor takes it. Changing the density
//! between calls keeps error feedback's conservation exact (each call splits its accumulation
//! into sent + residual by selection).
struct density_warmup {
  double initial_density = 0.25; //!< d0: density at epoch 0, in (0, 1], >= final_density.
  double final_density = 0.001;  //!< dT: the target density from epoch E on, in (0, 1].
  double warmup_epochs = 4.0;    //!< E: epochs of warm-up, finite and >= 0 (0: always dT).
  bool stepped = true;           //!< true: one density per whole epoch (DGC); false: continuous.

  //! @brief Checks the schedule.
  //! @throws std::invalid_argument naming the value and its limit if final_density or
  //! initial_density is outside (0, 1], initial_density < final_density, or warmup_epochs is
  //! negative or not finite (NaN included).
  void validate() const {
    detail::require(final_density > 0.0 && final_density <= 1.0, "density_warmup: final_density ",
                    final_density, " is outside (0, 1]");
    detail::require(initial_density > 0.0 && initial_density <= 1.0,
                    "density_warmup: initial_density ", initial_density, " is outside (0, 1]");
    detail::require(initial_density >= final_density, "density_warmup: initial_density ",
                    initial_density, " is below final_density ", final_density,
                    " (the warm-up lowers the density)");
    detail::require(std::isfinite(warmup_epochs) && warmup_epochs >= 0.0,
                    "density_warmup: warmup_epochs ", warmup_epochs, " must be finite and >= 0");
  }

  //! @brief The density at fractional epoch `epoch` (epochs of training done, e.g. 1.5 = half
  //! way through the second epoch). O(1).
  //! @returns d(epoch) as in the class comment, in [final_density, initial_density].
  //! @throws std::invalid_argument if the schedule is invalid (validate()), or naming `epoch` if
  //! it is negative or not finite.
  [[nodiscard]] double at_epoch(double epoch) const {
    validate();
    detail::require(std::isfinite(epoch) && epoch >= 0.0, "density_warmup: epoch ", epoch,
                    " must be finite and >= 0");
    if (epoch >= warmup_epochs) {
      return final_density;
    }
    const double e = stepped ? std::floor(epoch) : epoch;
    const double d = initial_density * std::pow(final_density / initial_density, e / warmup_epochs);
    return std::clamp(d, final_density, initial_density);
  }

  //! @brief The density of iteration `iteration` (0-based, counted over the whole training) with
  //! `iterations_per_epoch` iterations per epoch: at_epoch(iteration / iterations_per_epoch).
  //! When `stepped`, the iterations of one epoch share one density (for a fractional E, the
  //! epoch that contains E switches to final_density at E). O(1).
  //! @throws std::invalid_argument if the schedule is invalid or iterations_per_epoch is 0.
  [[nodiscard]] double at_iteration(std::uint64_t iteration,
                                    std::uint64_t iterations_per_epoch) const {
    detail::require(iterations_per_epoch > 0, "density_warmup: iterations_per_epoch ",
                    iterations_per_epoch, " is below the minimum 1");
    return at_epoch(static_cast<double>(iteration) / static_cast<double>(iterations_per_epoch));
  }

  //! Member-wise equality (same schedule). O(1).
  friend bool operator==(const density_warmup&, const density_warmup&) = default;
};

} // namespace gradcomp
