// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::any_rank: one boolean agreed by every rank (logical OR), e.g. a loss
//! scale's overflow flag (precision/loss_scale.hpp), so that every rank skips the same step.
#pragma once

#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

namespace gradcomp::mpi {

//! @brief True on every rank if `flag` is true on at least one rank of `comm`. One 4-byte
//! MPI_Allreduce (MPI_LOR): about 2 log2(P) latencies; deterministic.
//! @collective
//! @throws mpi_error if MPI fails.
[[nodiscard]] inline bool any_rank(bool flag, const communicator& comm) {
  int local = flag ? 1 : 0;
  int any = 0;
  detail::check(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_LOR, comm.native()),
                "MPI_Allreduce (any_rank)");
  return any != 0;
}

} // namespace gradcomp::mpi
