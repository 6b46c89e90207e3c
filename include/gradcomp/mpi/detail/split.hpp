// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Sub-communicators for gradcomp's hierarchical transports: splits that hand back
//! gradcomp communicators.
#pragma once

#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/owned_comm.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <optional>
#include <utility>

namespace gradcomp::mpi::detail {

//! @brief The part of `parent` this rank lands in after MPI_Comm_split(color, key), as a gradcomp
//! communicator (a duplicate with MPI_ERRORS_RETURN; the split itself is freed before
//! returning), or std::nullopt where `color` is MPI_UNDEFINED.
//! Collective: every rank of `parent` must call it, in the same order as other collectives there.
//! @throws mpi_error if splitting or duplicating fails.
[[nodiscard]] inline std::optional<communicator>
split(const communicator& parent, int color, int key) {
  owned_comm raw;
  check(MPI_Comm_split(parent.native(), color, key, raw.out()), "MPI_Comm_split");
  if (raw.get() == MPI_COMM_NULL) {
    return std::nullopt;
  }
  return std::optional<communicator>(std::in_place, raw.get());
}

//! @brief The ranks of `parent` that share this rank's memory (its node:
//! MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), ordered by their rank in `parent`.
//! Collective over `parent`, like split().
//! @throws mpi_error if splitting or duplicating fails.
[[nodiscard]] inline communicator split_by_node(const communicator& parent) {
  owned_comm raw;
  check(MPI_Comm_split_type(parent.native(), MPI_COMM_TYPE_SHARED, parent.rank(), MPI_INFO_NULL,
                            raw.out()),
        "MPI_Comm_split_type");
  return communicator(raw.get());
}

} // namespace gradcomp::mpi::detail
