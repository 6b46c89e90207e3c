// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The shell every gradcomp nonblocking MPI operation shares: test() with reset on an
//! exception, wait() through the wait policy, the blocking operator(), and the length agreement
//! that makes a mismatch an exception on every rank instead of a hang.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace gradcomp::mpi::detail {

//! True once `request` has completed (MPI_Test; never blocks).
//! @throws mpi_error if MPI_Test fails.
[[nodiscard]] inline bool complete(MPI_Request& request) {
  int done = 0;
  check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

//! The communicator's MPI_TAG_UB (the largest tag; MPI guarantees at least 32767).
//! @throws mpi_error if the attribute cannot be read.
[[nodiscard]] inline int tag_upper_bound(const communicator& comm) {
  void* value = nullptr;
  int found = 0;
  check(MPI_Comm_get_attr(comm.native(), MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr");
  return found && value != nullptr ? *static_cast<int*>(value) : 32767;
}

//! CRTP base of the transports. Derived provides `start(args...)`, `bool progress()` (as much
//! progress as possible without blocking; true when the operation is complete), `void reset()
//! noexcept` (drop what is pending, become ready for a new start) and `const wait_policy&
//! waiting() const`.
template <class Derived>
class nonblocking_operation {
public:
  //! Blocking form: start(args...) then wait(). Collective as start() is.
  template <class... Args>
  void operator()(Args&&... args) {
    derived().start(std::forward<Args>(args)...);
    wait();
  }

  //! Makes whatever progress is possible without blocking; true once the result is in place on
  //! this rank. After an exception the object is reset and ready for a new start().
  bool test() {
    try {
      return derived().progress();
    } catch (...) {
      derived().reset();
      throw;
    }
  }

  //! Completes the operation, pausing between tests as the wait policy says.
  void wait() {
    for (unsigned round = 0; !test(); ++round) {
      derived().waiting().pause(round);
    }
  }

private:
  Derived& derived() noexcept { return static_cast<Derived&>(*this); }
};

//! Every rank's vector length, agreed with one nonblocking allreduce of (n, -n) under MPI_MIN:
//! afterwards every rank knows the smallest and the largest length, so all of them detect a
//! mismatch together. Two ways to use it: begin() / settled() / cancel() with the request kept
//! here (a transport's first phase), or start(request) / verify() when the caller completes the
//! request together with others.
class length_agreement {
public:
  length_agreement() = default;
  length_agreement(const length_agreement&) = delete;
  length_agreement& operator=(const length_agreement&) = delete;
  ~length_agreement() { cancel(); }

  //! Starts the agreement on `n` with the request kept here, if `enabled` and the communicator
  //! has more than one rank; returns whether it started (false: nothing to wait for).
  //! Collective (every rank must pass the same `enabled`).
  bool begin(const communicator& comm, std::size_t n, bool enabled) {
    if (!enabled || comm.size() == 1) {
      return false;
    }
    start(comm, n, own_);
    return true;
  }

  //! Whether the agreement begin() started has completed (never blocks; true if none was
  //! started); on completion verifies it. @throws mpi_error naming `operation` unless all
  //! lengths agree, or if MPI_Test fails.
  bool settled(const char* operation) {
    if (own_ == MPI_REQUEST_NULL) {
      return true;
    }
    if (!complete(own_)) {
      return false;
    }
    verify(operation);
    return true;
  }

  //! Releases an agreement begin() started and that is still pending (after an exception).
  void cancel() noexcept {
    if (own_ != MPI_REQUEST_NULL) {
      MPI_Request_free(&own_);
    }
  }

  //! Starts the agreement on `n`; the caller completes `request`. Collective.
  void start(const communicator& comm, std::size_t n, MPI_Request& request) {
    mine_ = n;
    lengths_ = {static_cast<std::int64_t>(n), -static_cast<std::int64_t>(n)};
    check(MPI_Iallreduce(MPI_IN_PLACE, lengths_.data(), 2, MPI_INT64_T, MPI_MIN, comm.native(),
                         &request),
          "MPI_Iallreduce");
  }

  //! After the request completed: throws mpi_error naming `operation` unless all lengths agree.
  void verify(const char* operation) const {
    if (lengths_[0] != -lengths_[1]) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: ", operation, ": ranks pass different lengths (from ", lengths_[0], " to ",
          -lengths_[1], " elements); this rank passed ", mine_));
    }
  }

private:
  std::array<std::int64_t, 2> lengths_{};
  std::size_t mine_ = 0;
  MPI_Request own_ = MPI_REQUEST_NULL;
};

} // namespace gradcomp::mpi::detail
