// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::communicator: gradcomp's own duplicate of the user's communicator.
#pragma once

#include <gradcomp/mpi/detail/owned_comm.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <string>
#include <utility>

namespace gradcomp::mpi {

//! @brief An RAII duplicate (MPI_Comm_dup) of a communicator the user passes, with
//! MPI_ERRORS_RETURN set on it, so that gradcomp's messages never match the user's and every MPI
//! error becomes a gradcomp::mpi::mpi_error instead of aborting the job.
//!
//! gradcomp never assumes MPI_COMM_WORLD: every transport takes one of these. Construction and
//! destruction are collective (MPI_Comm_dup / MPI_Comm_free): every rank of `parent` must
//! construct and destroy it, in the same order as other collectives on `parent`.
//! Threads: gradcomp issues MPI calls from at most one thread at a time per communicator (the
//! pipeline's communication thread, or the caller). MPI must be initialised with at least
//! MPI_THREAD_SERIALIZED if that thread is not the one that called MPI_Init, and with
//! MPI_THREAD_MULTIPLE if the application itself calls MPI concurrently with gradcomp.
//! Move-only.
class communicator {
public:
  //! @param parent  the user's communicator (MPI must be initialised).
  //! @throws mpi_error if duplicating fails.
  explicit communicator(MPI_Comm parent) {
    detail::check(MPI_Comm_dup(parent, comm_.out()), "MPI_Comm_dup");
    detail::check(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN),
                  "MPI_Comm_set_errhandler");
    detail::check(MPI_Comm_rank(comm_.get(), &rank_), "MPI_Comm_rank");
    detail::check(MPI_Comm_size(comm_.get(), &size_), "MPI_Comm_size");
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  //! Takes over `other`'s communicator; `other` then owns none (it must not be used again).
  communicator(communicator&&) noexcept = default;
  //! Frees this object's communicator (collective, as the destructor) and takes over the other's.
  communicator& operator=(communicator&&) noexcept = default;
  ~communicator() = default;

  //! This process's rank, 0 .. size() - 1.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  //! Number of ranks.
  [[nodiscard]] int size() const noexcept { return size_; }
  //! The duplicated communicator, for MPI calls.
  [[nodiscard]] MPI_Comm native() const noexcept { return comm_.get(); }

private:
  detail::owned_comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

//! @brief The name of MPI thread level `level` ("MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED",
//! "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"), or "thread level N" for any other value.
//! Local; allocates.
[[nodiscard]] inline std::string thread_level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  default:
    return gradcomp::detail::concat("thread level ", level);
  }
}

namespace detail {

//! The check of require_thread_level_here() on given values: nothing when `main_thread` (the
//! thread that initialised MPI) or `provided` >= MPI_THREAD_SERIALIZED.
//! @throws mpi_error naming `who`, the provided level and the one needed otherwise.
inline void check_thread_level(int provided, bool main_thread, const char* who) {
  if (main_thread || provided >= MPI_THREAD_SERIALIZED) {
    return;
  }
  throw mpi_error(gradcomp::detail::concat(
      "gradcomp mpi: ", who,
      " calls MPI from a thread other than the one that initialised MPI (a pipeline's "
      "communication thread), which needs MPI_THREAD_SERIALIZED; MPI was initialised with ",
      thread_level_name(provided),
      ": initialise it with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or "
      "gradcomp::mpi::environment"));
}

//! Checks that the calling thread may call MPI: MPI_Is_thread_main and MPI_Query_thread (O(1),
//! local), then check_thread_level. The pipeline transports call it first in start(), before
//! any MPI call, so a pipeline over MPI initialised below MPI_THREAD_SERIALIZED fails with this
//! error on every rank instead of calling MPI where the standard forbids it.
//! @throws mpi_error as check_thread_level.
inline void require_thread_level_here(const char* who) {
  int main_thread = 0;
  int provided = MPI_THREAD_SINGLE;
  MPI_Is_thread_main(&main_thread);
  MPI_Query_thread(&provided);
  check_thread_level(provided, main_thread != 0, who);
}

} // namespace detail

//! @brief RAII MPI initialisation for programs that do not initialise MPI themselves: calls
//! MPI_Init_thread (if MPI is not yet initialised) and MPI_Finalize on destruction (only if it
//! initialised MPI). Not collective in itself, but every process must create one.
class environment {
public:
  //! @param required  thread level asked for (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  //! @param argc      main()'s argc, passed to MPI_Init_thread (may be null).
  //! @param argv      main()'s argv, passed to MPI_Init_thread (may be null).
  //! @throws mpi_error if MPI provides a lower level than `required`.
  explicit environment(int required = MPI_THREAD_MULTIPLE,
                       int* argc = nullptr,
                       char*** argv = nullptr) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      detail::check(MPI_Init_thread(argc, argv, required, &provided_), "MPI_Init_thread");
      owner_ = true;
    } else {
      MPI_Query_thread(&provided_);
    }
    if (provided_ < required) {
      throw mpi_error(
          gradcomp::detail::concat("gradcomp mpi: MPI provides ", thread_level_name(provided_),
                                   ", below the required ", thread_level_name(required)));
    }
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    if (owner_) {
      MPI_Finalize();
    }
  }
  //! The thread level MPI provides.
  [[nodiscard]] int thread_level() const noexcept { return provided_; }

private:
  int provided_ = MPI_THREAD_SINGLE;
  bool owner_ = false;
};

} // namespace gradcomp::mpi
