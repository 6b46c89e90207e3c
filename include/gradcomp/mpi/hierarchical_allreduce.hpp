// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::hierarchical_allreduce: a two-level allreduce (sum) of dense float
//! gradients over groups of ranks (nodes, or fixed-size groups), leader-based (S4) or
//! reduce-scatter based, blocking or nonblocking.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/detail/split.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! @brief The two schedules of hierarchical_allreduce.
enum class hierarchical_variant {
  //! S4 (Tencent Jizhi): reduce to each group's leader (MPI_Ireduce), ring allreduce among the
  //! leaders, broadcast inside each group (MPI_Ibcast). Only the leaders use the inter-group
  //! links, with the whole vector.
  leader,
  //! Reduce-scatter inside each group (MPI_Ireduce_scatter), ring allreduce of each shard among
  //! the ranks holding that shard index in every group, allgather inside each group
  //! (MPI_Iallgatherv), as Horovod's hierarchical allreduce and Sony's 2D scheme: every rank
  //! that holds a shard uses the inter-group links, with 1/shards of the vector.
  reduce_scatter,
};

//! @brief Options of hierarchical_allreduce. Every rank must pass the same options.
struct hierarchical_allreduce_options {
  //! Ranks per group. 0: one group per shared-memory node (MPI_Comm_split_type with
  //! MPI_COMM_TYPE_SHARED; its ranks in communicator order, the lowest one leading). g >= 1:
  //! groups of g consecutive ranks (rank r is in group r / g; the last group has P mod g ranks
  //! when g does not divide P), to emulate nodes on one machine.
  int group_size = 0;
  //! Schedule (see hierarchical_variant).
  hierarchical_variant variant = hierarchical_variant::leader;
  //! Check first that every rank passes the same length (one 16-byte allreduce; a mismatch
  //! makes every rank throw instead of hanging).
  bool check_lengths = true;
  //! Largest message of the inter-group ring allreduce, bytes (its segment_bytes; >= 4).
  std::size_t segment_bytes = std::size_t{1} << 18;
  //! Largest piece of the vector taken through the three stages at once, bytes (>= 4, capped at
  //! INT_MAX floats, since MPI counts are int): longer vectors are cut into pieces of this size
  //! (the last one shorter), which the stages pipeline (see `pipelined`). Not used when every
  //! group has one rank (group_size 1: a flat ring over the whole vector, as priced by
  //! cost::hierarchical_allreduce_seconds).
  std::size_t piece_bytes = std::size_t{1} << 18;
  //! true: up to three pieces in flight, one per stage: while the ring sums piece k, the group
  //! reduces piece k+1 and spreads piece k-1, so the intra-group stages hide behind the
  //! inter-group ring (or the other way round). false: each piece goes through all three stages
  //! before the next one starts (the library's earlier, unpipelined schedule, kept for
  //! comparison).
  bool pipelined = true;
  //! How waits complete (see wait_policy.hpp).
  wait_policy wait{};
};

//! @brief Hierarchical allreduce, sum of float vectors in place (S4's hierarchical
//! synchronisation): the P ranks are split into groups, the intra-group stages use MPI's
//! nonblocking collectives on a group communicator and the inter-group stage is a
//! gradcomp::mpi::ring_allreduce over fewer ranks, which cuts the ring's 2(P-1) alpha latency
//! term to 2(G-1) alpha for G groups.
//!
//! Leader variant, per piece: (1) MPI_Ireduce to local rank 0 of the group; (2) the leaders'
//! ring allreduce (G leaders); (3) MPI_Ibcast from the leader. Reduce-scatter variant, with
//! m_min = smallest_group_size(): (1) MPI_Ireduce_scatter of the piece in m_min near-equal
//! contiguous shards onto local ranks 0 .. m_min-1 (larger groups' extra ranks contribute but
//! hold no shard); (2) for each shard index j, ring allreduce of shard j among the G ranks with
//! local rank j; (3) MPI_Iallgatherv of the shards inside the group.
//! Groups of unequal size (P not divisible by the group size, or nodes with different rank
//! counts) thus work in both variants; in the reduce-scatter variant the extra ranks of larger
//! groups sit out the inter-group stage.
//!
//! Results are bit-identical on every rank: each element is reduced inside a group on one rank
//! (the leader, or the shard's holder), the ring makes its sums identical across groups, and
//! the last stage copies them. The intra-group summation order is the MPI library's choice, so
//! results can differ from a flat ring allreduce in the last bits (and between runs, should the
//! library's choice vary); integer-valued data sums exactly.
//!
//! Bytes per piece of M = 4 x length bytes, groups of m ranks, G groups: leader variant, a
//! leader moves 2 (G-1)/G M in the ring, plus what MPI's reduce and broadcast move inside the
//! group (the leader receives M in the reduce and every other member M in the broadcast:
//! cost::hierarchical_allreduce_seconds with hierarchical_variant::leader models this);
//! reduce-scatter variant, a shard holder moves 2 (G-1)/G M/m_min in its ring, plus MPI's
//! reduce-scatter and allgather inside the group (about (m-1)/m M each;
//! hierarchical_variant::reduce_scatter). Memory: up to three shards of scratch
//! (reduce-scatter) plus the ring's block.
//!
//! Pieces (options::piece_bytes, 256 KiB by default): the stages of one piece run one after
//! another, and with options::pipelined (the default) the pieces overlap, one per stage: the
//! ring sums piece k while the group reduces piece k+1 and spreads piece k-1. A long vector
//! then takes about the slowest stage's time per piece instead of the sum of the three
//! (cost::hierarchical_allreduce_seconds' piece_bytes). Each element's summation order depends
//! on its piece's length (MPI's algorithm for that count, the ring's blocks), not on pipelining:
//! the same piece_bytes gives the same result pipelined or not.
//!
//! Collective: every rank of the communicator must construct and destroy the object (it creates
//! and frees sub-communicators) and call start() (or operator()) with a vector of the same
//! length, in the same order relative to other collectives on the communicator. Operations use
//! the object's own sub-communicators, so they never match other traffic and need no tags. Any
//! rank count and length (0 included). Nonblocking use: start(), then test() until true, or
//! wait(); the vector must not be touched until then. One operation at a time per object.
//! @throws mpi_error on an MPI failure or when ranks pass different lengths (on every rank).
class hierarchical_allreduce : public detail::phased_operation<hierarchical_allreduce> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "hierarchical_allreduce";
  //! The options struct (hierarchical_allreduce_options).
  using options = hierarchical_allreduce_options;

  //! Collective over `comm`: splits it into the groups and the inter-group communicators
  //! (MPI_Comm_split / MPI_Comm_split_type, blocking, once) and gathers the group layout.
  //! @throws std::invalid_argument if group_size < 0, segment_bytes < 4 or piece_bytes < 4
  //! (before any communication, so on every rank alike); mpi_error if splitting fails.
  explicit hierarchical_allreduce(const communicator& comm, options o = {})
      : comm_(&comm), options_(o) {
    gradcomp::detail::require(o.group_size >= 0, "hierarchical_allreduce: group_size ",
                              o.group_size, " is negative");
    gradcomp::detail::require(o.segment_bytes >= sizeof(float),
                              "hierarchical_allreduce: segment_bytes ", o.segment_bytes,
                              " is below the minimum 4");
    gradcomp::detail::require(o.piece_bytes >= sizeof(float),
                              "hierarchical_allreduce: piece_bytes ", o.piece_bytes,
                              " is below the minimum 4");
    const int r = comm.rank();
    group_.emplace(o.group_size == 0 ? detail::split_by_node(comm)
                                     : std::move(*detail::split(comm, r / o.group_size, r)));
    // every rank's (local rank, group size): the group count and the smallest group
    const std::array<int, 2> mine = {group_->rank(), group_->size()};
    std::vector<int> layout(2 * static_cast<std::size_t>(comm.size()));
    MPI_Request request = MPI_REQUEST_NULL;
    detail::check(
        MPI_Iallgather(mine.data(), 2, MPI_INT, layout.data(), 2, MPI_INT, comm.native(), &request),
        "MPI_Iallgather");
    mpi::wait(request, o.wait);
    groups_ = 0;
    min_group_ = INT_MAX;
    for (std::size_t j = 0; j < layout.size(); j += 2) {
      groups_ += layout[j] == 0 ? 1 : 0;
      min_group_ = std::min(min_group_, layout[j + 1]);
    }
    const bool leader = o.variant == hierarchical_variant::leader;
    const int local = group_->rank();
    const bool member = leader ? local == 0 : local < min_group_;
    inter_ = detail::split(comm, member ? (leader ? 0 : local) : MPI_UNDEFINED, r);
    if (inter_ && inter_->size() > 1) {
      ring_.emplace(*inter_, ring_allreduce_options{.segment_bytes = o.segment_bytes,
                                                    .check_lengths = false,
                                                    .wait = o.wait});
    }
  }
  hierarchical_allreduce(const hierarchical_allreduce&) = delete;
  hierarchical_allreduce& operator=(const hierarchical_allreduce&) = delete;
  ~hierarchical_allreduce() { reset(); }

  //! Starts summing `data` (n floats, host memory) across all ranks, in place.
  void start(std::span<float> data) {
    const auto starting = begin_operation();
    data_ = data;
    // every group of one rank: a flat ring, nothing to pipeline, so the vector is one piece
    const bool flat = groups_ == comm_->size();
    piece_length_ = std::min<std::size_t>(
        flat ? SIZE_MAX : std::max<std::size_t>(options_.piece_bytes / sizeof(float), 1), INT_MAX);
    pieces_ = comm_->size() == 1 ? 0 : (data.size() + piece_length_ - 1) / piece_length_;
    next_reduce_ = next_inter_ = next_spread_ = oldest_ = peak_in_flight_ = 0;
    inter_running_ = false;
    agree_lengths(*comm_, data.size(), options_.check_lengths, &hierarchical_allreduce::run,
                  detail::length_agreement::description);
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

  //! Number of groups G.
  [[nodiscard]] int group_count() const noexcept { return groups_; }
  //! Size of this rank's group.
  [[nodiscard]] int group_size() const noexcept { return group_->size(); }
  //! This rank's rank inside its group (0 leads it).
  [[nodiscard]] int group_rank() const noexcept { return group_->rank(); }
  //! Size of the smallest group: the number of shards of the reduce-scatter variant.
  [[nodiscard]] int smallest_group_size() const noexcept { return min_group_; }
  //! Whether this rank takes part in the inter-group stage (a leader, or a shard holder).
  [[nodiscard]] bool in_inter_group_stage() const noexcept { return inter_.has_value(); }
  //! The vector's piece count in the current (or last) operation; 0 before the first and for
  //! P = 1.
  [[nodiscard]] std::size_t piece_count() const noexcept { return pieces_; }
  //! The most pieces this rank had in flight at once (started, not yet spread) in the current
  //! (or last) operation: at most 3 when pipelined (2 as soon as there are 2 pieces: the first
  //! two reduces are posted together), 1 when not. Diagnostics.
  [[nodiscard]] std::size_t peak_pieces_in_flight() const noexcept { return peak_in_flight_; }

private:
  // Pieces in flight at most: one in each stage (spread of k-1, ring of k, reduce of k+1).
  static constexpr std::size_t window = 3;

  // One piece's intra-group state, in slot k % window while piece k is in flight.
  struct piece_slot {
    MPI_Request reduce = MPI_REQUEST_NULL;  // stage 1: MPI_Ireduce or MPI_Ireduce_scatter
    MPI_Request spread = MPI_REQUEST_NULL;  // stage 3: MPI_Ibcast or MPI_Iallgatherv
    bool reduced = false;                   // stage 1 completed on this rank
    std::span<float> shard;                 // what the ring sums: the piece, or this rank's shard
    std::vector<int> counts, displacements; // reduce_scatter: the shards (alive until stage 3 ends)
    std::vector<float> scratch;             // reduce_scatter: this rank's reduced shard
  };

  [[nodiscard]] bool leader_variant() const noexcept {
    return options_.variant == hierarchical_variant::leader;
  }
  [[nodiscard]] piece_slot& slot(std::size_t k) noexcept { return slots_[k % window]; }
  [[nodiscard]] std::span<float> piece(std::size_t k) const noexcept {
    const std::size_t begin = k * piece_length_;
    return data_.subspan(begin, std::min(piece_length_, data_.size() - begin));
  }

  // The pieces' stages (advance()); the phase is done once every piece is. Dropped mid-way (an
  // exception, or destruction): first the inter-group ring, whose messages may read or fill a
  // slot's scratch or the caller's vector (its abandon(): sends completed, receives cancelled).
  // Then the intra-group stages of up to `window` pieces (MPI_Ireduce, MPI_Ireduce_scatter,
  // MPI_Ibcast or MPI_Iallgatherv on the group communicator), collectives, which MPI does not
  // allow to be freed or cancelled: each is waited for (detail::abandon), and completes once
  // every rank of its communicator has posted it, as each does while it runs the operation.
  // Ranks can be up to `window` pieces apart, so a rank that drops the operation while others
  // run on waits until they have posted the stages it posted; ranks that drop it at different
  // points can wait forever (detail::abandon).
  void run() {
    phase& pieces =
        poll(&hierarchical_allreduce::pieces_done).describe(&hierarchical_allreduce::stages);
    if (ring_) {
      pieces.pending(*ring_);
    }
    for (piece_slot& s : slots_) {
      pieces.collectives(s.reduce, s.spread);
    }
  }

  bool pieces_done() {
    while (advance()) {
    }
    return oldest_ >= pieces_;
  }

  // For timeout messages: the pieces done and the stages this rank waits in.
  [[nodiscard]] std::string stages() const {
    const bool leader = leader_variant();
    std::string s = gradcomp::detail::concat(oldest_, " of ", pieces_, " pieces done");
    std::size_t reducing = 0;
    for (std::size_t k = next_inter_; k < next_reduce_; ++k) {
      reducing += slots_[k % window].reduced ? 0 : 1;
    }
    if (reducing > 0) {
      s += gradcomp::detail::concat("; ", leader ? "MPI_Ireduce" : "MPI_Ireduce_scatter",
                                    " in the group pending for ", reducing, " piece(s) from piece ",
                                    next_inter_ + 1);
    }
    if (inter_running_) {
      const std::string ring = ring_->pending_description();
      s += gradcomp::detail::concat("; the ring between groups on piece ", next_inter_ + 1,
                                    ring.empty() ? "" : " (" + ring + "; ranks of the ring)");
    }
    if (oldest_ < next_spread_) {
      s += gradcomp::detail::concat("; ", leader ? "MPI_Ibcast" : "MPI_Iallgatherv",
                                    " in the group pending for pieces ", oldest_ + 1, "..",
                                    next_spread_);
    }
    return s;
  }

  // One step of the schedule; false when nothing can move until a request completes. The
  // group-communicator operations are posted in the same order on every rank, fixed by the piece
  // count alone (R0, R1, B0, R2, B1, ..., R = stage 1, B = stage 3; R0, B0, R1, B1, ... when not
  // pipelined), as MPI requires of collectives; each waits for its own preconditions on this rank.
  bool advance() {
    // stage 1 completions, in piece order
    for (std::size_t k = next_inter_; k < next_reduce_; ++k) {
      piece_slot& s = slot(k);
      if (!s.reduced && detail::complete(s.reduce)) {
        s.reduced = true;
        return true;
      }
    }
    // stage 2: one piece at a time through the ring (members); the others pass it through
    if (inter_running_) {
      if (!ring_->test()) {
        return post_next();
      }
      inter_running_ = false;
      ++next_inter_;
      return true;
    }
    if (next_inter_ < next_reduce_ && slot(next_inter_).reduced) {
      if (ring_) {             // only members of the inter-group communicator have a ring
        inter_running_ = true; // before start(): reset() must drop whatever it posted
        ring_->start(slot(next_inter_).shard);
      } else {
        ++next_inter_;
      }
      return true;
    }
    return post_next();
  }

  // Posts the next group operation in the fixed order if its preconditions hold on this rank,
  // else retires the oldest piece if its stage 3 completed; false if neither happened.
  bool post_next() {
    const std::size_t depth = options_.pipelined ? window : 1;
    const std::size_t lead = options_.pipelined ? 1 : 0; // R(k + lead) is posted before B(k)
    if (next_reduce_ < pieces_ && next_reduce_ <= next_spread_ + lead) {
      if (next_reduce_ < oldest_ + depth) { // its slot is free
        start_reduce(next_reduce_++);
        peak_in_flight_ = std::max(peak_in_flight_, next_reduce_ - oldest_);
        return true;
      }
    } else if (next_spread_ < next_inter_) {
      start_spread(next_spread_++);
      return true;
    }
    if (oldest_ < next_spread_ && detail::complete(slot(oldest_).spread)) {
      ++oldest_;
      return true;
    }
    return false;
  }

  // Stage 1 of piece k: reduce to the leader, or reduce-scatter onto the shard holders.
  void start_reduce(std::size_t k) {
    piece_slot& s = slot(k);
    const std::span<float> p = piece(k);
    const auto length = static_cast<int>(p.size());
    s.reduced = false;
    s.shard = p;
    if (group_->size() == 1) {
      s.reduced = true;
      return;
    }
    const MPI_Comm group = group_->native();
    if (leader_variant()) {
      const bool root = group_->rank() == 0;
      detail::check(MPI_Ireduce(root ? MPI_IN_PLACE : p.data(), root ? p.data() : nullptr, length,
                                MPI_FLOAT, MPI_SUM, 0, group, &s.reduce),
                    "MPI_Ireduce");
      return;
    }
    const auto shards = static_cast<std::size_t>(min_group_);
    const auto members = static_cast<std::size_t>(group_->size());
    s.counts.resize(members);
    s.displacements.resize(members);
    for (std::size_t j = 0; j < members; ++j) {
      const std::size_t begin = std::min(j, shards) * p.size() / shards;
      const std::size_t end = std::min(j + 1, shards) * p.size() / shards;
      s.counts[j] = static_cast<int>(end - begin);
      s.displacements[j] = static_cast<int>(begin);
    }
    const auto own = static_cast<std::size_t>(s.counts[static_cast<std::size_t>(group_->rank())]);
    s.scratch.resize(std::max<std::size_t>({s.scratch.size(), own, 1}));
    s.shard = std::span<float>(s.scratch.data(), own);
    detail::check(MPI_Ireduce_scatter(p.data(), s.scratch.data(), s.counts.data(), MPI_FLOAT,
                                      MPI_SUM, group, &s.reduce),
                  "MPI_Ireduce_scatter");
  }

  // Stage 3 of piece k: broadcast from the leader, or allgather of the shards.
  void start_spread(std::size_t k) {
    if (group_->size() == 1) {
      return; // nothing to spread; the slot's request stays null, so complete
    }
    piece_slot& s = slot(k);
    const std::span<float> p = piece(k);
    const MPI_Comm group = group_->native();
    if (leader_variant()) {
      detail::check(
          MPI_Ibcast(p.data(), static_cast<int>(p.size()), MPI_FLOAT, 0, group, &s.spread),
          "MPI_Ibcast");
    } else {
      detail::check(MPI_Iallgatherv(s.scratch.data(), static_cast<int>(s.shard.size()), MPI_FLOAT,
                                    p.data(), s.counts.data(), s.displacements.data(), MPI_FLOAT,
                                    group, &s.spread),
                    "MPI_Iallgatherv");
    }
  }

  const communicator* comm_;
  options options_;
  std::optional<communicator> group_;
  std::optional<communicator> inter_;
  int groups_ = 1;
  int min_group_ = 1;
  std::span<float> data_;
  std::size_t piece_length_ = 1, pieces_ = 0;
  // pieces [0, next_reduce_) entered stage 1, [0, next_inter_) left stage 2, [0, next_spread_)
  // entered stage 3, [0, oldest_) are done; oldest_ <= next_spread_ <= next_inter_ <= next_reduce_
  std::size_t next_reduce_ = 0, next_inter_ = 0, next_spread_ = 0, oldest_ = 0;
  std::size_t peak_in_flight_ = 0; // peak_pieces_in_flight()
  bool inter_running_ = false;
  std::array<piece_slot, window> slots_;
  // after slots_: destroyed first, while the scratch its messages may use still exists
  std::optional<ring_allreduce> ring_;
};

} // namespace gradcomp::mpi
