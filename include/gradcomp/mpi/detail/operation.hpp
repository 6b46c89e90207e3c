// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The shell every gradcomp nonblocking MPI operation shares: test() with reset on an
//! exception, wait() through the wait policy, the blocking operator(), and the length agreement
//! that makes a mismatch an exception on every rank instead of a hang.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/nonblocking_operation.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace gradcomp::mpi::detail {

//! True once `request` has completed (MPI_Test; never blocks).
//! @throws mpi_error if MPI_Test fails.
[[nodiscard]] inline bool complete(MPI_Request& request) {
  int done = 0;
  check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

//! @brief What a pending request belongs to, which decides how abandon() completes it.
enum class request_kind {
  //! A point-to-point send or receive (MPI_Isend, MPI_Irecv): cancelled, then completed.
  point_to_point,
  //! A nonblocking collective (MPI_Iallreduce, MPI_Ialltoall, MPI_Iallgather(v), MPI_Ireduce,
  //! MPI_Ibcast, ...): it cannot be cancelled, only completed.
  collective,
};

//! @brief Completes a still-pending request of an operation that is being dropped mid-way (an
//! exception on this rank, or destruction), so that MPI touches none of its buffers afterwards
//! and the caller may release them; `request` is MPI_REQUEST_NULL afterwards. No-op for
//! MPI_REQUEST_NULL (a request that completed, or was never posted).
//!
//! - request_kind::point_to_point: MPI_Cancel, then MPI_Wait. A receive that no message has
//!   matched yet is cancelled and completes at once; a matched one completes once its message
//!   has arrived. A send is in effect only waited for: MPI 4.0 deprecates cancelling sends and
//!   MPICH (4.0.2, ch4:ucx, as installed here) never cancels one (measured). A send below the
//!   eager limit (about 16 KB here) is already complete; a larger (rendezvous) one completes
//!   once its receiver takes the message, which a receiver still running the operation does
//!   when it gets to it, and one that dropped the operation without having matched it never
//!   does. Abandon a set's sends before its receives: while this rank waits for its sends, its
//!   receives stay posted, so the peers' sends to it can still complete.
//! - request_kind::collective: MPI_Wait. A collective completes once every rank of the
//!   communicator has posted it, which every rank does while it runs the operation: the
//!   condition the operation was started under (every rank calls start() and runs it). The
//!   wait lasts until the slowest peer has posted it, and forever if a peer dropped the
//!   operation before reaching that collective.
//!
//! So an operation dropped on one rank while the others run on completes here (each transport's
//! reset() says why; the others then wait for this rank, as they would have anyway); dropped on
//! every rank at the same point, it completes too; dropped on several ranks at different points
//! it can wait forever (measured: every rank destroying a ring_allreduce of 256 KB segments
//! right after start() hung within a few tries). MPI offers no way out of that last case:
//! MPI_Request_free of a collective is erroneous (MPICH aborts the job), and freeing a pending
//! send instead of waiting lets MPI read its buffer after it was released (measured: a peer
//! still running the operation died in UCX, reading the freed memory).
//!
//! Why not MPI_Request_free: the MPI standard makes MPI_Request_free (and MPI_Cancel) of a
//! nonblocking collective's request erroneous, a pending receive that is freed stays posted, so
//! a message that arrives later is written into a buffer that the caller may have released by
//! then, and a freed send goes on reading its buffer.
//!
//! After a timeout_error in this process (peers_lost()), abandon() only forgets the request:
//! the peer it waits for may be gone, and waiting would hang the unwinding; MPI may then still
//! use the buffers, so the process must end the job (MPI_Abort) rather than go on.
//!
//! Complexity: two MPI calls; a wait lasts as long as the peers take (see above), with
//! MPI_Wait's busy polling rather than the wait policy (this runs on fault paths only). Never
//! throws: the return codes are ignored (it runs in noexcept resets and destructors); should
//! MPI_Wait fail, the handle is dropped (set to MPI_REQUEST_NULL) without further calls.
inline void abandon(MPI_Request& request, request_kind kind) noexcept {
  if (request == MPI_REQUEST_NULL) {
    return;
  }
  if (peers_lost().load()) { // a wait timed out: a peer may never complete it, drop it
    request = MPI_REQUEST_NULL;
    return;
  }
  if (kind == request_kind::point_to_point) {
    MPI_Cancel(&request);
  }
  if (MPI_Wait(&request, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
    request = MPI_REQUEST_NULL;
  }
}

//! @brief abandon() of every request of `requests`, one after another in their order (list the
//! sends before the receives: see abandon()). O(requests.size()) MPI calls; never throws.
inline void abandon(std::span<MPI_Request> requests, request_kind kind) noexcept {
  for (MPI_Request& request : requests) {
    abandon(request, kind);
  }
}

//! The communicator's MPI_TAG_UB (the largest tag; MPI guarantees at least 32767).
//! @throws mpi_error if the attribute cannot be read.
[[nodiscard]] inline int tag_upper_bound(const communicator& comm) {
  void* value = nullptr;
  int found = 0;
  check(MPI_Comm_get_attr(comm.native(), MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr");
  return found && value != nullptr ? *static_cast<int*>(value) : 32767;
}

//! Every rank's vector length, agreed with one nonblocking allreduce of (n, -n) under MPI_MIN:
//! afterwards every rank knows the smallest and the largest length, so all of them detect a
//! mismatch together: start(request), and verify() once the caller (phased_operation's
//! agree_lengths(), or an agreement of several requests) has completed the request.
class length_agreement {
public:
  //! What a timeout names while the agreement is pending.
  static constexpr const char* description =
      "the length agreement (an MPI_Iallreduce of every rank)";

  length_agreement() = default;
  // not copyable: a pending allreduce writes into this object
  length_agreement(const length_agreement&) = delete;
  length_agreement& operator=(const length_agreement&) = delete;

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
};

} // namespace gradcomp::mpi::detail
