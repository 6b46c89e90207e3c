// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::ring_allreduce: a chunked, pipelined ring allreduce (sum) of dense float
//! gradients, blocking or nonblocking.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_trace.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! @brief Options of ring_allreduce.
struct ring_allreduce_options {
  //! Largest message, bytes: each ring step's block is sent as segments of at most this size, so
  //! the reduction of one segment overlaps the transfer of the next. >= 4. Raised as needed so
  //! that a step has at most 64 segments in flight (MPI implementations bound the number of
  //! outstanding requests).
  std::size_t segment_bytes = std::size_t{1} << 18;
  //! Check first that every rank passes the same length (one 16-byte allreduce; a mismatch makes
  //! every rank throw instead of hanging).
  bool check_lengths = true;
  //! How waits complete (see wait_policy.hpp).
  wait_policy wait{};
  //! First message tag: the operation uses tags tag_base .. tag_base + 2P - 3. Operations in
  //! flight at the same time on one communicator need disjoint tag ranges (MPI matches
  //! point-to-point messages by source, tag and communicator). >= 0.
  int tag_base = 0;
  //! Where to append a per-step timeline (ring_trace.hpp); nullptr (the default) traces
  //! nothing. Must outlive the operations traced.
  ring_trace* trace = nullptr;
};

//! @brief Ring allreduce, sum of float vectors (Patarasuk & Yuan; the ring of S4): a
//! reduce-scatter of P - 1 steps followed by an allgather of P - 1 steps around the ring
//! rank -> rank + 1. Every rank ends with bit-identical sums (each block is reduced on one rank,
//! in a fixed order, then copied to the others).
//!
//! Collective: every rank of the communicator must call start() (or operator()) with a vector
//! of the same length, in the same order relative to other collectives on it. Works for any
//! rank count (1 included, non-powers of two) and any length (0 included; blocks differ by at
//! most one element). Bytes sent per rank: 2 (P-1)/P x 4n (the bandwidth-optimal volume); time
//! (S4): 2(P-1) alpha + (2(P-1) beta + (P-1) gamma) x 4n / P, plus one latency for the length
//! check. Memory: one block of scratch, reused across calls. Nonblocking use: start(), then
//! test() until true (each test() makes whatever progress is possible without blocking), or
//! wait(); the vector must not be touched until then. One operation at a time per object.
//! @throws mpi_error on an MPI failure or when ranks pass different lengths (on every rank).
class ring_allreduce : public nonblocking_operation<ring_allreduce> {
  friend class nonblocking_operation<ring_allreduce>;

public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "ring_allreduce";
  //! The options struct (ring_allreduce_options).
  using options = ring_allreduce_options;

  //! @throws std::invalid_argument if segment_bytes < 4 or tag_base < 0.
  explicit ring_allreduce(const communicator& comm, options o = {}) : comm_(&comm), options_(o) {
    gradcomp::detail::require(o.segment_bytes >= sizeof(float), "segment_bytes ", o.segment_bytes,
                              " is below the minimum 4");
    gradcomp::detail::require(o.tag_base >= 0, "tag_base ", o.tag_base, " is negative");
  }
  ring_allreduce(const ring_allreduce&) = delete;
  ring_allreduce& operator=(const ring_allreduce&) = delete;
  ~ring_allreduce() { reset(); }

  //! Starts summing `data` (n floats, host memory) across all ranks, in place.
  void start(std::span<float> data) {
    gradcomp::detail::require(phase_ == phase::idle || phase_ == phase::done,
                              "ring_allreduce: start() while an operation is in progress");
    data_ = data;
    const int p = comm_->size();
    constexpr std::size_t max_segments = 64;
    const std::size_t largest_block =
        (data.size() + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p);
    segment_elements_ = std::max({std::size_t{1}, options_.segment_bytes / sizeof(float),
                                  (largest_block + max_segments - 1) / max_segments});
    step_ = 0;
    if (options_.trace != nullptr) {
      operation_ = options_.trace->operations++;
      options_.trace->started_seconds.push_back(ring_trace::now_seconds());
    }
    if (lengths_.begin(*comm_, data.size(), options_.check_lengths)) {
      phase_ = phase::checking;
    } else {
      begin_ring();
    }
  }

  //! Bytes rank `rank` of `ranks` sends in one operation on n floats: every block but block
  //! rank + 1 in the reduce-scatter and every block but block rank + 2 in the allgather (block b
  //! = elements [n b / P, n (b + 1) / P)); 0 for one rank. About 2 (P-1)/P x 4n. O(1).
  [[nodiscard]] static std::size_t bytes_sent(std::size_t n, int ranks, int rank) noexcept {
    if (ranks <= 1) {
      return 0;
    }
    const auto size = [&](int b) {
      return block_begin(n, b % ranks + 1, ranks) - block_begin(n, b % ranks, ranks);
    };
    return sizeof(float) * ((n - size(rank + 1)) + (n - size(rank + 2)));
  }

  //! @private The nonblocking_operation hooks.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }
  //! @private For timeout messages: the rank a step receives from (-1 outside the ring).
  [[nodiscard]] int pending_peer() const noexcept {
    return phase_ == phase::ring ? wrap(comm_->rank() - 1) : -1;
  }
  //! @private For timeout messages: the phase and step the operation waits in.
  [[nodiscard]] std::string pending_description() const {
    if (phase_ == phase::checking) {
      return "the length agreement (an MPI_Iallreduce of every rank)";
    }
    if (phase_ != phase::ring) {
      return {};
    }
    return gradcomp::detail::concat("step ", step_ + 1, " of ", 2 * (comm_->size() - 1),
                                    ", receiving from rank ", wrap(comm_->rank() - 1),
                                    " and sending to rank ", wrap(comm_->rank() + 1));
  }
  //! @private
  bool progress() {
    for (;;) {
      switch (phase_) {
      case phase::idle:
      case phase::done:
        return true;
      case phase::checking:
        if (!lengths_.settled("ring_allreduce")) {
          return false;
        }
        begin_ring();
        continue;
      case phase::ring:
        if (options_.trace != nullptr) {
          ++options_.trace->steps.back().polls;
        }
        if (!progress_step()) {
          return false;
        }
        continue;
      }
    }
  }

private:
  enum class phase { idle, checking, ring, done };

  // first element of block b of n elements split over `ranks` (block b ends where b + 1 begins)
  [[nodiscard]] static std::size_t block_begin(std::size_t n, int b, int ranks) noexcept {
    return n * static_cast<std::size_t>(b) / static_cast<std::size_t>(ranks);
  }
  [[nodiscard]] std::size_t block_begin(int b) const noexcept {
    return block_begin(data_.size(), b, comm_->size());
  }

  [[nodiscard]] int wrap(int b) const noexcept {
    const int p = comm_->size();
    return ((b % p) + p) % p;
  }

  void begin_ring() {
    if (comm_->size() == 1 || data_.empty()) {
      phase_ = phase::done;
      return;
    }
    phase_ = phase::ring;
    post_step();
  }

  // Steps 0 .. P-2 reduce-scatter, P-1 .. 2P-3 allgather.
  void post_step() {
    const int p = comm_->size();
    const int r = comm_->rank();
    const bool scatter = step_ < p - 1;
    const int s = scatter ? step_ : step_ - (p - 1);
    const int send_block = scatter ? wrap(r - s) : wrap(r + 1 - s);
    const int recv_block = scatter ? wrap(r - s - 1) : wrap(r - s);
    send_begin_ = block_begin(send_block);
    const std::size_t send_end = block_begin(send_block + 1);
    recv_begin_ = block_begin(recv_block);
    recv_length_ = block_begin(recv_block + 1) - recv_begin_;
    const int right = wrap(r + 1);
    const int left = wrap(r - 1);
    const std::size_t send_segments = segments(send_end - send_begin_);
    const std::size_t recv_segments = segments(recv_length_);
    requests_.assign(send_segments + recv_segments, MPI_REQUEST_NULL);
    if (scatter) {
      scratch_.resize(std::max(scratch_.size(), recv_length_));
    }
    float* recv_base = scatter ? scratch_.data() : data_.data() + recv_begin_;
    for (std::size_t j = 0; j < recv_segments; ++j) {
      const std::size_t offset = j * segment_elements_;
      const auto count = static_cast<int>(std::min(segment_elements_, recv_length_ - offset));
      detail::check(MPI_Irecv(recv_base + offset, count, MPI_FLOAT, left, options_.tag_base + step_,
                              comm_->native(), &requests_[send_segments + j]),
                    "MPI_Irecv");
    }
    for (std::size_t j = 0; j < send_segments; ++j) {
      const std::size_t offset = j * segment_elements_;
      const auto count =
          static_cast<int>(std::min(segment_elements_, send_end - send_begin_ - offset));
      detail::check(MPI_Isend(data_.data() + send_begin_ + offset, count, MPI_FLOAT, right,
                              options_.tag_base + step_, comm_->native(), &requests_[j]),
                    "MPI_Isend");
    }
    first_recv_ = send_segments;
    next_recv_ = send_segments;
    if (options_.trace != nullptr) {
      ring_step_record record;
      record.operation = operation_;
      record.step = step_;
      record.segments = send_segments;
      record.bytes_sent = sizeof(float) * (send_end - send_begin_);
      record.bytes_received = sizeof(float) * recv_length_;
      record.posted_seconds = ring_trace::now_seconds();
      options_.trace->steps.push_back(record);
    }
  }

  [[nodiscard]] std::size_t segments(std::size_t elements) const noexcept {
    return (elements + segment_elements_ - 1) / segment_elements_;
  }

  // Reduces received segments in order as they arrive; true when the step is complete.
  bool progress_step() {
    const int p = comm_->size();
    const bool scatter = step_ < p - 1;
    while (next_recv_ < requests_.size()) {
      if (!detail::complete(requests_[next_recv_])) {
        return false;
      }
      if (scatter) {
        const double t0 = options_.trace != nullptr ? ring_trace::now_seconds() : 0.0;
        const std::size_t offset = (next_recv_ - first_recv_) * segment_elements_;
        const std::size_t count = std::min(segment_elements_, recv_length_ - offset);
        float* target = data_.data() + recv_begin_ + offset;
        const float* incoming = scratch_.data() + offset;
        for (std::size_t i = 0; i < count; ++i) {
          target[i] += incoming[i];
        }
        if (options_.trace != nullptr) {
          options_.trace->steps.back().reduce_seconds += ring_trace::now_seconds() - t0;
        }
      }
      ++next_recv_;
      if (next_recv_ == requests_.size() && options_.trace != nullptr) {
        options_.trace->steps.back().received_seconds = ring_trace::now_seconds();
      }
    }
    int sent = 0;
    detail::check(
        MPI_Testall(static_cast<int>(first_recv_), requests_.data(), &sent, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (!sent) {
      return false;
    }
    if (options_.trace != nullptr) {
      options_.trace->steps.back().sent_seconds = ring_trace::now_seconds();
    }
    ++step_;
    if (step_ == 2 * (p - 1)) {
      phase_ = phase::done;
    } else {
      post_step();
    }
    return true;
  }

  // An operation dropped mid-way (an exception, or destruction): completes what is pending, so
  // that MPI touches no buffer after it is released, and makes the object ready for a new
  // start() (detail::abandon). requests_ holds the current step's point-to-point requests, the
  // sends first: each send is waited for (MPICH cannot cancel it; a rendezvous-sized segment
  // waits until the right neighbour takes it, which it does while it runs the operation: every
  // earlier step of this rank has completed, so the neighbour reaches this one), then each
  // receive is cancelled and completed. The length agreement is a collective: waited for, it
  // completes because every rank begins it in start(). Only one of the two is ever pending.
  void reset() noexcept {
    phase_ = phase::idle;
    detail::abandon(requests_, detail::request_kind::point_to_point); // sends first
    lengths_.abandon();
  }

  const communicator* comm_;
  options options_;
  phase phase_ = phase::idle;
  std::span<float> data_;
  std::size_t segment_elements_ = 1;
  int step_ = 0;
  std::uint64_t operation_ = 0; // the traced operation's number (options_.trace)
  std::size_t send_begin_ = 0, recv_begin_ = 0, recv_length_ = 0;
  std::size_t first_recv_ = 0, next_recv_ = 0;
  std::vector<MPI_Request> requests_;
  std::vector<float> scratch_;
  detail::length_agreement lengths_;
};

} // namespace gradcomp::mpi
