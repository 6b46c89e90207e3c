// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Sub-communicators for gradcomp's hierarchical transports: an owner of the raw MPI_Comm
//! an MPI_Comm_split makes, and splits that hand back gradcomp communicators.
#pragma once

#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <optional>
#include <utility>

namespace gradcomp::mpi::detail {

//! @brief Owns an MPI_Comm that gradcomp created (MPI_Comm_split, MPI_Comm_split_type) and
//! frees it on destruction (unless MPI is finalised). Freeing is collective over the
//! communicator's ranks, so every member must destroy its owner. Move-only.
class owned_comm {
public:
  owned_comm() = default;
  owned_comm(const owned_comm&) = delete;
  owned_comm& operator=(const owned_comm&) = delete;
  owned_comm(owned_comm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  owned_comm& operator=(owned_comm&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  ~owned_comm() { release(); }

  //! The owned communicator (MPI_COMM_NULL if none).
  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  //! Output slot for an MPI call that creates the communicator (frees any previous one first).
  [[nodiscard]] MPI_Comm* out() noexcept {
    release();
    return &comm_;
  }

private:
  void release() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && !finalized) {
      MPI_Comm_free(&comm_);
    }
    comm_ = MPI_COMM_NULL;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
};

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
