// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Calibration: measure the alpha-beta(-gamma) parameters of the user's own network by
//! timing a gradcomp transport (the ring allreduce, or the sparse allgather) over a range of
//! sizes and fitting its cost formula.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/fit.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/sparse_allgather.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcomp::mpi {

//! @brief What a calibration (calibrate_ring_allreduce, calibrate_sparse_allgather) measured
//! and fitted.
struct calibration {
  cost::network net;           //!< alpha and beta from the fit (gamma folded into beta).
  cost::line_fit fit;          //!< the line t = a + b M through the median times.
  std::vector<double> bytes;   //!< message sizes timed.
  std::vector<double> seconds; //!< median time per size (slowest rank per repetition).
};

//! @brief How calibrate_ring_allreduce lines the ranks up before each timed run and compares
//! their times.
enum class calibration_line_up {
  //! A ring allreduce of one float before each run (2 (P - 1) latencies) and the slowest rank's
  //! time by a blocking MPI_Allreduce after each run. The default: on an idle 4-host emulated
  //! cluster (1 Gbit/s, 2 shared cores) its alpha, about 0.5 ms, matched a ring's steps right
  //! after backward in training (0.4-0.6 ms each), where barrier measured 0.02 ms.
  ring_allreduce,
  //! An MPI_Ibarrier completed under the ring's wait policy before each run (about log2 P
  //! latencies) and the run times compared once per size (one MPI_Allreduce): for a calibration
  //! beside computation (gradcomp-train's --calibrate-under-load), where a latency costs
  //! milliseconds. Under that load both line-ups measured the same alpha and beta.
  barrier,
};

//! @brief Options of calibrate_ring_allreduce.
struct calibration_options {
  std::size_t min_bytes = std::size_t{1} << 12; //!< smallest message (>= 4).
  std::size_t max_bytes = std::size_t{1} << 24; //!< largest message (>= 4 min_bytes).
  unsigned repetitions = 5;                     //!< timed runs per size (>= 1).
  ring_allreduce_options transport{};           //!< the ring allreduce measured.
  //! How the ranks line up before each run (calibration_line_up).
  calibration_line_up line_up = calibration_line_up::ring_allreduce;
};

namespace detail {

// The median over `repetitions` (after one warm-up run) of the slowest rank's time of `op`,
// each run preceded by `line_up` (untimed). The ranks' times are compared after each run (one
// blocking MPI_Allreduce per run), or with `compare_once` after the last (one MPI_Allreduce of
// every run's time, elementwise maximum). Collective.
template <class LineUp, class Op>
[[nodiscard]] double median_slowest_seconds(const communicator& comm,
                                            unsigned repetitions,
                                            LineUp line_up,
                                            Op op,
                                            bool compare_once = false) {
  std::vector<double> slowest(std::size_t{repetitions} + 1);
  for (double& run : slowest) {
    line_up();
    const auto start = std::chrono::steady_clock::now();
    op();
    run = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!compare_once) {
      check(MPI_Allreduce(MPI_IN_PLACE, &run, 1, MPI_DOUBLE, MPI_MAX, comm.native()),
            "MPI_Allreduce");
    }
  }
  if (compare_once) {
    check(MPI_Allreduce(MPI_IN_PLACE, slowest.data(), static_cast<int>(slowest.size()), MPI_DOUBLE,
                        MPI_MAX, comm.native()),
          "MPI_Allreduce");
  }
  // the first run warms up buffers and connections
  std::vector<double> times(slowest.begin() + 1, slowest.end());
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return times[times.size() / 2];
}

// Lines the ranks up before a timed run: MPI_Ibarrier completed under `policy`. Collective.
inline void barrier_line_up(const communicator& comm, const wait_policy& policy) {
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm.native(), &request), "MPI_Ibarrier");
  mpi::wait(request, policy);
}

// Sizes lo, 4 lo, 16 lo, ... up to hi (hi itself when it is lo times a power of 4).
[[nodiscard]] inline std::vector<std::size_t> calibration_sizes(std::size_t lo, std::size_t hi) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = lo; s <= hi; s *= 4) {
    sizes.push_back(s);
    if (s > hi / 4) {
      break;
    }
  }
  return sizes;
}

} // namespace detail

//! @brief Times gradcomp::mpi::ring_allreduce for sizes min_bytes, 4 min_bytes, ... max_bytes
//! (the median over repetitions of the slowest rank's time, after one warm-up; each run after
//! the line-up of `o.line_up`), fits
//! t = a + b M, and converts it with S4's formula t = 2(P-1) alpha + 2(P-1)/P beta M
//! (gamma is not separable from beta this way and is folded into it): alpha = a / (2(P-1)),
//! beta = b P / (2(P-1)). With one rank, nothing is sent: alpha = beta = 0.
//!
//! @collective With the same options on every rank; every rank gets the same result.
//! @wirebytes About 2 (P-1)/P x sum of sizes x (repetitions + 1) sent per rank, plus the
//! line-ups and the comparisons of the run times (a few bytes each).
//! @throws std::invalid_argument on bad options; mpi_error on MPI failures.
[[nodiscard]] inline calibration calibrate_ring_allreduce(const communicator& comm,
                                                          const calibration_options& o = {}) {
  gradcomp::detail::require(o.min_bytes >= sizeof(float) && o.max_bytes / 4 >= o.min_bytes,
                            "calibration sizes ", o.min_bytes, " .. ", o.max_bytes,
                            " are invalid (need 4 <= min and 4 min <= max: a line needs two "
                            "sizes)");
  gradcomp::detail::require(o.repetitions >= 1, "calibration repetitions ", o.repetitions,
                            " is below 1");
  calibration result;
  ring_allreduce ring(comm, o.transport);
  const bool barrier = o.line_up == calibration_line_up::barrier;
  std::vector<float> sync(1, 0.0f); // the ring line-up's one float
  const auto line_up = [&] {
    if (barrier) {
      detail::barrier_line_up(comm, o.transport.wait);
    } else {
      ring(sync);
    }
  };
  for (const std::size_t bytes : detail::calibration_sizes(o.min_bytes, o.max_bytes)) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    result.bytes.push_back(static_cast<double>(bytes));
    result.seconds.push_back(detail::median_slowest_seconds(
        comm, o.repetitions, line_up, [&] { ring(data); }, barrier));
  }
  const int p = comm.size();
  if (result.bytes.size() >= 2) {
    result.fit = cost::fit_line(result.bytes, result.seconds);
  }
  result.net = cost::ring_allreduce_network(result.fit, p);
  return result;
}

//! @brief Options of calibrate_sparse_allgather.
struct sparse_calibration_options {
  std::size_t min_pairs = std::size_t{1} << 10; //!< smallest message, (index, value) pairs (>= 1).
  std::size_t max_pairs = std::size_t{1} << 18; //!< largest message, pairs (>= 4 min_pairs).
  //! Density of the calibration messages, (0, 1]: the dense length is pairs / density, which
  //! sets the gaps between indices (their varint bytes) and the output the receivers clear.
  //! Calibrate at the density the transport will carry.
  double density = 0.01;
  unsigned repetitions = 5;             //!< timed runs per size (>= 1).
  sparse_allgather_options transport{}; //!< the sparse allgather measured (dense switch off).
};

//! @brief Times gradcomp::mpi::sparse_allgather itself, for messages of min_pairs, 4 min_pairs,
//! ... max_pairs pairs at `density` (indices evenly spread with a per-rank offset, so the ranks'
//! messages interleave; fp32 values), and fits its cost formula
//! cost::sparse_allgather_seconds = 2(P-1) alpha + (P-1) beta (H + M), M the encoded bytes per
//! rank and H = cost::sparse_allgather_header_bytes (32), to the median slowest-rank times: with
//! t = a + b M, beta = b / (P-1) and alpha = (a - H b) / (2(P-1)) (each clamped at 0). `bytes`
//! holds M per size. The transport's receive-side work (decoding and summing P-1 messages, clearing
//! the dense output) grows with M and is folded into beta and alpha: the result prices this
//! transport, not the bare network (compare with calibrate_ring_allreduce's beta to see that work).
//! With one rank, alpha = beta = 0.
//!
//! @collective With the same options on every rank; every rank gets the same result.
//!
//! Sends about (P-1) x sum of M x (repetitions + 1) bytes per rank; needs 4 max_pairs / density
//! bytes for the output.
//! @throws std::invalid_argument on bad options (naming the value); mpi_error on MPI failures.
[[nodiscard]] inline calibration
calibrate_sparse_allgather(const communicator& comm, const sparse_calibration_options& o = {}) {
  gradcomp::detail::require(o.min_pairs >= 1 && o.max_pairs / 4 >= o.min_pairs,
                            "calibration sizes ", o.min_pairs, " .. ", o.max_pairs,
                            " pairs are invalid (need 1 <= min and 4 min <= max: a line needs two "
                            "sizes)");
  gradcomp::detail::require(o.density > 0.0 && o.density <= 1.0, "calibration density ", o.density,
                            " is outside (0, 1]");
  gradcomp::detail::require(o.repetitions >= 1, "calibration repetitions ", o.repetitions,
                            " is below 1");
  const double dense_length = std::ceil(static_cast<double>(o.max_pairs) / o.density);
  gradcomp::detail::require(dense_length <= static_cast<double>(max_sparse_dense_length_elements),
                            "calibration dense length ", dense_length, " (", o.max_pairs,
                            " pairs at density ", o.density, ") exceeds the 32-bit index limit ",
                            max_sparse_dense_length_elements);
  sparse_allgather_options transport = o.transport;
  transport.dense_switch = false;
  sparse_allgather gather(comm, transport);
  const int p = comm.size();
  calibration result;
  sparse_message empty; // the line-up exchange before each timed run
  empty.clear(0);
  std::vector<float> none;
  for (const std::size_t k : detail::calibration_sizes(o.min_pairs, o.max_pairs)) {
    const auto n = static_cast<std::size_t>(std::ceil(static_cast<double>(k) / o.density));
    sparse_message message;
    message.clear(n);
    const std::size_t stride = n / k;
    // a per-rank offset below the stride and below 128 (one varint byte on every rank, so that
    // every rank's message has the same size)
    const std::size_t offset =
        static_cast<std::size_t>(comm.rank()) % std::min<std::size_t>(stride, 128);
    for (std::size_t i = 0; i < k; ++i) {
      message.indices.push_back(static_cast<std::uint32_t>(i * stride + offset));
      message.values.push_back(1.0f);
    }
    std::vector<float> sum(n);
    result.bytes.push_back(static_cast<double>(encoded_size_bytes(message, transport.indices)));
    result.seconds.push_back(detail::median_slowest_seconds(
        comm, o.repetitions, [&] { gather(empty, none); }, [&] { gather(message, sum); }));
  }
  if (result.bytes.size() >= 2) {
    result.fit = cost::fit_line(result.bytes, result.seconds);
  }
  if (p > 1) {
    const double b = std::max(0.0, result.fit.slope);
    result.net.beta_seconds_per_byte = b / (p - 1);
    result.net.alpha_seconds =
        std::max(0.0, result.fit.intercept - cost::sparse_allgather_header_bytes * b) /
        (2.0 * (p - 1));
  }
  return result;
}

} // namespace gradcomp::mpi
