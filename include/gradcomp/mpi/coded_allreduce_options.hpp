// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The options of gradcomp::mpi::coded_allreduce (mpi/coded_exchange.hpp): packet
//! arithmetic, transfer order, what each rank recovers, the uncoded baseline, tags, requests in
//! flight and the wait policy; also used by coded_sparse_allreduce and the pipeline's coded
//! exchanges.
#pragma once

#include <gradcomp/coded/cost.hpp>
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <cstddef>

namespace gradcomp::mpi {

//! @brief How coded_allreduce codes its packets (docs/coded.md, "Exact coding": float sums do
//! not decode exactly, so both choices are exact).
enum class packet_coding {
  //! int32 fixed point with a scale agreed by an allreduce-MAX (coded::fixed_point_scale with
  //! C(P, r) summed terms; S3's quantisation, with the agreed maximum instead of CSSGD's fixed
  //! [-10, 10]). Packets are wrapping int32 sums; the result is the decoded exact integer sum of
  //! all parts' codes, so it carries the quantisation error (at most C(P, r) 0.5 / scale per
  //! element, docs/coded.md "Exact coding") but no rounding that depends on order. Needs finite
  //! gradients.
  fixed_point,
  //! XOR of the float bit patterns (Coded TeraSort's coding, docs/references.md [CTS]): pure
  //! delivery of the exact floats, NaN and infinities included; the parts are then summed as floats
  //! in part-index order.
  xor_bits,
};

//! @brief The order in which coded_allreduce moves its packets.
enum class coded_schedule {
  //! Every group at once: all sends and receives of this rank's groups are posted together, in
  //! a sliding window of at most `max_requests` outstanding requests (MPICH bounds the number of
  //! outstanding requests). The fastest schedule on a switched full-duplex network.
  concurrent,
  //! One sender at a time per group (the measurement setup of the coded-shuffle papers, Coded
  //! TeraSort's turns: docs/coded.md, "Network caveat"): groups in ascending index, and in each
  //! group the members in rank order multicast their packet while the others receive it; a
  //! member starts its turn only after its previous turn completed. Groups without common
  //! members proceed at the same time (there is no global barrier).
  serialized,
};

//! @brief What each rank of coded_allreduce recovers (coded::exchange_variant, shared with the cost
//! model): `full_recovery`, S3's exchange, every rank recovers the whole gradient of every part it
//! lacks; `reduce_scatter`, variant R (docs/coded.md, "Variants F and R"), every rank recovers only
//! its block of the coordinates of each missing part, then a ring allgather. Both give the same
//! result, bit for bit (see coded_allreduce).
using coded_variant = coded::exchange_variant;

//! @brief Options of coded_allreduce. Every rank must pass the same options; start() checks
//! this (every rank throws mpi_error on a difference).
struct coded_allreduce_options {
  //! r: how many ranks compute each part of the batch (S3's redundancy), 1 <= r < P. Each rank
  //! computes C(P - 1, r - 1) parts (r times the work of plain data parallelism) and sends
  //! r C(P - 1, r) packets of ceil(d / r) elements. r = 1 is plain data parallelism exchanged as
  //! an all-to-all of whole gradients.
  int redundancy = 1;
  //! Packet arithmetic (see packet_coding).
  packet_coding coding = packet_coding::fixed_point;
  //! Order of the transfers (see coded_schedule).
  coded_schedule schedule = coded_schedule::concurrent;
  //! What each rank recovers (see coded_variant and coded_allreduce): full_recovery (S3's
  //! exchange, the default) or reduce_scatter (one block of d / P coordinates per rank and
  //! packets of ceil(ceil(d / P) / r) elements, then a ring allgather of the blocks).
  coded_variant variant = coded_variant::full_recovery;
  //! The uncoded baseline of the same placement (S3's comparison; docs/coded.md, "Load formulas",
  //! uncoded): instead of one coded packet per group sent to each of its r receivers, each sender
  //! unicasts to each receiver j only the slice j needs (the term of j in the packet), straight
  //! from its codes, and receivers cancel nothing. Same messages, bytes, schedules, variants,
  //! codings and result (bit for bit) as the coded exchange over point-to-point delivery
  //! (coded::uncoded_exchange_load); no packet is built or decoded. False: coded.
  bool uncoded = false;
  //! First message tag. A packet of multicast group g (placement index) carries tag
  //! tag_base + g % tag_range, so the operation uses the tags tag_base ..
  //! tag_base + min(tag_range, C(P, r + 1)) - 1; operations in flight at the same time on one
  //! communicator need disjoint tag ranges. Where the range wraps (groups sharing a tag), the
  //! packets still match correctly: both sides of every pair of ranks post their messages in
  //! ascending group order, and MPI matches same-tag messages between two ranks in order
  //! (non-overtaking). The ring allgather of the reduce-scatter form reuses tag tag_base: a
  //! rank posts it only after all its own packets completed, and non-overtaking keeps it after
  //! the packets its left neighbour sent it. >= 0.
  int tag_base = 0;
  //! Number of distinct tags, >= 1 (see tag_base); the last tag must not exceed MPI_TAG_UB.
  int tag_range = 1024;
  //! Most point-to-point requests this rank has outstanding at once, in [2, 64]. The default 32
  //! stays well below what MPICH (ch4:ucx, as installed here) tolerates, about 64. A group whose
  //! 2 r transfers exceed it is cut into steps (r > 16 for the default).
  std::size_t max_requests = 32;
  //! How waits complete (see wait_policy.hpp): every completion, the agreement included.
  wait_policy wait{};
};

} // namespace gradcomp::mpi
