// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::coded_allreduce: CSSGD's coded multicast gradient exchange (S3;
//! docs/coded.md, "Send rule and decoding" and "Exact coding") over nonblocking MPI point-to-point
//! messages. Every part of a batch is computed by r ranks; each rank multicasts one coded packet
//! per (r + 1)-rank group, decodes the packets it receives, and sums the gradients of all C(P, r)
//! parts, bit-identical on every rank; in the reduce-scatter form (coded_variant::reduce_scatter)
//! each rank recovers and sums one block of the coordinates and a ring allgather spreads the
//! blocks. The placement, the exact packet arithmetic and the cost model are the MPI-free
//! gradcomp::coded headers (docs/coded.md); this header only moves their packets.
#pragma once

#include <gradcomp/coded/cost.hpp>
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/coded_agreement.hpp>
#include <gradcomp/mpi/detail/coded_steps.hpp>
#include <gradcomp/mpi/detail/part_codes.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/detail/ring_allgather.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

//! @brief Coded multicast allreduce of CSSGD (S3 "Exchange"; variant F of docs/coded.md, "Variants
//! F and R", by its "Send rule and decoding"; "Exact coding" there for the exact coding): every
//! rank computed the gradients of its parts of the batch, and every rank ends with the sum of the
//! gradients of all C(P, r) parts, bit-identical on every rank. Named for its result, an
//! allreduce-sum; the coded-computing literature calls the exchange itself a coded shuffle (Coded
//! Distributed Computing, Li, Maddah-Ali, Yu, Avestimehr: docs/references.md [CDC]).
//!
//! **Placement.** coded::placement(P, r): part t is computed by the r ranks of the t-th r-subset
//! (lexicographic); rank k owns the C(P - 1, r - 1) parts placement().parts_of(k), ascending.
//! Use placement().rank_samples(k, N) to find the samples of each part.
//!
//! **Algorithm.** One operation:
//! 1. Agreement (two nonblocking allreduces, started together, one latency): the lengths
//!    (detail::length_agreement) and, under MPI_MAX, the options, a malformed-arguments flag and
//!    the largest |value| over this rank's parts (fixed point only).
//! 2. Encoding: fixed point, scale = coded::fixed_point_scale(agreed max, C(P, r)) and
//!    coded::encode_fixed_point of every owned part; XOR, coded::encode_bits. Each part is held
//!    as r slices of L = ceil(d / r) words, zero-padded (coded::placement::slice_elements).
//! 3. Exchange, for each of the C(P - 1, r) multicast groups S of this rank: this rank sends ONE
//!    packet of L words, the wrapping sum (coded::combine_fixed_point) or XOR (coded::combine_xor)
//!    of the r slices listed by coded::placement::coding_terms(S, rank), with MPI_Isend to each
//!    of the other r members (point-to-point multicast: r copies); it receives the r packets of
//!    the other members straight into the slices of the part it lacks
//!    (coded::placement::missing_part), checks each packet's length, and cancels the r - 1 terms
//!    whose parts it owns (coded::cancel_fixed_point / coded::cancel_xor), which leaves one
//!    slice of its missing part. Over its groups it gets every part it lacks.
//! 4. Sum: fixed point, the wrapping int32 sum of all C(P, r) parts' codes (exact and order
//!    independent), decoded once to float (coded::decode_fixed_point); XOR, the parts decoded to
//!    float (coded::decode_bits) and added in part-index order, sum = ((g_0 + g_1) + g_2) + ...,
//!    the same additions on every rank.
//!
//! **Reduce-scatter form** (options().variant = coded_variant::reduce_scatter; variant R of
//! docs/coded.md, "Variants F and R"): the d coordinates are cut into P blocks (coded::placement::
//! block_elements; block k has floor(d / P) or ceil(d / P) elements, empty when d < P), and in
//! group S member j needs only block j of the part it lacks. Steps 2 and 3 run as above with
//! "block j of part S \ {j}" in place of "part S \ {j}": each block is cut into r slices
//! (coded::placement::block_slice_elements), the term of receiver j in a packet is the sender's
//! slice of block j, and packets have L = ceil(ceil(d / P) / r) words
//! (coded::placement::block_packet_elements). Step 4 sums only block k = rank, with the same
//! per-coordinate arithmetic and order, and step 5 is a ring allgather of the blocks (P - 1
//! steps to rank + 1, from rank - 1; step s sends block rank - s, receives block rank - s - 1,
//! into the output). Every coordinate of the result is therefore computed exactly as the full
//! form computes it, on the rank that owns its block, and copied: the result is bit-identical
//! to full_recovery's and on every rank.
//!
//! **Collective:** every rank of the communicator must call start() (or operator()) with the
//! same d and the same options, in the same order relative to other operations on the
//! communicator. No communicator is created (one per group would exhaust MPICH's ~2048 context
//! ids, docs/coded.md, "Network caveat"); groups are told apart by tags.
//!
//! **Wire bytes** per rank and operation (exactly coded::coded_exchange_load(P, r, d, 4,
//! coded::delivery::point_to_point), which bytes_sent() and bytes_received() report): sent and
//! received, r C(P - 1, r) messages of 4 ceil(d / r) bytes each, so about 4 d C(P - 1, r) bytes
//! each way (empty messages are still sent when d < r); plus the agreement, one 16-byte and one
//! 144-byte allreduce, not counted. Reduce-scatter form (exactly
//! coded::coded_reduce_scatter_load(P, r, d, 4, point_to_point, rank)): r C(P - 1, r) packets of
//! 4 ceil(ceil(d / P) / r) bytes each way, plus P - 1 allgather messages each way carrying
//! 4 (d - |block rank + 1|) bytes sent and 4 (d - |block rank|) received; about
//! 4 d (C(P - 1, r) / P + (P - 1) / P) each way, less than the full form's whenever
//! C(P - 1, r) > 1 (r < P - 1). Coding divides what a rank would transmit with true
//! multicast by r; over MPI point-to-point every receiver still gets its own copy (docs/coded.md
//! "Cost model").
//!
//! **Complexity** per rank, d elements: encoding C(P - 1, r - 1) d; packets C(P - 1, r) r L
//! word operations to build and r C(P - 1, r) (r - 1) L to decode; the final sum C(P, r) d.
//! Memory: the codes of all C(P, r) parts (C(P, r) r L words), one packet per group of this rank
//! (C(P - 1, r) L words) and d words for the sum, kept between calls. Reduce-scatter form: the
//! owned parts' codes (C(P - 1, r - 1) P r L words, about C(P - 1, r - 1) d), block `rank` of
//! each missing part (C(P - 1, r) r L), the packets (C(P - 1, r) L) and one block for the sum;
//! encoding skips the blocks of the part's other owners, and the final sum covers one block
//! (C(P, r) d / P), plus d / P (P - 1) words copied by the allgather.
//!
//! **Determinism:** the result depends only on the parts' values, P, r and the coding, not on
//! the schedule, the window, message timing or the rank: bit-identical on every rank.
//!
//! **P = 1:** 1 <= r < P has no solution, so the constructor throws std::invalid_argument, as
//! coded::placement does; a single rank has nothing to exchange (its one part is the sum).
//!
//! Nonblocking use: start(), then test() until true, or wait(); the parts and the output must
//! not be touched until then. One operation at a time per object. After an exception the object
//! is reset and can start again.
//! @throws (from start(), test(), wait()) std::invalid_argument on the rank whose arguments are
//! malformed (the wrong number of part gradients, a part whose length differs from the
//! output's; the other ranks throw mpi_error), on every rank when fixed-point gradients hold NaN
//! or an infinity on some rank, and on every rank when d is too large for the storage or for an
//! MPI count (a packet, or a block of the reduce-scatter form, above INT_MAX); mpi_error on every
//! rank when ranks pass different lengths or options, and on an MPI failure; gradcomp::wire_error
//! if a received packet has the wrong length.
class coded_allreduce : public detail::phased_operation<coded_allreduce> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "coded_allreduce";
  using options = coded_allreduce_options; //!< see coded_allreduce_options.

  //! @brief Builds the placement of P = comm.size() ranks and r = o.redundancy, and this rank's
  //! transfer plan (the placement's O(C(P, r) r + C(P, r + 1) (r + 1)) time, plus O(r C(P - 1,
  //! r)) for the plan). Local: no communication.
  //! @param comm the communicator; must outlive this object.
  //! @param o    the options; every rank must pass the same (checked when the exchange starts).
  //! @throws std::invalid_argument naming the value if r < 1 or r >= P (in particular for every
  //! r when P = 1), if coded::placement rejects (P, r) (more than coded::max_subset_count parts
  //! or groups), if tag_base < 0, tag_range < 1, the last tag exceeds MPI_TAG_UB, or
  //! max_requests is outside [2, 64]; mpi_error if MPI_TAG_UB cannot be read.
  explicit coded_allreduce(const communicator& comm, options o = {})
      : comm_(&comm), options_(o), placement_(checked_placement(comm, o)),
        codes_(placement_, comm.rank(), o) {
    gradcomp::detail::require(o.tag_base >= 0, "coded_allreduce: tag_base ", o.tag_base,
                              " is negative");
    gradcomp::detail::require(o.tag_range >= 1, "coded_allreduce: tag_range ", o.tag_range,
                              " is below 1");
    gradcomp::detail::require(o.max_requests >= 2 && o.max_requests <= 64,
                              "coded_allreduce: max_requests ", o.max_requests,
                              " is outside [2, 64]");
    const std::size_t tags =
        std::min(static_cast<std::size_t>(o.tag_range), placement_.group_count());
    const long long last_tag =
        static_cast<long long>(o.tag_base) + static_cast<long long>(tags) - 1;
    const int tag_ub = detail::tag_upper_bound(comm);
    gradcomp::detail::require(last_tag <= tag_ub, "coded_allreduce: the last tag tag_base ",
                              o.tag_base, " + ", tags, " - 1 = ", last_tag,
                              " exceeds MPI_TAG_UB = ", tag_ub);
    steps_ = detail::coded_steps::plan(placement_, comm.rank(), o);
    send_requests_.assign(steps_.sends, MPI_REQUEST_NULL);
    receive_requests_.assign(steps_.receives, MPI_REQUEST_NULL);
  }
  coded_allreduce(const coded_allreduce&) = delete;
  coded_allreduce& operator=(const coded_allreduce&) = delete;
  ~coded_allreduce() { reset(); }

  //! @brief Starts the exchange. Collective (see the class).
  //! @param[in] parts this rank's part gradients, one per part of placement().parts_of(rank), in
  //! that (ascending) order: C(P - 1, r - 1) spans of d floats each (host memory).
  //! @param[out] sum d floats: on completion, the sum of the gradients of all C(P, r) parts.
  //! Must not overlap the parts.
  //! @throws std::invalid_argument if an operation is in progress (local). Argument errors are
  //! reported by test()/wait() on every rank (see the class).
  void start(std::span<const std::span<const float>> parts, std::span<float> sum) {
    const auto starting = begin_operation();
    parts_ = parts;
    sum_ = sum;
    bytes_sent_ = bytes_received_ = 0;
    messages_sent_ = messages_received_ = 0;
    scale_ = 0.0;
    local_error_.clear();
    const int me = comm_->rank();
    const std::span<const std::size_t> owned = placement_.parts_of(me);
    if (parts.size() != owned.size()) {
      local_error_ = gradcomp::detail::concat("coded_allreduce: rank ", me, " passed ",
                                              parts.size(), " part gradients, but it owns ",
                                              owned.size(), " parts (placement().parts_of)");
    } else {
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].size() != sum.size()) {
          local_error_ = gradcomp::detail::concat("coded_allreduce: rank ", me, "'s gradient ", i,
                                                  " (part ", owned[i], ") has ", parts[i].size(),
                                                  " elements, but the output has ", sum.size());
          break;
        }
      }
    }
    const double max_abs = local_error_.empty() && options_.coding == packet_coding::fixed_point
                               ? detail::coded_agreement::largest_magnitude(parts)
                               : 0.0;
    // Collectives, which MPI does not allow to be freed or cancelled: dropped mid-way, they are
    // waited for (every rank posts both here; if the second fails to post on this rank, only
    // the first is pending, which every rank has posted). The errors thrown on every rank (the
    // agreement's) are thrown after it completed, with nothing pending.
    MPI_Request& lengths = *collective();
    MPI_Request& values = *collective();
    agreement_.start(*comm_, sum.size(), options_, max_abs, !local_error_.empty(), lengths, values);
    then(&coded_allreduce::begin_exchange);
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

  //! The placement of P ranks and redundancy r: which parts each rank computes.
  [[nodiscard]] const coded::placement& placement() const noexcept { return placement_; }
  //! The options this object was built with.
  [[nodiscard]] const options& settings() const noexcept { return options_; }
  //! Payload bytes this rank sent in the last operation (completed packets, and in the
  //! reduce-scatter form completed allgather messages; the agreement's allreduces are not
  //! counted): once the operation completed, coded::coded_exchange_load(P, r, d, 4,
  //! point_to_point).sent_bytes, or coded::coded_reduce_scatter_load(P, r, d, 4, point_to_point,
  //! rank).sent_bytes.
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Payload bytes this rank received in the last operation (packets, and allgather messages),
  //! the received_bytes of the same cost-model call once complete.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! Messages this rank sent in the last operation: r C(P - 1, r) packets once complete, plus
  //! P - 1 allgather messages in the reduce-scatter form.
  [[nodiscard]] std::size_t messages_sent() const noexcept { return messages_sent_; }
  //! Messages this rank received in the last operation (as messages_sent()).
  [[nodiscard]] std::size_t messages_received() const noexcept { return messages_received_; }
  //! The fixed-point scale of the last operation (the same on every rank; the result is within
  //! C(P, r) 0.5 / scale of the exact sum, plus the rounding to float), or 0 with xor_bits or
  //! before the agreement completed.
  [[nodiscard]] double scale() const noexcept { return scale_; }

private:
  static coded::placement checked_placement(const communicator& comm, const options& o) {
    gradcomp::detail::require(o.redundancy >= 1, "coded_allreduce: redundancy r = ", o.redundancy,
                              " is below 1");
    gradcomp::detail::require(o.redundancy < comm.size(),
                              "coded_allreduce: redundancy r = ", o.redundancy,
                              " is not below the rank count P = ", comm.size(),
                              " (need 1 <= r < P; one rank has no valid r and nothing to "
                              "exchange)");
    return coded::placement(comm.size(), o.redundancy);
  }

  [[nodiscard]] bool reduce_scatter() const noexcept {
    return options_.variant == coded_variant::reduce_scatter;
  }

  // After the agreement: every check that must fail on every rank together, then the encoding
  // and the exchange of the packets. Dropped mid-way (an exception, or destruction): the
  // packets in flight, point to point: the sends first, each waited for (MPICH cannot cancel a
  // send; a rendezvous-sized packet waits until its receiver takes it) while this rank's
  // receives stay posted, so that the peers' sends to this rank complete and their windows move
  // on to the steps whose receives match these sends; then the receives, each cancelled and
  // completed. What this completes is left by a failure on this rank alone (an MPI failure, a
  // packet of the wrong length) or by destruction mid-way.
  void begin_exchange() {
    agreement_.verify(local_error_);
    codes_.resize(sum_.size());
    if (options_.coding == packet_coding::fixed_point) {
      gradcomp::detail::require(std::isfinite(agreement_.largest()),
                                "coded_allreduce: a gradient holds NaN or an infinity on some "
                                "rank; fixed-point coding needs finite values (xor_bits "
                                "delivers any bit pattern)");
      scale_ = coded::fixed_point_scale(agreement_.largest(), placement_.part_count());
    }
    codes_.encode(parts_, scale_);
    in_flight_.clear();
    in_flight_.reserve(options_.max_requests);
    next_step_ = 0;
    poll(&coded_allreduce::exchange_packets, &coded_allreduce::sum_blocks)
        .sends(send_requests_)
        .receives(receive_requests_);
    post_steps();
  }

  // The window of packets moves on: completes what arrived, posts the steps it has room for;
  // true once every packet has been sent and received.
  bool exchange_packets() {
    for (bool moved = true; moved;) {
      moved = complete_transfers();
      post_steps();
      if (in_flight_.empty() && next_step_ == steps_.steps()) {
        return true;
      }
    }
    return false;
  }

  // Every packet is in: the sum of this rank's block, and in the reduce-scatter form the ring
  // allgather of the blocks (dropped mid-way: ring_allgather::abandon).
  void sum_blocks() {
    codes_.sum(sum_);
    if (!reduce_scatter()) {
      return;
    }
    std::vector<coded::index_range> blocks(static_cast<std::size_t>(comm_->size()));
    for (int b = 0; b < comm_->size(); ++b) {
      blocks[static_cast<std::size_t>(b)] = placement_.block_elements(sum_.size(), b);
    }
    await(gather_, &coded_allreduce::count_gathered);
    gather_.start(*comm_, sum_.data(), sizeof(float), MPI_FLOAT, std::move(blocks),
                  options_.tag_base, "coded_allreduce");
  }

  void count_gathered() {
    bytes_sent_ += gather_.bytes_sent();
    bytes_received_ += gather_.bytes_received();
    messages_sent_ += gather_.messages_sent();
    messages_received_ += gather_.messages_received();
  }

  [[nodiscard]] std::size_t group_of(const detail::coded_transfer& x) const {
    return placement_.groups_of(comm_->rank())[x.group_slot];
  }

  [[nodiscard]] int tag_of(std::size_t group) const noexcept {
    return options_.tag_base +
           static_cast<int>(group % static_cast<std::size_t>(options_.tag_range));
  }

  [[nodiscard]] MPI_Request& request_of(const detail::coded_transfer& x) noexcept {
    return (x.send ? send_requests_ : receive_requests_)[x.request];
  }

  // Posts the next steps, in order, while the window has room (serialized: one step at a time).
  void post_steps() {
    while (next_step_ < steps_.steps()) {
      const std::size_t first = steps_.step_begin[next_step_];
      const std::size_t last = steps_.step_begin[next_step_ + 1];
      const bool room = options_.schedule == coded_schedule::serialized
                            ? in_flight_.empty()
                            : in_flight_.size() + (last - first) <= options_.max_requests;
      if (!room) {
        return;
      }
      for (std::size_t t = first; t < last; ++t) {
        post(t);
      }
      ++next_step_;
    }
  }

  // One packet, L words: this rank's to a member of its group, or a member's to this rank,
  // straight into the slice of the part this rank lacks.
  void post(std::size_t t) {
    const detail::coded_transfer& x = steps_.transfers[t];
    const auto words = static_cast<int>(codes_.packet_words());
    if (x.send) {
      detail::check(MPI_Isend(codes_.outgoing(x.group_slot, x.peer), words, MPI_UINT32_T, x.peer,
                              tag_of(group_of(x)), comm_->native(), &request_of(x)),
                    "MPI_Isend");
    } else {
      detail::check(MPI_Irecv(codes_.incoming(x.group_slot, x.peer), words, MPI_UINT32_T, x.peer,
                              tag_of(group_of(x)), comm_->native(), &request_of(x)),
                    "MPI_Irecv");
    }
    in_flight_.push_back(t);
  }

  // Tests every outstanding request once; decodes the packets that arrived. True if any
  // request completed.
  bool complete_transfers() {
    const std::size_t packet = codes_.packet_words();
    bool moved = false;
    for (std::size_t i = 0; i < in_flight_.size();) {
      const detail::coded_transfer& x = steps_.transfers[in_flight_[i]];
      int done = 0;
      MPI_Status status{};
      detail::check(MPI_Test(&request_of(x), &done, x.send ? MPI_STATUS_IGNORE : &status),
                    "MPI_Test");
      if (!done) {
        ++i;
        continue;
      }
      moved = true;
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
      if (x.send) {
        bytes_sent_ += packet * sizeof(std::uint32_t);
        ++messages_sent_;
      } else {
        int count = 0;
        detail::check(MPI_Get_count(&status, MPI_UINT32_T, &count), "MPI_Get_count");
        gradcomp::detail::require_wire(count >= 0 && static_cast<std::size_t>(count) == packet,
                                       "coded_allreduce: the packet of rank ", x.peer,
                                       " for multicast group ", group_of(x), " has ", count,
                                       " words, expected ", packet);
        bytes_received_ += static_cast<std::size_t>(count) * sizeof(std::uint32_t);
        ++messages_received_;
        codes_.decode(x.group_slot, x.peer);
      }
    }
    return moved;
  }

  const communicator* comm_;
  options options_;
  coded::placement placement_;
  detail::part_codes codes_;  // the parts' codes and the packet arithmetic
  detail::coded_steps steps_; // this rank's transfers, in posting order
  std::vector<MPI_Request> send_requests_, receive_requests_; // per transfer (its `request`)
  std::vector<std::size_t> in_flight_; // the transfers posted and not yet complete
  std::size_t next_step_ = 0;
  std::span<const std::span<const float>> parts_;
  std::span<float> sum_;
  std::string local_error_;
  detail::coded_agreement agreement_;
  double scale_ = 0.0;
  detail::ring_allgather gather_; // reduce-scatter form: the allgather of the blocks
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
  std::size_t messages_sent_ = 0, messages_received_ = 0;
};

} // namespace gradcomp::mpi
