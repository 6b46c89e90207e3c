// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::ring_allreduce: a chunked, pipelined ring allreduce (sum) of dense float
//! gradients, blocking or nonblocking.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
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
  //! Ring steps in flight at once, 1 or 2. With 2 (the default) step s + 1 is posted beside
  //! step s and each of its segments is sent as soon as step s has received (and reduced) that
  //! segment, so a rank's link does not idle between steps while it waits for its left
  //! neighbour to finish a step (segment-level pipelining, as in Patarasuk & Yuan's pipelined
  //! ring). Same messages, same summation order: results are bit-identical to 1, which runs
  //! the steps one after another. On 2 ranks the steps always run one after another.
  int steps_in_flight = 2;
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
//! check. Steps are pipelined segment by segment (ring_allreduce_options::steps_in_flight).
//! Memory: two blocks of scratch, reused across calls. Nonblocking use: start(), then
//! test() until true (each test() makes whatever progress is possible without blocking), or
//! wait(); the vector must not be touched until then. One operation at a time per object.
//! @throws mpi_error on an MPI failure or when ranks pass different lengths (on every rank).
class ring_allreduce : public detail::phased_operation<ring_allreduce> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "ring_allreduce";
  //! The options struct (ring_allreduce_options).
  using options = ring_allreduce_options;

  //! @throws std::invalid_argument if segment_bytes < 4, tag_base < 0 or steps_in_flight is
  //! not 1 or 2.
  explicit ring_allreduce(const communicator& comm, options o = {}) : comm_(&comm), options_(o) {
    gradcomp::detail::require(o.segment_bytes >= sizeof(float), "segment_bytes ", o.segment_bytes,
                              " is below the minimum 4");
    gradcomp::detail::require(o.tag_base >= 0, "tag_base ", o.tag_base, " is negative");
    gradcomp::detail::require(o.steps_in_flight == 1 || o.steps_in_flight == 2, "steps_in_flight ",
                              o.steps_in_flight, " is not 1 or 2");
  }
  ring_allreduce(const ring_allreduce&) = delete;
  ring_allreduce& operator=(const ring_allreduce&) = delete;
  ~ring_allreduce() { reset(); }

  //! Starts summing `data` (n floats, host memory) across all ranks, in place.
  void start(std::span<float> data) {
    const auto starting = begin_operation();
    data_ = data;
    const int p = comm_->size();
    constexpr std::size_t max_segments = 64;
    const std::size_t largest_block =
        (data.size() + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p);
    segment_elements_ = std::max({std::size_t{1}, options_.segment_bytes / sizeof(float),
                                  (largest_block + max_segments - 1) / max_segments});
    oldest_ = 0;
    opened_ = 0;
    if (options_.trace != nullptr) {
      operation_ = options_.trace->operations++;
      options_.trace->started_seconds.push_back(ring_trace::now_seconds());
    }
    agree_lengths(*comm_, data.size(), options_.check_lengths, &ring_allreduce::begin_ring,
                  detail::length_agreement::description);
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

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

private:
  // A ring step in flight: its blocks, requests and (reduce-scatter) receive buffer.
  struct step_state {
    std::size_t send_begin = 0, send_length = 0, recv_begin = 0, recv_length = 0;
    std::vector<MPI_Request> sends, recvs;
    std::size_t sends_posted = 0; // sends[0 .. sends_posted) are posted
    std::size_t recvs_done = 0;   // recvs[0 .. recvs_done) arrived (and were reduced)
    std::vector<float> scratch;   // reduce-scatter receives, reused across calls
    std::size_t trace_record = 0; // index in options_.trace->steps
  };

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

  // The ring: 2 (P - 1) steps, each a receive from the left neighbour and a send to the right
  // one, segment by segment, pipelined (progress_ring). Dropped mid-way (an exception, or
  // destruction; detail::abandon), the open steps' sends are waited for first (MPICH cannot
  // cancel them; a rendezvous-sized segment waits until the right neighbour takes it, which it
  // does while it runs the operation: a step opens once the step two before it has ended, and
  // every step before this rank's open ones has ended here, so the neighbour reaches them),
  // then each receive is cancelled and completed.
  void begin_ring() {
    if (comm_->size() == 1 || data_.empty()) {
      return;
    }
    poll(&ring_allreduce::progress_ring)
        .sends(slots_[0].sends, slots_[1].sends)
        .receives(slots_[0].recvs, slots_[1].recvs)
        .peer(&ring_allreduce::left)
        .describe(&ring_allreduce::ring_position);
    open_steps();
  }

  // For timeout messages: the rank a step receives from.
  [[nodiscard]] int left() const noexcept { return wrap(comm_->rank() - 1); }
  // For timeout messages: the step the operation waits in.
  [[nodiscard]] std::string ring_position() const {
    return gradcomp::detail::concat("step ", oldest_ + 1, " of ", 2 * (comm_->size() - 1),
                                    ", receiving from rank ", left(), " and sending to rank ",
                                    wrap(comm_->rank() + 1));
  }

  // Steps 0 .. P-2 reduce-scatter, P-1 .. 2P-3 allgather. Step s sends the block step s - 1
  // received (and, in the reduce-scatter, reduced): send_block(s) = recv_block(s - 1), segment
  // by segment, which lets step s + 1 run beside step s (see steps_in_flight).
  [[nodiscard]] int send_block(int step) const noexcept {
    const int p = comm_->size();
    return step < p - 1 ? wrap(comm_->rank() - step) : wrap(comm_->rank() + 1 - (step - (p - 1)));
  }
  [[nodiscard]] int recv_block(int step) const noexcept {
    const int p = comm_->size();
    return step < p - 1 ? wrap(comm_->rank() - step - 1) : wrap(comm_->rank() - (step - (p - 1)));
  }
  [[nodiscard]] step_state& slot(int step) noexcept {
    return slots_[static_cast<std::size_t>(step) % slots_.size()];
  }
  [[nodiscard]] int last_step() const noexcept { return 2 * (comm_->size() - 1); }

  // Two steps may overlap only on 3 or more ranks: with 2, step 1 receives into the block step
  // 0 sends (MPI forbids writing a buffer a pending send reads).
  [[nodiscard]] int in_flight_limit() const noexcept {
    return comm_->size() >= 3 ? options_.steps_in_flight : 1;
  }

  void open_steps() {
    while (opened_ < last_step() && opened_ - oldest_ < in_flight_limit()) {
      open_step(opened_++);
    }
  }

  // Posts a step's receives, and the sends whose data is final: all of them when no earlier
  // step is pending, else those the previous step has received so far (the rest follow in
  // progress_ring as they arrive).
  void open_step(int step) {
    const bool scatter = step < comm_->size() - 1;
    step_state& st = slot(step);
    const int sb = send_block(step);
    const int rb = recv_block(step);
    st.send_begin = block_begin(sb);
    st.send_length = block_begin(sb + 1) - st.send_begin;
    st.recv_begin = block_begin(rb);
    st.recv_length = block_begin(rb + 1) - st.recv_begin;
    st.sends.assign(segments(st.send_length), MPI_REQUEST_NULL);
    st.recvs.assign(segments(st.recv_length), MPI_REQUEST_NULL);
    st.sends_posted = 0;
    st.recvs_done = 0;
    if (scatter) {
      st.scratch.resize(std::max(st.scratch.size(), st.recv_length));
    }
    float* recv_base = scatter ? st.scratch.data() : data_.data() + st.recv_begin;
    const int left = wrap(comm_->rank() - 1);
    for (std::size_t j = 0; j < st.recvs.size(); ++j) {
      const std::size_t offset = j * segment_elements_;
      const auto count = static_cast<int>(std::min(segment_elements_, st.recv_length - offset));
      detail::check(MPI_Irecv(recv_base + offset, count, MPI_FLOAT, left, options_.tag_base + step,
                              comm_->native(), &st.recvs[j]),
                    "MPI_Irecv");
    }
    if (options_.trace != nullptr) {
      ring_step_record record;
      record.operation = operation_;
      record.step = step;
      record.segments = st.sends.size();
      record.bytes_sent = sizeof(float) * st.send_length;
      record.bytes_received = sizeof(float) * st.recv_length;
      record.posted_seconds = ring_trace::now_seconds();
      st.trace_record = options_.trace->steps.size();
      options_.trace->steps.push_back(record);
    }
    post_sends(step, step == oldest_ ? st.sends.size() : slot(step - 1).recvs_done);
  }

  // Posts the sends of `step` up to segment `ready` (exclusive), in segment order (MPI's
  // non-overtaking rule then matches them to the receives, which share the step's tag).
  void post_sends(int step, std::size_t ready) {
    step_state& st = slot(step);
    const int right = wrap(comm_->rank() + 1);
    for (; st.sends_posted < std::min(ready, st.sends.size()); ++st.sends_posted) {
      const std::size_t offset = st.sends_posted * segment_elements_;
      const auto count = static_cast<int>(std::min(segment_elements_, st.send_length - offset));
      detail::check(MPI_Isend(data_.data() + st.send_begin + offset, count, MPI_FLOAT, right,
                              options_.tag_base + step, comm_->native(),
                              &st.sends[st.sends_posted]),
                    "MPI_Isend");
    }
  }

  [[nodiscard]] std::size_t segments(std::size_t elements) const noexcept {
    return (elements + segment_elements_ - 1) / segment_elements_;
  }

  // Reduces received segments in order as they arrive and forwards each to the next step; the
  // oldest step ends once all its receives are reduced and its sends complete, which opens the
  // next one. True when the operation is complete.
  bool progress_ring() {
    const int p = comm_->size();
    for (;;) {
      if (options_.trace != nullptr) { // a pass over the steps in flight, on the oldest's record
        ++options_.trace->steps[slot(oldest_).trace_record].polls;
      }
      bool moved = false;
      for (int step = oldest_; step < opened_; ++step) {
        step_state& st = slot(step);
        const bool scatter = step < p - 1;
        while (st.recvs_done < st.recvs.size() && detail::complete(st.recvs[st.recvs_done])) {
          if (scatter) {
            const double t0 = options_.trace != nullptr ? ring_trace::now_seconds() : 0.0;
            const std::size_t offset = st.recvs_done * segment_elements_;
            const std::size_t count = std::min(segment_elements_, st.recv_length - offset);
            float* target = data_.data() + st.recv_begin + offset;
            const float* incoming = st.scratch.data() + offset;
            for (std::size_t i = 0; i < count; ++i) {
              target[i] += incoming[i];
            }
            if (options_.trace != nullptr) {
              options_.trace->steps[st.trace_record].reduce_seconds +=
                  ring_trace::now_seconds() - t0;
            }
          }
          ++st.recvs_done;
          moved = true;
          if (st.recvs_done == st.recvs.size() && options_.trace != nullptr) {
            options_.trace->steps[st.trace_record].received_seconds = ring_trace::now_seconds();
          }
        }
        if (step + 1 < opened_) {
          post_sends(step + 1, st.recvs_done);
        }
      }
      step_state& oldest = slot(oldest_);
      if (oldest.recvs_done == oldest.recvs.size()) {
        int sent = 0;
        detail::check(MPI_Testall(static_cast<int>(oldest.sends.size()), oldest.sends.data(), &sent,
                                  MPI_STATUSES_IGNORE),
                      "MPI_Testall");
        if (sent) {
          if (options_.trace != nullptr) {
            options_.trace->steps[oldest.trace_record].sent_seconds = ring_trace::now_seconds();
          }
          if (++oldest_ == last_step()) {
            return true;
          }
          open_steps();
          moved = true;
        }
      }
      if (!moved) {
        return false;
      }
    }
  }

  const communicator* comm_;
  options options_;
  std::span<float> data_;
  std::size_t segment_elements_ = 1;
  std::uint64_t operation_ = 0;     // the traced operation's number (options_.trace)
  std::array<step_state, 2> slots_; // step s in slots_[s % 2]
  int oldest_ = 0;                  // the oldest step that has not ended
  int opened_ = 0;                  // steps posted so far: [oldest_, opened_) are in flight
};

} // namespace gradcomp::mpi
