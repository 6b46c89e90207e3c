// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::agree_arguments: one small allreduce that checks every rank passes the same
//! values (dense length, k, a fingerprint, ...) and carries each rank's own argument problem, so
//! that a bad argument on any one rank throws on every rank instead of leaving the others
//! waiting in the collective that follows.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi::detail {

//! A named value every rank must pass alike (below 2^63).
struct agreed_value {
  const char* name;
  std::uint64_t value;
};

//! @brief Collective: one MPI_Iallreduce (MPI_MIN over each value and its negation, and over the
//! first rank with a problem), completed through `wait`. Throws mpi_error on every rank when
//! some rank's `problem` is not empty ("<who>: rank R's arguments are invalid", followed by the
//! problem on rank R itself and by "(and this rank's: ...)" on other ranks with a problem of
//! their own) or when the ranks pass different values ("<who>: the ranks disagree: <name>
//! between a and b, ..."). 16 bytes per value + 8 in the allreduce.
//! @pre every value is below 2^63 (a larger one is reported as this rank's problem).
inline void agree_arguments(const communicator& comm,
                            const wait_policy& wait,
                            const char* who,
                            std::initializer_list<agreed_value> values,
                            std::string problem) {
  constexpr auto none = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> mine;
  for (const agreed_value& v : values) {
    const bool fits = v.value <= static_cast<std::uint64_t>(none);
    if (!fits && problem.empty()) {
      problem = gradcomp::detail::concat(v.name, " ", v.value, " is above 2^63");
    }
    const auto s = fits ? static_cast<std::int64_t>(v.value) : 0;
    mine.push_back(s);
    mine.push_back(-s);
  }
  mine.push_back(problem.empty() ? none : comm.rank());
  std::vector<std::int64_t> all(mine.size());
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_MIN,
                       comm.native(), &request),
        "MPI_Iallreduce (argument agreement)");
  mpi::wait(request, wait);
  if (all.back() != none) {
    const bool first = all.back() == comm.rank();
    throw mpi_error(gradcomp::detail::concat(who, ": rank ", all.back(), "'s arguments are invalid",
                                             first ? ": " + problem
                                             : problem.empty()
                                                 ? std::string()
                                                 : " (and this rank's: " + problem + ")"));
  }
  std::string disagreement;
  std::size_t j = 0;
  for (const agreed_value& v : values) {
    if (all[j] != -all[j + 1]) {
      disagreement += gradcomp::detail::concat(disagreement.empty() ? "" : ", ", v.name,
                                               " between ", all[j], " and ", -all[j + 1]);
    }
    j += 2;
  }
  if (!disagreement.empty()) {
    throw mpi_error(gradcomp::detail::concat(who, ": the ranks disagree: ", disagreement));
  }
}

} // namespace gradcomp::mpi::detail
