// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The agreement that constructs a gradcomp::mpi::async_parameter_server: each rank checks
//! its options, then one nonblocking allreduce tells every rank whether a rank's options are
//! invalid or the ranks' agreed options differ, so that all of them throw together (or none does).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/async_parameter_server_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/async_server.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace gradcomp::mpi::detail {

//! This rank's checks of async_parameter_server's options `o` for `n` elements on `comm`.
//! @throws std::invalid_argument naming the first option that is invalid.
inline void validate_async_options(const communicator& comm,
                                   std::size_t n,
                                   const async_parameter_server_options& o) {
  const int p = comm.size();
  using gradcomp::detail::require;
  require(o.servers >= 1, "async_parameter_server: servers ", o.servers, " is below 1");
  require(o.servers < p, "async_parameter_server: ", o.servers,
          " dedicated servers leave no worker among the ", p,
          " ranks (servers must be fewer than ranks)");
  require(o.staleness_bound >= 0, "async_parameter_server: staleness_bound ", o.staleness_bound,
          " is negative");
  require(o.max_pushes_in_flight >= 1, "async_parameter_server: max_pushes_in_flight ",
          o.max_pushes_in_flight, " is below 1");
  const int tag_ub = detail::tag_upper_bound(comm);
  require(o.tag_base >= 0 && o.tag_base <= tag_ub - (detail::async_tag_count - 1),
          "async_parameter_server: tag_base ", o.tag_base,
          " is outside [0, MPI_TAG_UB - 3 = ", tag_ub - (detail::async_tag_count - 1), "]");
  require(o.indices != index_encoding::none,
          "async_parameter_server: index encoding none cannot carry sparse pushes");
  const auto servers = static_cast<std::size_t>(o.servers);
  const std::size_t longest = n / servers + (n % servers != 0 ? 1 : 0);
  require(longest <= INT_MAX, "async_parameter_server: shards of up to ", longest,
          " elements exceed INT_MAX (one MPI message)");
}

//! Collective: validate_async_options() on this rank, then one MPI_Iallreduce (MIN) over the
//! agreed fields (n, servers, staleness_bound, tag_base), their complements (so the minimum of a
//! complement is the maximum) and the lowest rank whose options are invalid, waited for through
//! o.wait. @throws std::invalid_argument on the ranks whose options are invalid, mpi_error on
//! the others naming the first such rank; mpi_error on every rank when ranks pass different n or
//! agreed options.
inline void agree_async_options(const communicator& comm,
                                std::size_t n,
                                const async_parameter_server_options& o) {
  std::string problem;
  try {
    validate_async_options(comm, n, o);
  } catch (const std::invalid_argument& e) {
    problem = e.what();
  }
  const int p = comm.size();
  const std::array<std::uint64_t, 4> fields = {n, static_cast<std::uint64_t>(o.servers),
                                               static_cast<std::uint64_t>(o.staleness_bound),
                                               static_cast<std::uint64_t>(o.tag_base)};
  std::array<std::uint64_t, 9> values{};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    values[i] = fields[i];
    values[fields.size() + i] = ~fields[i];
  }
  values[8] = static_cast<std::uint64_t>(problem.empty() ? p : comm.rank());
  MPI_Request request = MPI_REQUEST_NULL;
  detail::check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                               MPI_UINT64_T, MPI_MIN, comm.native(), &request),
                "MPI_Iallreduce");
  mpi::wait(request, o.wait);
  if (!problem.empty()) {
    throw std::invalid_argument(problem);
  }
  if (values[8] != static_cast<std::uint64_t>(p)) {
    throw mpi_error(gradcomp::detail::concat("gradcomp mpi: async_parameter_server: rank ",
                                             values[8],
                                             " passed invalid options (its exception says why)"));
  }
  static constexpr const char* names[] = {"n", "servers", "staleness_bound", "tag_base"};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (values[i] != ~values[fields.size() + i]) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: async_parameter_server: ranks pass different options (", names[i],
          " from ", values[i], " to ", ~values[fields.size() + i], "; this rank passed ", fields[i],
          ")"));
    }
  }
}

} // namespace gradcomp::mpi::detail
