// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Least-squares fit of a straight line t = intercept + slope x, with its quality; used
//! by calibration to turn timings into alpha and beta.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace gradcomp::cost {

//! @brief A fitted line and how well it fits.
struct line_fit {
  double intercept = 0.0;          //!< t at x = 0 (seconds when fitting times).
  double slope = 0.0;              //!< dt/dx (seconds per byte when x is bytes).
  double r_squared = 0.0;          //!< coefficient of determination, 1 = perfect.
  double max_relative_error = 0.0; //!< largest |fit - t| / t over the points.
};

//! @brief Ordinary least squares over the points (x[i], t[i]). O(n).
//! @throws std::invalid_argument if the lengths differ, fewer than 2 points, or all x equal.
[[nodiscard]] inline line_fit fit_line(std::span<const double> x, std::span<const double> t) {
  gradcomp::detail::require(x.size() == t.size(), "fit_line: ", x.size(), " x values but ",
                            t.size(), " t values");
  gradcomp::detail::require(x.size() >= 2, "fit_line: ", x.size(),
                            " points, at least 2 are needed");
  const auto n = static_cast<double>(x.size());
  double sx = 0, st = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    st += t[i];
  }
  const double mx = sx / n;
  const double mt = st / n;
  double sxx = 0, sxt = 0, stt = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxt += (x[i] - mx) * (t[i] - mt);
    stt += (t[i] - mt) * (t[i] - mt);
  }
  gradcomp::detail::require(sxx > 0, "fit_line: every x value is ", mx,
                            "; a line needs two distinct x");
  line_fit f;
  f.slope = sxt / sxx;
  f.intercept = mt - f.slope * mx;
  double residual = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double predicted = f.intercept + f.slope * x[i];
    residual += (t[i] - predicted) * (t[i] - predicted);
    if (t[i] != 0) {
      f.max_relative_error =
          std::max(f.max_relative_error, std::abs(predicted - t[i]) / std::abs(t[i]));
    }
  }
  f.r_squared = stt > 0 ? 1.0 - residual / stt : 1.0;
  return f;
}

//! @brief The network whose ring allreduce takes the fitted time t = intercept + slope M for a
//! message of M bytes on `ranks` ranks: S4's ring formula t = 2 (P-1) alpha + 2 (P-1) / P beta M
//! solved for alpha = max(0, intercept) / (2 (P-1)) and beta = max(0, slope) P / (2 (P-1))
//! (negative fits clamp to 0); alpha = beta = 0 for one rank (no message). gamma is 0. O(1).
//! Used by mpi::calibrate_ring_allreduce and the Python hooks' calibration.
//! @throws std::invalid_argument naming the value if ranks < 1.
[[nodiscard]] inline network ring_allreduce_network(const line_fit& f, int ranks) {
  gradcomp::detail::require(ranks >= 1, "ring_allreduce_network: rank count ", ranks,
                            " is below 1");
  network net;
  if (ranks > 1) {
    const double p = ranks;
    net.alpha_seconds = std::max(0.0, f.intercept) / (2.0 * (p - 1));
    net.beta_seconds_per_byte = std::max(0.0, f.slope) * p / (2.0 * (p - 1));
  }
  return net;
}

} // namespace gradcomp::cost
