// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::calibrate_model_parallel_fixed_seconds: the measured fixed cost of
//! one model-parallel FC pass (mpi::column_parallel_linear), for the planner's cost model
//! (cost::fc_cost_options::model_parallel_fixed_seconds).
#pragma once

#include <gradcomp/cost/fc_exchange.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/linalg/gemm.hpp>
#include <gradcomp/mpi/calibrate.hpp>
#include <gradcomp/mpi/column_parallel_linear.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>

#include <cstddef>
#include <vector>

namespace gradcomp::mpi {

//! @brief Median over `repetitions` (after one warm-up) of the slowest rank's time of one
//! forward + backward pass of a column_parallel_linear with one sample, one input and P
//! outputs (the smallest layer: every value moved is one float), with exchange `exchange`, its
//! GEMMs skipped. This is the pass's fixed cost (agreements, collectives' start-up, progress
//! under the wait policy), measured with the MPI library's own small-message algorithms.
//! Collective: every rank of `comm` must call it with the same arguments. Takes about
//! 1 + repetitions passes plus as many 4-byte ring allreduces (lining the ranks up).
//! @throws std::invalid_argument if repetitions < 1; mpi_error if MPI fails.
[[nodiscard]] inline double
calibrate_model_parallel_fixed_seconds(const communicator& comm,
                                       fc_exchange exchange = fc_exchange::all_to_all,
                                       unsigned repetitions = 5) {
  gradcomp::detail::require(repetitions >= 1, "calibration repetitions ", repetitions,
                            " is below 1");
  const auto p = static_cast<std::size_t>(comm.size());
  column_parallel_linear<no_gemm> fc(comm, 1, p, {}, {.exchange = exchange});
  std::vector<float> x(1, 1.0f), w(1, 1.0f), b(1, 0.0f), y(p), dy(p, 1.0f), dw(1), db(1), dx(1);
  ring_allreduce line(comm);
  std::vector<float> sync(1, 0.0f);
  return detail::median_slowest_seconds(
      comm, repetitions, [&] { line(sync); },
      [&] {
        fc.forward(x, w, b, y);
        fc.backward(dy, x, w, dw, db, dx);
      });
}

} // namespace gradcomp::mpi
