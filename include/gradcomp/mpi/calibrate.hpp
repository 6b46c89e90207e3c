// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Calibration: measure the alpha-beta(-gamma) parameters of the user's own network by
//! timing gradcomp's ring allreduce over a range of sizes and fitting S4's cost formula.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/fit.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace gradcomp::mpi {

//! @brief What calibrate_ring_allreduce measured and fitted.
struct calibration {
  cost::network net;           //!< alpha and beta from the fit (gamma folded into beta).
  cost::line_fit fit;          //!< the line t = a + b M through the median times.
  std::vector<double> bytes;   //!< message sizes timed.
  std::vector<double> seconds; //!< median time per size (slowest rank per repetition).
};

//! @brief Options of calibrate_ring_allreduce.
struct calibration_options {
  std::size_t min_bytes = std::size_t{1} << 12; //!< smallest message (>= 4).
  std::size_t max_bytes = std::size_t{1} << 24; //!< largest message (>= min_bytes).
  unsigned repetitions = 5;                     //!< timed runs per size (>= 1).
  ring_allreduce_options transport{};           //!< the ring allreduce measured.
};

//! @brief Times gradcomp::mpi::ring_allreduce for sizes min_bytes, 4 min_bytes, ... max_bytes
//! (the median over repetitions of the slowest rank's time, after one warm-up), fits
//! t = a + b M, and converts it with S4's formula t = 2(P-1) alpha + 2(P-1)/P beta M
//! (gamma is not separable from beta this way and is folded into it): alpha = a / (2(P-1)),
//! beta = b P / (2(P-1)). With one rank, nothing is sent: alpha = beta = 0.
//!
//! Collective: every rank must call it with the same options; every rank gets the same result.
//! Sends about 2 (P-1)/P x sum of sizes x (repetitions + 1) bytes per rank.
//! @throws std::invalid_argument on bad options; mpi_error on MPI failures.
[[nodiscard]] inline calibration calibrate_ring_allreduce(const communicator& comm,
                                                          const calibration_options& o = {}) {
  gradcomp::detail::require(o.min_bytes >= sizeof(float) && o.max_bytes >= o.min_bytes,
                            "calibration sizes ", o.min_bytes, " .. ", o.max_bytes,
                            " are invalid (need 4 <= min <= max)");
  gradcomp::detail::require(o.repetitions >= 1, "calibration repetitions ", o.repetitions,
                            " is below 1");
  calibration result;
  ring_allreduce ring(comm, o.transport);
  for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    std::vector<double> times;
    for (unsigned rep = 0; rep <= o.repetitions; ++rep) {
      std::vector<float> sync(1, 0.0f);
      ring(sync); // lines the ranks up before timing
      const auto start = std::chrono::steady_clock::now();
      ring(data);
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double slowest = elapsed;
      detail::check(MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm.native()),
                    "MPI_Allreduce");
      if (rep > 0) { // the first run warms up buffers and connections
        times.push_back(slowest);
      }
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                     times.end());
    result.bytes.push_back(static_cast<double>(bytes));
    result.seconds.push_back(times[times.size() / 2]);
    if (bytes > o.max_bytes / 4) {
      break;
    }
  }
  const int p = comm.size();
  if (result.bytes.size() >= 2) {
    result.fit = cost::fit_line(result.bytes, result.seconds);
  }
  if (p > 1) {
    result.net.alpha_seconds = std::max(0.0, result.fit.intercept) / (2.0 * (p - 1));
    result.net.beta_seconds_per_byte = std::max(0.0, result.fit.slope) * p / (2.0 * (p - 1));
  }
  return result;
}

} // namespace gradcomp::mpi
