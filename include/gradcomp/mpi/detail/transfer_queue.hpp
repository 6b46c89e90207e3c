// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::transfer_queue: point-to-point transfers posted in order
//! through a bounded window (the parameter servers' pushes and pulls).
#pragma once

#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief Point-to-point transfers (sends and receives) posted in the order they were added,
//! with at most `window` requests in flight, so that the request count stays bounded whatever
//! the rank count (MPICH aborts when too many requests are outstanding). The earliest
//! unfinished transfer is always posted, which keeps two such queues whose orders agree (the
//! sender's order of its receivers, the receiver's order of its senders) free of deadlock.
//! Not collective; the buffers must stay valid until the transfers complete or abandon()
//! returns.
class transfer_queue {
public:
  explicit transfer_queue(std::size_t window) : window_(window) {}
  transfer_queue(const transfer_queue&) = delete;
  transfer_queue& operator=(const transfer_queue&) = delete;
  ~transfer_queue() { abandon(); }

  //! Empties the queue; nothing may be in flight (call abandon() first otherwise).
  void clear() noexcept {
    items_.clear();
    requests_.clear();
    posted_ = completed_ = in_flight_ = 0;
  }

  //! Adds a send (or receive) of `count` elements of `element_bytes` bytes each, as messages of
  //! at most `chunk` elements, in order. Adds nothing when count is 0.
  void add(bool send,
           const void* data,
           std::size_t count,
           std::size_t element_bytes,
           MPI_Datatype type,
           std::size_t chunk,
           int peer,
           int tag) {
    for (std::size_t offset = 0; offset < count; offset += chunk) {
      items_.push_back({static_cast<const std::byte*>(data) + offset * element_bytes,
                        static_cast<int>(std::min(chunk, count - offset)), type, peer, tag, send});
      requests_.push_back(MPI_REQUEST_NULL);
    }
  }

  //! Number of transfers added.
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  //! Length of the completed prefix: transfers 0 .. completed() - 1 are done.
  [[nodiscard]] std::size_t completed() const noexcept { return completed_; }

  //! Posts and tests without blocking; true once every transfer is done.
  //! @throws mpi_error if an MPI call fails.
  bool progress(MPI_Comm comm) {
    for (;;) {
      while (in_flight_ < window_ && posted_ < items_.size()) {
        post(comm, posted_++);
        ++in_flight_;
      }
      bool any = false;
      for (std::size_t i = completed_; i < posted_; ++i) {
        if (requests_[i] == MPI_REQUEST_NULL) {
          continue;
        }
        if (complete(requests_[i])) {
          --in_flight_;
          any = true;
        }
      }
      while (completed_ < posted_ && requests_[completed_] == MPI_REQUEST_NULL) {
        ++completed_;
      }
      if (completed_ == items_.size()) {
        return true;
      }
      if (!any || posted_ == items_.size()) {
        return false;
      }
    }
  }

  //! Completes whatever is in flight (the round is being dropped: an exception, or
  //! destruction; detail::abandon), then empties the queue: the sends first, each waited for
  //! (MPICH cannot cancel a send; a rendezvous-sized one waits until its receiver takes it),
  //! then the receives, each cancelled and completed, so that MPI touches no buffer after this
  //! returns. O(transfers posted) MPI calls; never throws.
  void abandon() noexcept {
    for (const bool sends : {true, false}) {
      for (std::size_t i = 0; i < posted_; ++i) {
        if (items_[i].send == sends) {
          detail::abandon(requests_[i], request_kind::point_to_point);
        }
      }
    }
    clear();
  }

private:
  struct transfer {
    const std::byte* data;
    int count;
    MPI_Datatype type;
    int peer;
    int tag;
    bool send;
  };

  void post(MPI_Comm comm, std::size_t i) {
    const transfer& t = items_[i];
    if (t.send) {
      check(MPI_Isend(t.data, t.count, t.type, t.peer, t.tag, comm, &requests_[i]), "MPI_Isend");
    } else {
      // the buffer was handed in as writable by the owner of the receive
      check(MPI_Irecv(const_cast<std::byte*>(t.data), t.count, t.type, t.peer, t.tag, comm,
                      &requests_[i]),
            "MPI_Irecv");
    }
  }

  std::vector<transfer> items_;
  std::vector<MPI_Request> requests_;
  std::size_t posted_ = 0, completed_ = 0, in_flight_ = 0;
  std::size_t window_;
};

} // namespace gradcomp::mpi::detail
