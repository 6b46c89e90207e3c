// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::pipeline_iteration_stats: what one iteration of gradcomp::pipeline did
//! (times on each thread, bytes, selected elements per layer or group).
#pragma once

#include <gradcomp/compressor/compressor.hpp>

#include <cstddef>
#include <vector>

namespace gradcomp {

//! @brief What one pipeline iteration (gradient_ready calls up to finish()) did.
struct pipeline_iteration_stats {
  double compress_seconds = 0.0;    //!< caller's thread, compressing in gradient_ready (s).
  double communicate_seconds = 0.0; //!< communication thread busy: start() to wait() (s).
  //! CPU time the communication thread used from start() to wait() (s; its polling and the
  //! transport's own work, e.g. reductions); negative where the platform has no per-thread
  //! CPU clock (detail::thread_cpu_seconds).
  double communicate_cpu_seconds = 0.0;
  double finish_wait_seconds = 0.0; //!< finish() blocked on communication (not overlapped, s).
  //! The transport reports its bytes (models byte_counting_transport and, where it has
  //! counts_bytes(), says so: gradcomp::any_transport over a transport without counters does not).
  bool bytes_reported = false;
  std::size_t bytes_sent = 0;     //!< summed over groups (0 unless bytes_reported).
  std::size_t bytes_received = 0; //!< summed over groups (0 unless bytes_reported).
  //! Elements compressed: of all layers, times the parts per rank (1 unless the transport is a
  //! multi_part_transport), so selected / numel is the density sent.
  std::size_t numel = 0;
  std::size_t selected = 0; //!< elements sent: sum of the layers' (and parts') k_selected.
  //! NaN and infinite values the compressors dropped (selection_stats::nonfinite, summed over
  //! layers or groups and parts; nonfinite_policy::skip_step only). Agree on `nonfinite > 0`
  //! across ranks (mpi::any_rank) to skip the step on every rank.
  std::size_t nonfinite = 0;
  //! Sent values a selecting transport (gTop-k) did not sum, given back to the residuals.
  std::size_t unselected = 0;
  //! Per layer, forward order; with P parts per rank, P x layers entries, part-major (entry
  //! p L + l is layer l of part p). With compression_scope::per_group only numel and
  //! k_selected (the group's selected elements that fall in the layer) are set; the rest is in
  //! `groups`.
  std::vector<selection_stats> layers;
  //! Per group, sending order, with compression_scope::per_group (empty per layer); with P
  //! parts per rank, P x groups entries, part-major.
  std::vector<selection_stats> groups;
};

} // namespace gradcomp
