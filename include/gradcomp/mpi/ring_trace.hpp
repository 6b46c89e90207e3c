// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::ring_trace: an optional per-step timeline of ring_allreduce (when each
//! step was posted, when its receives and its sends completed, how long the reduction took and
//! how often the caller polled), to find where a ring's time goes inside a training run.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcomp::mpi {

//! @brief One step of one ring_allreduce operation, as seen by this rank. Times are seconds of
//! std::chrono::steady_clock since its epoch (comparable between the threads of one process,
//! not between processes).
struct ring_step_record {
  std::uint64_t operation = 0;    //!< which start() of the traced object (0, 1, ...).
  int step = 0;                   //!< 0 .. P-2 reduce-scatter, P-1 .. 2P-3 allgather.
  std::size_t segments = 0;       //!< messages sent in the step (as many received, +-1).
  std::size_t bytes_sent = 0;     //!< payload bytes this rank sent in the step.
  std::size_t bytes_received = 0; //!< payload bytes this rank received in the step.
  //! The step was posted: its receives, and the sends whose data had arrived (with
  //! ring_allreduce_options::steps_in_flight = 2 the others follow segment by segment, while
  //! the step before it still runs; the step's duration then includes waiting for that data).
  double posted_seconds = 0.0;
  //! The step's last receive was found complete (and, in the reduce-scatter, reduced).
  double received_seconds = 0.0;
  double sent_seconds = 0.0;   //!< the step's sends were found complete (the step ended).
  double reduce_seconds = 0.0; //!< time spent summing the received segments (0 in allgather).
  std::uint64_t polls = 0;     //!< passes over the steps in flight while this step was the oldest.
};

//! @brief The records of every traced step, appended in order. Attach through
//! ring_allreduce_options::trace; the ring appends (amortised O(1) per step, no MPI calls), so
//! tracing changes the timing by a clock read per poll. Not thread-safe: read it while no
//! traced operation runs.
struct ring_trace {
  //! One record per traced step, in step order, appended when a step is posted (see
  //! ring_step_record).
  std::vector<ring_step_record> steps;
  std::uint64_t operations = 0; //!< start() calls traced so far.
  //! When each operation's start() was called (before the length check), in operation order.
  std::vector<double> started_seconds;

  //! Now, in the records' unit (steady_clock seconds since its epoch).
  [[nodiscard]] static double now_seconds() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

} // namespace gradcomp::mpi
