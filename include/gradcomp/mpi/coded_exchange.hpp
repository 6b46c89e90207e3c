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
#include <gradcomp/coded/detail/combinatorics.hpp>
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/detail/ring_allgather.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <climits>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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
class coded_allreduce : public nonblocking_operation<coded_allreduce> {
  friend class nonblocking_operation<coded_allreduce>;

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
      : comm_(&comm), options_(o), placement_(checked_placement(comm, o)) {
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
    plan_transfers();
    plan_storage();
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
    gradcomp::detail::require(phase_ == phase::idle || phase_ == phase::done,
                              "coded_allreduce: start() while an operation is in progress");
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
    double max_abs = 0.0;
    if (local_error_.empty() && options_.coding == packet_coding::fixed_point) {
      max_abs = largest_magnitude(parts);
    }
    agreed_[0] = max_abs;
    agreed_[1] = local_error_.empty() ? 0.0 : 1.0;
    const std::array<double, setting_pairs> mine = {
        static_cast<double>(options_.redundancy),
        static_cast<double>(static_cast<int>(options_.coding)),
        static_cast<double>(static_cast<int>(options_.schedule)),
        static_cast<double>(static_cast<int>(options_.variant)),
        static_cast<double>(options_.tag_base),
        static_cast<double>(options_.tag_range),
        static_cast<double>(options_.max_requests),
        options_.uncoded ? 1.0 : 0.0};
    for (std::size_t k = 0; k < setting_pairs; ++k) {
      agreed_[2 + 2 * k] = mine[k];
      agreed_[3 + 2 * k] = -mine[k];
    }
    try {
      lengths_.start(*comm_, sum.size(), length_request_);
      detail::check(MPI_Iallreduce(MPI_IN_PLACE, agreed_.data(), static_cast<int>(agreed_.size()),
                                   MPI_DOUBLE, MPI_MAX, comm_->native(), &agreed_request_),
                    "MPI_Iallreduce");
    } catch (...) {
      reset();
      throw;
    }
    phase_ = phase::agreeing;
  }

  //! @private The nonblocking_operation hooks.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }
  //! @private
  bool progress() {
    for (;;) {
      switch (phase_) {
      case phase::idle:
      case phase::done:
        return true;
      case phase::agreeing:
        if (!detail::complete(length_request_) || !detail::complete(agreed_request_)) {
          return false;
        }
        begin_exchange();
        continue;
      case phase::exchanging: {
        const bool moved = complete_transfers();
        post_transfers();
        if (in_flight_.empty() && next_step_ + 1 == step_begin_.size()) {
          finish();
          if (reduce_scatter()) {
            std::vector<coded::index_range> blocks(static_cast<std::size_t>(comm_->size()));
            for (int b = 0; b < comm_->size(); ++b) {
              blocks[static_cast<std::size_t>(b)] = placement_.block_elements(sum_.size(), b);
            }
            gather_.start(*comm_, sum_.data(), sizeof(float), MPI_FLOAT, std::move(blocks),
                          options_.tag_base, "coded_allreduce");
            phase_ = phase::gathering;
            continue;
          }
          phase_ = phase::done;
          return true;
        }
        if (!moved) {
          return false;
        }
        continue;
      }
      case phase::gathering:
        if (!gather_.progress()) {
          return false;
        }
        bytes_sent_ += gather_.bytes_sent();
        bytes_received_ += gather_.bytes_received();
        messages_sent_ += gather_.messages_sent();
        messages_received_ += gather_.messages_received();
        phase_ = phase::done;
        return true;
      }
    }
  }

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
  enum class phase { idle, agreeing, exchanging, gathering, done };

  // agreed_: [max |value|, malformed flag, then (x, -x) for each option], all under MPI_MAX
  static constexpr std::size_t setting_pairs = 8;

  // One point-to-point message of this rank: a packet to or from `peer` in the group
  // groups_of(rank)[group_slot].
  struct transfer {
    std::size_t group_slot = 0;
    int peer = 0;
    bool send = false;
  };

  struct pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t transfer = 0;
  };

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

  // Largest |value| over the parts, +inf if any value is NaN or infinite (so that every rank
  // learns it from the MAX allreduce).
  static double largest_magnitude(std::span<const std::span<const float>> parts) noexcept {
    float largest = 0.0f;
    for (const std::span<const float> part : parts) {
      for (const float v : part) {
        const float a = std::fabs(v);
        if (!(a <= std::numeric_limits<float>::max())) {
          return std::numeric_limits<double>::infinity();
        }
        largest = std::max(largest, a);
      }
    }
    return static_cast<double>(largest);
  }

  // The steps of this rank, in the order every rank agrees on (ascending group, then shift or
  // turn), so that the smallest unfinished step of the whole job is always posted by all of its
  // members: neither schedule can deadlock, whatever the window.
  void plan_transfers() {
    const int me = comm_->rank();
    const int q = options_.redundancy + 1;
    const std::span<const std::size_t> groups = placement_.groups_of(me);
    step_begin_.assign(1, 0);
    auto close_step = [this] { step_begin_.push_back(transfers_.size()); };
    for (std::size_t slot = 0; slot < groups.size(); ++slot) {
      const std::span<const int> members = placement_.members(groups[slot]);
      const auto pos =
          static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
      const auto member = [&](int i) { return members[static_cast<std::size_t>((i + q) % q)]; };
      if (options_.schedule == coded_schedule::concurrent) {
        // shift s: receive from pos - s, send to pos + s; a step holds whole shifts, the same
        // ones on every member
        const int shifts_per_step = static_cast<int>(options_.max_requests / 2);
        for (int s0 = 1; s0 <= options_.redundancy; s0 += shifts_per_step) {
          const int s1 = std::min(options_.redundancy + 1, s0 + shifts_per_step);
          for (int s = s0; s < s1; ++s) {
            transfers_.push_back({slot, member(pos - s), false});
          }
          for (int s = s0; s < s1; ++s) {
            transfers_.push_back({slot, member(pos + s), true});
          }
          close_step();
        }
      } else {
        for (int turn = 0; turn < q; ++turn) {
          if (turn != pos) {
            transfers_.push_back({slot, members[static_cast<std::size_t>(turn)], false});
            close_step();
            continue;
          }
          std::size_t in_step = 0;
          for (int j = 0; j < q; ++j) {
            if (j == pos) {
              continue;
            }
            transfers_.push_back({slot, members[static_cast<std::size_t>(j)], true});
            if (++in_step == options_.max_requests) {
              close_step();
              in_step = 0;
            }
          }
          if (in_step != 0) {
            close_step();
          }
        }
      }
    }
  }

  [[nodiscard]] bool reduce_scatter() const noexcept {
    return options_.variant == coded_variant::reduce_scatter;
  }

  // Where each part's codes live in words_, in units of r slices of packet_ words (one block of
  // a part). Full form: every part one unit (its whole gradient). Reduce-scatter form: an owned
  // part P units (block b at unit first + b), a missing part one unit (block `rank` only).
  void plan_storage() {
    const int me = comm_->rank();
    const std::size_t owned_units = reduce_scatter() ? static_cast<std::size_t>(comm_->size()) : 1;
    first_unit_.resize(placement_.part_count());
    all_blocks_.resize(placement_.part_count());
    std::size_t unit = 0;
    for (std::size_t part = 0; part < placement_.part_count(); ++part) {
      first_unit_[part] = unit;
      all_blocks_[part] = reduce_scatter() && placement_.owns(me, part) ? 1 : 0;
      unit += all_blocks_[part] != 0 ? owned_units : 1;
    }
    units_ = unit;
  }

  // The block of the coordinates that `receiver` recovers: its own in the reduce-scatter form,
  // the whole gradient (block 0) in the full form.
  [[nodiscard]] int block_of(int receiver) const noexcept {
    return reduce_scatter() ? receiver : 0;
  }

  // The elements of slice `s` of block `block` of a gradient (absolute indices).
  [[nodiscard]] coded::index_range slice_range(int block, int s) const {
    return reduce_scatter() ? placement_.block_slice_elements(sum_.size(), block, s)
                            : placement_.slice_elements(sum_.size(), s);
  }

  // The elements of block `block` ([0, d) in the full form).
  [[nodiscard]] coded::index_range block_range(int block) const {
    return reduce_scatter() ? placement_.block_elements(sum_.size(), block)
                            : coded::index_range{0, sum_.size()};
  }

  // After the agreement: every check that must fail on every rank together, then encoding.
  void begin_exchange() {
    if (!local_error_.empty()) {
      throw std::invalid_argument("gradcomp: " + local_error_);
    }
    if (agreed_[1] != 0.0) {
      throw mpi_error(
          "gradcomp mpi: coded_allreduce: another rank passed malformed arguments (a wrong "
          "number of part gradients, or a part whose length differs from its output); that rank "
          "throws std::invalid_argument naming them");
    }
    lengths_.verify("coded_allreduce");
    static constexpr std::array<const char*, setting_pairs> names = {
        "redundancy", "coding",    "schedule",     "variant",
        "tag_base",   "tag_range", "max_requests", "uncoded"};
    for (std::size_t k = 0; k < setting_pairs; ++k) {
      const double largest = agreed_[2 + 2 * k];
      const double smallest = -agreed_[3 + 2 * k];
      if (largest != smallest) {
        throw mpi_error(gradcomp::detail::concat("gradcomp mpi: coded_allreduce: ranks pass "
                                                 "different options: ",
                                                 names[k], " from ", smallest, " to ", largest));
      }
    }
    const std::size_t d = sum_.size();
    const auto r = static_cast<std::size_t>(options_.redundancy);
    const int me = comm_->rank();
    packet_ =
        reduce_scatter() ? placement_.block_packet_elements(d) : placement_.packet_elements(d);
    gradcomp::detail::require(packet_ <= static_cast<std::size_t>(INT_MAX),
                              "coded_allreduce: packets of ", packet_,
                              " elements exceed MPI's int count limit ", INT_MAX);
    if (reduce_scatter()) {
      const std::size_t longest_block = placement_.block_elements(d, 0).size();
      gradcomp::detail::require(longest_block <= static_cast<std::size_t>(INT_MAX),
                                "coded_allreduce: allgather blocks of ", longest_block,
                                " elements exceed MPI's int count limit ", INT_MAX);
    }
    const auto words = coded::detail::checked_product(units_ * r, packet_);
    gradcomp::detail::require(words.has_value() && *words <= words_.max_size(),
                              "coded_allreduce: the codes of C(P, r) = ", placement_.part_count(),
                              " parts of ", d, " elements do not fit in memory");
    if (options_.coding == packet_coding::fixed_point) {
      gradcomp::detail::require(std::isfinite(agreed_[0]),
                                "coded_allreduce: a gradient holds NaN or an infinity on some "
                                "rank; fixed-point coding needs finite values (xor_bits "
                                "delivers any bit pattern)");
      scale_ = coded::fixed_point_scale(agreed_[0], placement_.part_count());
    }
    words_.assign(*words, 0u);
    const std::span<const std::size_t> owned = placement_.parts_of(me);
    const int blocks = reduce_scatter() ? comm_->size() : 1;
    for (std::size_t i = 0; i < owned.size(); ++i) {
      for (int block = 0; block < blocks; ++block) {
        // reduce-scatter: the other owners' blocks of an owned part are never sent or summed here
        if (reduce_scatter() && block != me && placement_.owns(block, owned[i])) {
          continue;
        }
        for (int s = 0; s < options_.redundancy; ++s) {
          const coded::index_range e = slice_range(block, s);
          const std::span<const float> values = parts_[i].subspan(e.begin, e.size());
          const std::span<std::uint32_t> target = slice(owned[i], block, s).first(e.size());
          if (options_.coding == packet_coding::fixed_point) {
            coded::encode_fixed_point(values, scale_, as_codes(target));
          } else {
            coded::encode_bits(values, target);
          }
        }
      }
    }
    const std::size_t groups = placement_.groups_per_rank();
    packets_.assign(options_.uncoded ? 0 : groups * packet_, 0u);
    packet_ready_.assign(groups, 0);
    in_flight_.clear();
    in_flight_.reserve(options_.max_requests);
    next_step_ = 0;
    phase_ = phase::exchanging;
    post_transfers();
  }

  // Slice `s` of block `block` of part `part`'s codes: packet_ words, zero-padded beyond the
  // slice's length. Full form: block 0; reduce-scatter form: any block of an owned part, block
  // `rank` of a missing part.
  [[nodiscard]] std::span<std::uint32_t> slice(std::size_t part, int block, int s) noexcept {
    const auto r = static_cast<std::size_t>(options_.redundancy);
    const std::size_t unit =
        first_unit_[part] + (all_blocks_[part] != 0 ? static_cast<std::size_t>(block) : 0);
    return {words_.data() + (unit * r + static_cast<std::size_t>(s)) * packet_, packet_};
  }

  // int32 view of code words (a signed type may alias its unsigned counterpart).
  [[nodiscard]] static std::span<std::int32_t> as_codes(std::span<std::uint32_t> w) noexcept {
    return {reinterpret_cast<std::int32_t*>(w.data()), w.size()};
  }

  [[nodiscard]] int tag_of(std::size_t group) const noexcept {
    return options_.tag_base +
           static_cast<int>(group % static_cast<std::size_t>(options_.tag_range));
  }

  // Posts the next steps, in order, while the window has room (serialized: one step at a time).
  void post_transfers() {
    const std::size_t steps = step_begin_.size() - 1;
    while (next_step_ < steps) {
      const std::size_t first = step_begin_[next_step_];
      const std::size_t last = step_begin_[next_step_ + 1];
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

  void post(std::size_t t) {
    const transfer& x = transfers_[t];
    const std::size_t group = placement_.groups_of(comm_->rank())[x.group_slot];
    pending p;
    p.transfer = t;
    if (x.send) {
      std::uint32_t* data = nullptr;
      if (options_.uncoded) { // the one term of the packet that x.peer needs, unicast as is
        for (const coded::coding_term& term : placement_.coding_terms(group, comm_->rank())) {
          if (term.receiver == x.peer) {
            data = slice(term.part, block_of(term.receiver), term.slice).data();
          }
        }
      } else {
        build_packet(x.group_slot);
        data = packets_.data() + x.group_slot * packet_;
      }
      detail::check(MPI_Isend(data, static_cast<int>(packet_), MPI_UINT32_T, x.peer, tag_of(group),
                              comm_->native(), &p.request),
                    "MPI_Isend");
    } else {
      const std::size_t part = placement_.missing_part(group, comm_->rank());
      detail::check(
          MPI_Irecv(slice(part, block_of(comm_->rank()), owner_position(part, x.peer)).data(),
                    static_cast<int>(packet_), MPI_UINT32_T, x.peer, tag_of(group), comm_->native(),
                    &p.request),
          "MPI_Irecv");
    }
    in_flight_.push_back(p);
  }

  [[nodiscard]] int owner_position(std::size_t part, int rank) const {
    const std::span<const int> o = placement_.owners(part);
    return static_cast<int>(std::find(o.begin(), o.end(), rank) - o.begin());
  }

  // This rank's packet for its group `slot` (S3 "Exchange"): built once, when first sent.
  void build_packet(std::size_t slot) {
    if (packet_ready_[slot] != 0) {
      return;
    }
    const int me = comm_->rank();
    const std::size_t group = placement_.groups_of(me)[slot];
    const std::span<std::uint32_t> packet(packets_.data() + slot * packet_, packet_);
    const std::vector<coded::coding_term> terms = placement_.coding_terms(group, me);
    if (options_.coding == packet_coding::fixed_point) {
      code_slices_.clear();
      for (const coded::coding_term& term : terms) {
        const int block = block_of(term.receiver);
        code_slices_.push_back(as_codes(slice(term.part, block, term.slice))
                                   .first(slice_range(block, term.slice).size()));
      }
      coded::combine_fixed_point(code_slices_, as_codes(packet));
    } else {
      word_slices_.clear();
      for (const coded::coding_term& term : terms) {
        const int block = block_of(term.receiver);
        word_slices_.push_back(
            slice(term.part, block, term.slice).first(slice_range(block, term.slice).size()));
      }
      coded::combine_xor(word_slices_, packet);
    }
    packet_ready_[slot] = 1;
  }

  // Tests every outstanding request once; decodes the packets that arrived. True if any
  // request completed.
  bool complete_transfers() {
    bool moved = false;
    for (std::size_t i = 0; i < in_flight_.size();) {
      const transfer& x = transfers_[in_flight_[i].transfer];
      int done = 0;
      MPI_Status status{};
      detail::check(MPI_Test(&in_flight_[i].request, &done, x.send ? MPI_STATUS_IGNORE : &status),
                    "MPI_Test");
      if (!done) {
        ++i;
        continue;
      }
      moved = true;
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
      if (x.send) {
        bytes_sent_ += packet_ * sizeof(std::uint32_t);
        ++messages_sent_;
      } else {
        int count = 0;
        detail::check(MPI_Get_count(&status, MPI_UINT32_T, &count), "MPI_Get_count");
        const std::size_t group = placement_.groups_of(comm_->rank())[x.group_slot];
        gradcomp::detail::require_wire(count >= 0 && static_cast<std::size_t>(count) == packet_,
                                       "coded_allreduce: the packet of rank ", x.peer,
                                       " for multicast group ", group, " has ", count,
                                       " words, expected ", packet_);
        bytes_received_ += static_cast<std::size_t>(count) * sizeof(std::uint32_t);
        ++messages_received_;
        decode(x);
      }
    }
    return moved;
  }

  // S3: "Receiver j subtracts the terms it already knows and is left with one slice". Uncoded:
  // the slice arrived as is.
  void decode(const transfer& x) {
    if (options_.uncoded) {
      return;
    }
    const int me = comm_->rank();
    const std::size_t group = placement_.groups_of(me)[x.group_slot];
    const std::vector<coded::coding_term> terms = placement_.coding_terms(group, x.peer);
    std::span<std::uint32_t> received;
    code_slices_.clear();
    word_slices_.clear();
    for (const coded::coding_term& term : terms) {
      const int block = block_of(term.receiver);
      const std::span<std::uint32_t> s =
          slice(term.part, block, term.slice).first(slice_range(block, term.slice).size());
      if (term.receiver == me) {
        received = slice(term.part, block, term.slice);
      } else if (options_.coding == packet_coding::fixed_point) {
        code_slices_.push_back(as_codes(s));
      } else {
        word_slices_.push_back(s);
      }
    }
    if (options_.coding == packet_coding::fixed_point) {
      coded::cancel_fixed_point(code_slices_, as_codes(received));
    } else {
      coded::cancel_xor(word_slices_, received);
    }
  }

  // Every part's codes of this rank's block are in place (the whole gradient in the full form):
  // the sum of that block, per coordinate the same additions on every rank and in both forms.
  void finish() {
    const int block = block_of(comm_->rank());
    const coded::index_range mine = block_range(block);
    if (options_.coding == packet_coding::fixed_point) {
      total_.assign(mine.size(), 0);
      for (std::size_t part = 0; part < placement_.part_count(); ++part) {
        for (int s = 0; s < options_.redundancy; ++s) {
          const coded::index_range e = slice_range(block, s);
          coded::add_fixed_point(
              as_codes(slice(part, block, s)).first(e.size()),
              std::span<std::int32_t>(total_).subspan(e.begin - mine.begin, e.size()));
        }
      }
      coded::decode_fixed_point(total_, scale_, sum_.subspan(mine.begin, mine.size()));
      return;
    }
    floats_.resize(packet_);
    for (std::size_t part = 0; part < placement_.part_count(); ++part) {
      for (int s = 0; s < options_.redundancy; ++s) {
        const coded::index_range e = slice_range(block, s);
        const std::span<float> out = sum_.subspan(e.begin, e.size());
        if (part == 0) {
          coded::decode_bits(slice(part, block, s).first(e.size()), out);
          continue;
        }
        const std::span<float> values = std::span<float>(floats_).first(e.size());
        coded::decode_bits(slice(part, block, s).first(e.size()), values);
        for (std::size_t i = 0; i < e.size(); ++i) {
          out[i] += values[i];
        }
      }
    }
  }

  // An operation dropped mid-way (an exception, or destruction): completes what is pending and
  // makes the object ready for a new start() (detail::abandon). Per phase: agreeing, the two
  // allreduces, collectives, which MPI does not allow to be freed or cancelled: waited for
  // (every rank posts both in start(); if the second fails to post on this rank, start() calls
  // this with only the first pending, which every rank has posted); exchanging, the packets in
  // flight, point to point: the sends first, each waited for (MPICH cannot cancel a send; a
  // rendezvous-sized packet waits until its receiver takes it) while this rank's receives stay
  // posted, so that the peers' sends to this rank complete and their windows move on to the
  // steps whose receives match these sends; then the receives, each cancelled and completed;
  // gathering, the ring allgather's step (ring_allgather::abandon). The errors thrown on every
  // rank (the agreement's) are thrown after it completed, with nothing pending; what this
  // completes is left by a failure on this rank alone (an MPI failure, a packet of the wrong
  // length) or by destruction mid-way.
  void reset() noexcept {
    phase_ = phase::idle;
    for (const bool sends : {true, false}) {
      for (pending& p : in_flight_) {
        if (transfers_[p.transfer].send == sends) {
          detail::abandon(p.request, detail::request_kind::point_to_point);
        }
      }
    }
    in_flight_.clear();
    gather_.abandon();
    detail::abandon(length_request_, detail::request_kind::collective);
    detail::abandon(agreed_request_, detail::request_kind::collective);
  }

  const communicator* comm_;
  options options_;
  coded::placement placement_;
  std::vector<transfer> transfers_;     // this rank's messages, in posting order
  std::vector<std::size_t> step_begin_; // steps: transfers_[step_begin_[i] .. step_begin_[i+1])
  phase phase_ = phase::idle;
  std::span<const std::span<const float>> parts_;
  std::span<float> sum_;
  std::string local_error_;
  detail::length_agreement lengths_;
  std::array<double, 2 + 2 * setting_pairs> agreed_{};
  MPI_Request length_request_ = MPI_REQUEST_NULL;
  MPI_Request agreed_request_ = MPI_REQUEST_NULL;
  double scale_ = 0.0;
  std::size_t packet_ = 0; // L = ceil(d / r) words (reduce-scatter: ceil(ceil(d / P) / r))
  std::vector<std::size_t> first_unit_;   // per part: its first unit (r slices of L words)
  std::vector<unsigned char> all_blocks_; // per part: 1 if it stores all P blocks (see slice())
  std::size_t units_ = 0;                 // units in words_
  std::vector<std::uint32_t> words_;   // the parts' codes, part-major, units of r slices of L words
  std::vector<std::uint32_t> packets_; // this rank's packet of each of its groups
  std::vector<unsigned char> packet_ready_;
  std::vector<pending> in_flight_;
  std::size_t next_step_ = 0;
  std::vector<std::span<const std::int32_t>> code_slices_;
  std::vector<std::span<const std::uint32_t>> word_slices_;
  std::vector<std::int32_t> total_;
  std::vector<float> floats_;
  detail::ring_allgather gather_; // reduce-scatter form: the allgather of the blocks
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
  std::size_t messages_sent_ = 0, messages_received_ = 0;
};

} // namespace gradcomp::mpi
