// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::mpi_error and the check that turns MPI return codes into it.
#pragma once

#include <gradcomp/error.hpp>

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace gradcomp::mpi {

//! @brief Thrown when an MPI call returns an error (communicators made by gradcomp use
//! MPI_ERRORS_RETURN), or when ranks disagree about a collective's arguments (lengths,
//! layouts): then every rank of the communicator throws it. The message names the MPI call, the
//! MPI error string, and what disagreed.
class mpi_error : public std::runtime_error {
public:
  //! @param what the message (what()): the call or the disagreement, and MPI's error string.
  //! @param code the MPI error code (MPI_SUCCESS for a disagreement between ranks).
  explicit mpi_error(const std::string& what, int code = MPI_SUCCESS)
      : std::runtime_error(what), code_(code) {}
  //! The MPI error code (MPI_SUCCESS when the error is a disagreement between ranks).
  [[nodiscard]] int code() const noexcept { return code_; }

private:
  int code_;
};

//! @brief Thrown when a gradcomp operation waited longer than its wait_policy's timeout_seconds
//! (a peer that died, stalls or cannot be reached; off by default). The message names the
//! operation, the peer it waited for (when the operation knows it) and the time waited.
//! Afterwards the communicator cannot be used again: the operation's pending requests are
//! dropped without completion (a dead peer never completes them), MPI may still touch their
//! buffers, and MPICH offers no recovery inside the job (no ULFM). Report and end the job
//! (MPI_Abort), then restart it from the last checkpoint (docs/checkpoint.md).
class timeout_error : public mpi_error {
public:
  //! @param what the message; @param operation the operation's name; @param peer the rank
  //! waited for, or -1 when unknown or a collective of all ranks; @param elapsed_seconds the
  //! time waited.
  timeout_error(const std::string& what, std::string operation, int peer, double elapsed_seconds)
      : mpi_error(what), operation_(std::move(operation)), peer_(peer),
        elapsed_seconds_(elapsed_seconds) {}
  //! The operation that timed out ("ring_allreduce", ...).
  [[nodiscard]] const std::string& operation() const noexcept { return operation_; }
  //! The rank it waited for (in the operation's communicator), -1 if unknown.
  [[nodiscard]] int peer() const noexcept { return peer_; }
  //! Seconds waited before giving up.
  [[nodiscard]] double elapsed_seconds() const noexcept { return elapsed_seconds_; }

private:
  std::string operation_;
  int peer_;
  double elapsed_seconds_;
};

//! @brief Throws mpi_error naming `call` and MPI's description of `rc` unless rc ==
//! MPI_SUCCESS: wrap the return code of a raw MPI call made beside gradcomp's (on a communicator
//! with MPI_ERRORS_RETURN, as gradcomp::mpi::communicator's are) to get the library's error type.
//! O(1) on success.
//! @throws mpi_error with code() == rc.
inline void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) {
    return;
  }
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw mpi_error(gradcomp::detail::concat("gradcomp mpi: ", call, " failed: ",
                                           std::string(text, static_cast<std::size_t>(length))),
                  rc);
}

namespace detail {

using gradcomp::mpi::check; // the library's own calls spell it detail::check

//! Throws gradcomp::wire_error if a message received from `rank` does not have the dense
//! length every rank agreed on (its header was validated, but could still lie about the length).
template <class Message>
void check_length(const Message& m, std::size_t expected, int rank) {
  gradcomp::detail::require_wire(m.dense_length_elements == expected, "message from rank ", rank,
                                 " has dense length ", m.dense_length_elements, ", expected ",
                                 expected);
}

} // namespace detail
} // namespace gradcomp::mpi
