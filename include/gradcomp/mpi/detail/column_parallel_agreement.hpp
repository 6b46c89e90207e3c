// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The argument agreement of gradcomp::mpi::column_parallel_linear: one nonblocking
//! allreduce (MPI_MIN over values and their negations) after which every rank knows whether
//! any rank disagreed or failed a local check, so that all of them throw together.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gradcomp::mpi::detail {

//! The agreed fields: (batch M, K, N, pass, exchange) as value and negation, then the
//! local-check flag and the forward-input cache flag (minimum: 0 if any rank has 0).
class column_parallel_agreement {
public:
  //! Records this rank's arguments (call before start(); without start() verify() checks
  //! them alone).
  void set_local(std::size_t batch,
                 std::size_t k,
                 std::size_t n,
                 int pass,
                 int exchange,
                 bool ok,
                 bool cache) {
    mine_ = {static_cast<std::int64_t>(batch), static_cast<std::int64_t>(k),
             static_cast<std::int64_t>(n), pass, exchange};
    for (std::size_t i = 0; i < mine_.size(); ++i) {
      values_[2 * i] = mine_[i];
      values_[2 * i + 1] = -mine_[i];
    }
    values_[ok_index] = ok ? 1 : 0;
    values_[cache_index] = cache ? 1 : 0;
  }

  //! Starts the allreduce (96 bytes); the caller completes `request`. Collective.
  void start(const communicator& comm, MPI_Request& request) {
    check(MPI_Iallreduce(MPI_IN_PLACE, values_.data(), static_cast<int>(values_.size()),
                         MPI_INT64_T, MPI_MIN, comm.native(), &request),
          "MPI_Iallreduce (column_parallel_linear arguments)");
  }

  //! After the allreduce completed (or alone): throws mpi_error, the same condition on every
  //! rank, if the passes, K, N or batches differ, if any rank failed its local check (this
  //! rank's `local_error` names it), if the batch is 0 or N < P, or if the exchanges differ.
  void verify(const std::string& local_error, std::size_t ranks) const {
    constexpr const char* prefix = "gradcomp mpi: column_parallel_linear: ";
    const auto differs = [&](std::size_t i) { return values_[2 * i] != -values_[2 * i + 1]; };
    const auto range = [&](std::size_t i) {
      return gradcomp::detail::concat(values_[2 * i], " to ", -values_[2 * i + 1],
                                      "; this rank passed ", mine_[i]);
    };
    if (differs(3)) {
      throw mpi_error(gradcomp::detail::concat(
          prefix, "ranks run different passes (some forward, some backward)"));
    }
    if (differs(1)) {
      throw mpi_error(
          gradcomp::detail::concat(prefix, "ranks pass different K (from ", range(1), ")"));
    }
    if (differs(2)) {
      throw mpi_error(
          gradcomp::detail::concat(prefix, "ranks pass different N (from ", range(2), ")"));
    }
    if (differs(4)) {
      throw mpi_error(gradcomp::detail::concat(prefix, "ranks pass different exchange options "
                                                       "(fc_exchange)"));
    }
    if (static_cast<std::size_t>(values_[4]) < ranks) {
      throw mpi_error(gradcomp::detail::concat(prefix, "N = ", values_[4],
                                               " outputs cannot be "
                                               "split over ",
                                               ranks, " ranks (N >= P needed)"));
    }
    if (values_[ok_index] == 0) {
      throw mpi_error(prefix + (local_error.empty()
                                    ? std::string("another rank passed invalid arguments")
                                    : "invalid arguments on this rank: " + local_error));
    }
    if (differs(0)) {
      throw mpi_error(
          gradcomp::detail::concat(prefix, "ranks pass different batches M (from ", range(0), ")"));
    }
    if (values_[0] == 0) {
      throw mpi_error(gradcomp::detail::concat(prefix, "batch M = 0 (at least one sample per "
                                                       "rank is needed)"));
    }
  }

  //! Whether every rank's forward-gathered inputs are still valid for the backward pass.
  [[nodiscard]] bool cache_valid() const noexcept { return values_[cache_index] != 0; }

private:
  static constexpr std::size_t ok_index = 10;
  static constexpr std::size_t cache_index = 11;
  std::array<std::int64_t, 12> values_{};
  std::array<std::int64_t, 5> mine_{};
};

} // namespace gradcomp::mpi::detail
