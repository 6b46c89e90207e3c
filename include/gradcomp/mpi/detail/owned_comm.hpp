// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::owned_comm: RAII ownership of an MPI_Comm gradcomp created.
#pragma once

#include <mpi.h>

#include <utility>

namespace gradcomp::mpi::detail {

//! @brief Owns an MPI_Comm that gradcomp created (MPI_Comm_dup, MPI_Comm_split,
//! MPI_Comm_split_type) and
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

} // namespace gradcomp::mpi::detail
