// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::ring_allgather: the ring allgather of blocks of different lengths that
//! coded_allreduce's reduce-scatter form and coded_sparse_allreduce's index lists share.
#pragma once

#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <array>
#include <climits>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

namespace detail {

//! @brief A ring allgather of blocks of different lengths over nonblocking point-to-point messages
//! (the allgather of coded_allreduce's reduce-scatter form and of coded_sparse_allreduce's index
//! lists; the ring allgather of Thakur et al., docs/references.md [TRG05]): P - 1 steps; in step s
//! rank k sends block k - s to rank k + 1 and receives block k - s - 1 from rank k - 1, straight
//! into the buffer. The block sent in step s + 1 is the one received in step s, so a step starts
//! once the previous one completed. Point to point rather than MPI_Iallgatherv so that the bytes
//! and messages are exactly the cost model's: sent, every block but the right neighbour's;
//! received, every block but this rank's; P - 1 messages each way, empty blocks included.
//! Collective over the communicator: every rank must start it with the same block layout and
//! tag. Memory: none beyond the caller's buffer.
class ring_allgather {
public:
  ring_allgather() = default;
  ring_allgather(const ring_allgather&) = delete;
  ring_allgather& operator=(const ring_allgather&) = delete;
  ~ring_allgather() { abandon(); }

  //! @brief Starts the allgather: block j occupies elements blocks[j] of `buffer` (elements of
  //! `element_bytes` bytes, MPI type `type`); this rank's block must be in place. `operation`
  //! names the caller in error messages. Every block must be at most INT_MAX elements (the
  //! caller checks). With one rank there is nothing to do.
  //! @throws mpi_error if posting fails.
  void start(const communicator& comm,
             void* buffer,
             std::size_t element_bytes,
             MPI_Datatype type,
             std::vector<coded::index_range> blocks,
             int tag,
             const char* operation) {
    comm_ = &comm;
    buffer_ = static_cast<std::byte*>(buffer);
    element_bytes_ = element_bytes;
    type_ = type;
    blocks_ = std::move(blocks);
    tag_ = tag;
    operation_ = operation;
    step_ = 0;
    bytes_sent_ = bytes_received_ = messages_sent_ = messages_received_ = 0;
    if (comm.size() > 1) {
      post_step();
    }
  }

  //! @brief Progress without blocking; true once every step completed.
  //! @throws gradcomp::wire_error if a received block's length differs from its layout;
  //! mpi_error on an MPI failure.
  bool progress() {
    while (step_ + 1 < static_cast<std::size_t>(comm_->size())) {
      if (!complete_step()) {
        return false;
      }
      if (++step_ + 1 < static_cast<std::size_t>(comm_->size())) {
        post_step();
      }
    }
    return true;
  }

  //! Completes what is pending (the allgather is being dropped: an exception, or destruction;
  //! detail::abandon): the step's send first, waited for (MPICH cannot cancel a send; a
  //! rendezvous-sized block waits until the right neighbour takes it, which it does while it
  //! runs the allgather, every earlier step of this rank having completed), then its receive,
  //! cancelled and completed, so that MPI touches no buffer after this returns. Idempotent;
  //! never throws.
  void abandon() noexcept {
    detail::abandon(requests_[1], request_kind::point_to_point); // the send
    detail::abandon(requests_[0], request_kind::point_to_point); // the receive
  }

  //! Payload bytes sent by the completed steps.
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Payload bytes received by the completed steps.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! Messages sent by the completed steps.
  [[nodiscard]] std::size_t messages_sent() const noexcept { return messages_sent_; }
  //! Messages received by the completed steps.
  [[nodiscard]] std::size_t messages_received() const noexcept { return messages_received_; }

private:
  [[nodiscard]] std::size_t block_of_step(int offset) const noexcept {
    const int p = comm_->size();
    const int step = static_cast<int>(step_);
    return static_cast<std::size_t>(((comm_->rank() - step - offset) % p + p) % p);
  }

  void post_step() {
    const int p = comm_->size();
    const int me = comm_->rank();
    const coded::index_range out = blocks_[block_of_step(0)];
    const coded::index_range in = blocks_[block_of_step(1)];
    in_ = in.size();
    out_ = out.size();
    check(MPI_Irecv(buffer_ + in.begin * element_bytes_, static_cast<int>(in.size()), type_,
                    (me - 1 + p) % p, tag_, comm_->native(), &requests_[0]),
          "MPI_Irecv");
    check(MPI_Isend(buffer_ + out.begin * element_bytes_, static_cast<int>(out.size()), type_,
                    (me + 1) % p, tag_, comm_->native(), &requests_[1]),
          "MPI_Isend");
  }

  // Tests the current step's two requests; true once both completed (checks the received
  // block's length).
  bool complete_step() {
    if (requests_[0] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Status status{};
      check(MPI_Test(&requests_[0], &done, &status), "MPI_Test");
      if (done) {
        int count = 0;
        check(MPI_Get_count(&status, type_, &count), "MPI_Get_count");
        gradcomp::detail::require_wire(
            count >= 0 && static_cast<std::size_t>(count) == in_, operation_,
            ": the allgather block from rank ", (comm_->rank() - 1 + comm_->size()) % comm_->size(),
            " in step ", step_, " has ", count, " elements, expected ", in_);
        bytes_received_ += in_ * element_bytes_;
        ++messages_received_;
      }
    }
    if (requests_[1] != MPI_REQUEST_NULL && complete(requests_[1])) {
      bytes_sent_ += out_ * element_bytes_;
      ++messages_sent_;
    }
    return requests_[0] == MPI_REQUEST_NULL && requests_[1] == MPI_REQUEST_NULL;
  }

  const communicator* comm_ = nullptr;
  std::byte* buffer_ = nullptr;
  std::size_t element_bytes_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  std::vector<coded::index_range> blocks_;
  int tag_ = 0;
  const char* operation_ = "";
  std::size_t step_ = 0;
  std::array<MPI_Request, 2> requests_{MPI_REQUEST_NULL, MPI_REQUEST_NULL}; // recv, send
  std::size_t in_ = 0, out_ = 0; // elements of the current step's blocks
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
  std::size_t messages_sent_ = 0, messages_received_ = 0;
};

} // namespace detail

} // namespace gradcomp::mpi
