// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Alpha-beta-gamma cost models of the collectives gradcomp's transports use (no MPI
//! needed). Every function returns seconds for one operation on P ranks.
#pragma once

#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace gradcomp::cost {

//! @brief Network and reduction parameters of the alpha-beta-gamma model.
struct network {
  double alpha_seconds = 0.0;          //!< latency per message.
  double beta_seconds_per_byte = 0.0;  //!< inverse bandwidth.
  double gamma_seconds_per_byte = 0.0; //!< reduction (sum) cost per byte.

  //! A network of `bandwidth_bits_per_second` and `latency_seconds`, no reduction cost.
  [[nodiscard]] static network from_link(double bandwidth_bits_per_second, double latency_seconds) {
    detail::require(bandwidth_bits_per_second > 0, "bandwidth ", bandwidth_bits_per_second,
                    " bit/s is not positive");
    detail::require(latency_seconds >= 0, "latency ", latency_seconds, " s is negative");
    return {latency_seconds, 8.0 / bandwidth_bits_per_second, 0.0};
  }
};

namespace detail {
inline void check_ranks(int ranks) {
  gradcomp::detail::require(ranks >= 1, "rank count ", ranks, " is below 1");
}
} // namespace detail

//! @brief ceil(log2 P): the levels of a binomial tree, or the rounds of recursive doubling, over
//! P ranks; 0 for P <= 1. O(log P).
[[nodiscard]] constexpr int tree_levels(int ranks) noexcept {
  int levels = 0;
  for (long long d = 1; d < ranks; d *= 2) {
    ++levels;
  }
  return levels;
}

//! @brief Ring allreduce of `bytes` (S4, after Thakur et al.):
//! t = 2(P-1) alpha + (2(P-1) beta + (P-1) gamma) M / P. Zero for P = 1.
//! @throws std::invalid_argument if ranks < 1.
[[nodiscard]] inline double ring_allreduce_seconds(double bytes, int ranks, const network& net) {
  detail::check_ranks(ranks);
  const double p = ranks;
  return 2.0 * (p - 1) * net.alpha_seconds +
         (2.0 * (p - 1) * net.beta_seconds_per_byte + (p - 1) * net.gamma_seconds_per_byte) *
             bytes / p;
}

//! @brief Ring allgather where every rank contributes `bytes_per_rank` (TopkA's exchange):
//! t = (P-1) alpha + (P-1) beta M_rank. (Variable sizes: use the largest contribution for the
//! per-step time of a ring, or the sum of the others' for the received volume.)
[[nodiscard]] inline double
allgather_seconds(double bytes_per_rank, int ranks, const network& net) {
  detail::check_ranks(ranks);
  const double p = ranks;
  return (p - 1) * (net.alpha_seconds + net.beta_seconds_per_byte * bytes_per_rank);
}

//! @brief Ring (or pairwise) reduce-scatter of a buffer of B = `bytes` summed over P ranks, each
//! rank keeping B / P: t = (P-1) (alpha + (beta + gamma) B / P). Zero for P = 1.
//! @throws std::invalid_argument if ranks < 1.
[[nodiscard]] inline double reduce_scatter_seconds(double bytes, int ranks, const network& net) {
  detail::check_ranks(ranks);
  const double p = ranks;
  return (p - 1) *
         (net.alpha_seconds + (net.beta_seconds_per_byte + net.gamma_seconds_per_byte) * bytes / p);
}

//! @brief Pairwise all-to-all where a rank sends at most B = `bytes_per_peer` to each of the
//! P - 1 others (and receives as much): t = (P-1) (alpha + beta B). Zero for P = 1.
//! @throws std::invalid_argument if ranks < 1.
[[nodiscard]] inline double
all_to_all_seconds(double bytes_per_peer, int ranks, const network& net) {
  detail::check_ranks(ranks);
  const double p = ranks;
  return (p - 1) * (net.alpha_seconds + net.beta_seconds_per_byte * bytes_per_peer);
}

//! @brief Bytes per rank of gradcomp::mpi::sparse_allgather's header round: four 64-bit fields
//! (encoded bytes, dense length, nnz, the fingerprint of the settings every rank must share).
inline constexpr double sparse_allgather_header_bytes = 32.0;

//! @brief Sparse allgather of k (index, value) pairs per rank at `bytes_per_pair` each, plus the
//! header round (one more allgather of sparse_allgather_header_bytes): the reference top-k
//! exchange, as gradcomp::mpi::sparse_allgather runs it.
[[nodiscard]] inline double
sparse_allgather_seconds(double k, double bytes_per_pair, int ranks, const network& net) {
  return allgather_seconds(sparse_allgather_header_bytes, ranks, net) +
         allgather_seconds(k * bytes_per_pair, ranks, net);
}

//! @brief Where the servers of a parameter server run (mirrors gradcomp::mpi::server_placement,
//! which this MPI-free header cannot include).
enum class server_placement {
  //! Every one of the W ranks is a worker and S of them also serve (P = W, 1 <= S <= W).
  colocated,
  //! S extra ranks only serve; the W workers are the others (P = W + S).
  dedicated,
};

//! @brief Parameter server (S1: the server applies eq. 1's average (1/W) sum_n C(g_n)) with W
//! workers and S servers, keys sharded evenly, every worker pushing `push_bytes` and every rank
//! pulling `pull_bytes` (the averaged shards), modelled on the busiest link of
//! gradcomp::mpi::parameter_server exactly as that transport moves bytes. P = W (co-located) or
//! W + S (dedicated) ranks; one round is three phases, one after the other:
//! 1. header exchange: one MPI_Ialltoall of 64 bytes (eight int64 fields) per rank pair,
//!    (P - 1) alpha, then the servers' verdict on the stated push sizes, one 8-byte
//!    MPI_Iallreduce, ceil(log2 P) alpha (recursive doubling; this step postdates the recorded
//!    runs of docs/transport-benchmarks.md, whose model columns leave it out);
//! 2. push: each server receives U parts of push_bytes / S, with U = W - 1 co-located (the
//!    server's own part stays local) or U = max(W, S) dedicated (W pushes in, or, when S > W,
//!    a worker's S parts out). Links are full duplex, so the busiest link's time is that of the
//!    larger direction: a co-located server's own S - 1 outgoing parts (and a plain worker's S)
//!    never exceed U. Time U (alpha + beta push_bytes / S);
//! 3. pull: each server sends a 16-byte status (two int64: the rejected worker, the sparse
//!    pull's size) and its averaged shard of pull_bytes / S to each of the other P - 1 ranks
//!    (co-located: W - 1, dedicated: W + S - 1 pulls out); the S - 1 (or S) shards a rank
//!    receives never exceed that. Time (P - 1) (2 alpha + beta pull_bytes / S);
//! plus the reduction, W gamma push_bytes / S (a server decodes and sums all W parts).
//!
//!   t = (P - 1 + ceil(log2 P)) alpha + U (alpha + beta push / S)
//!       + (P - 1) (2 alpha + beta pull / S) + W gamma push / S.
//!
//! The push and pull phases add up, although the links are full duplex, because a server posts
//! its pulls only once all W parts of its shard are in and summed (the round's data dependency;
//! on 2-4 emulated hosts with S = 1 the measured times at 64 MiB are 0.84-0.94x of this sum and
//! 1.7-1.8x of max(push, pull), docs/transport-benchmarks.md). With S = P co-located servers the
//! beta term is 2 (P - 1) / P M beta for push = pull = M, the ring allreduce's; with S = 1 it is
//! 2 (W - 1) M beta (the usual W n / S each way per server, less the co-located server's own
//! part; docs/transport-benchmarks.md, "Cost model: measured / predicted for messages >= 1 MiB").
//! Not modelled: the 32-byte header of each encoded part, the alltoall's and statuses' bytes,
//! messages split at max_message_bytes (1 GiB by default). O(1).
//! @param push_bytes encoded push of one worker (dense: 4 n at fp32), bytes, >= 0.
//! @param pull_bytes the pulled average (4 n), bytes, >= 0.
//! @param workers W >= 1. @param servers S >= 1 (co-located: S <= W).
//! @param net the links' alpha, beta and the servers' gamma.
//! @param placement co-located (P = W) or dedicated (P = W + S) servers.
//! @throws std::invalid_argument if workers < 1, servers < 1, or S > W co-located.
[[nodiscard]] inline double
parameter_server_seconds(double push_bytes,
                         double pull_bytes,
                         int workers,
                         int servers,
                         const network& net,
                         server_placement placement = server_placement::colocated) {
  detail::check_ranks(workers);
  gradcomp::detail::require(servers >= 1, "server count ", servers, " is below 1");
  const bool colocated = placement == server_placement::colocated;
  gradcomp::detail::require(!colocated || servers <= workers, servers,
                            " co-located servers exceed the ", workers, " workers");
  const double w = workers;
  const double s = servers;
  const double others = colocated ? w - 1 : w + s - 1; // P - 1
  const double pushes = colocated ? w - 1 : std::max(w, s);
  const double verdict_rounds = std::ceil(std::log2(others + 1.0));
  return (others + verdict_rounds) * net.alpha_seconds +
         pushes * (net.alpha_seconds + net.beta_seconds_per_byte * push_bytes / s) +
         others * (2.0 * net.alpha_seconds + net.beta_seconds_per_byte * pull_bytes / s) +
         w * net.gamma_seconds_per_byte * push_bytes / s;
}

//! @brief The two schedules of a hierarchical allreduce (mirrors
//! gradcomp::mpi::hierarchical_variant).
enum class hierarchical_variant {
  //! S4: reduce to each group's leader, ring allreduce among the leaders, broadcast in the group.
  leader,
  //! Reduce-scatter in the group, one ring per shard across the groups, allgather in the group.
  reduce_scatter,
};

//! @brief Two-level allreduce of `bytes` = M over P ranks in groups of g consecutive ranks
//! (S4's hierarchical synchronisation), with separate intra-group and inter-group networks, as
//! gradcomp::mpi::hierarchical_allreduce runs it with group_size g. G = ceil(P / g) groups; the
//! three stages of a piece run one after the other (pieces overlap: `piece_bytes` below).
//!
//! Leader variant (S4; MPI_Ireduce, the leaders' ring, MPI_Ibcast), for g > 1:
//!   t = [(g-1) alpha + M beta + (g-1)/g M gamma]      reduce to the leader (intra)
//!     + ring_allreduce_seconds(M, G, inter)           ring among the G leaders
//!     + [(g-1) alpha + M beta]                        broadcast from the leader (intra).
//! The intra-group M beta terms are the bandwidth lower bounds of the two collectives whatever
//! their algorithm: the leader must receive M bytes of partial sums, and every other rank must
//! receive the M-byte result. A pipelined chain attains them, with (g-1) alpha of start-up;
//! for g = 2 every algorithm moves exactly M. (g-1)/g M gamma is the reduction work spread over
//! the group. For g > 2 MPI's algorithms can move more than the bound (MPICH's defaults for
//! small groups: a binomial Ibcast, log2(g) M through the root's link; a reduce-scatter + gather
//! Ireduce, 2 (g-1)/g M); this is not modelled.
//!
//! Reduce-scatter variant (MPI_Ireduce_scatter onto m shard holders, G rings of M / m, then
//! MPI_Iallgatherv), m = the smallest group's size (P mod g, or g when g divides P):
//!   t = [(g-1) alpha + (g-1)/m M (beta + gamma)]     a holder receives g-1 blocks of M / m
//!     + ring_allreduce_seconds(M / m, G, inter)      the G-rank rings, in parallel
//!     + [(g-1) alpha + A M beta]                     allgather, A = (g-1)/g when m = g; else 1
//!                                                    (a rank holding no shard receives all M).
//! With m = g the intra-group terms are the bandwidth-optimal (g-1)/g M each way. The m rings
//! run on separate links unless `group_shares_link`: when a group is one host (S4's layout:
//! ranks of a node, one network link), its m shard rings share that link, and the ring term is
//! priced with the inter beta x m (the host link carries all M, as the leader variant's ring).
//! Measured on the two-tier emulated cluster (2 hosts x 2 or 3 ranks, 1 Gbit/s,
//! docs/transport-benchmarks.md "Two-tier cluster"): 0.83-1.21x of the shared-link model from
//! 1 MiB up, 1.5-2.6x of the separate-link one.
//!
//! Pieces (`piece_bytes` > 0 and < M: gradcomp::mpi::hierarchical_allreduce cuts the vector into
//! n = ceil(M / piece_bytes) pieces and pipelines them, one per stage): with t1, t2, t3 the three
//! stages' times above for one piece of M / n bytes,
//!   t = t1 + t2 + t3 + (n-1) max(t1 + t3, t2),
//! a pipeline of two resources, the group's network (stage 1 of the next piece beside stage 3 of
//! the previous one: both are priced on it, one after the other) and the network between groups
//! (stage 2), priced as independent resources (with one network for both, as when a group's
//! ranks sit on different hosts, they share links and the overlap is optimistic). Each piece
//! pays the alpha terms again. `piece_bytes` = 0 (the default) or >= M:
//! one piece, the formula above. Measured on the two-tier emulated cluster with the transport's
//! 256 KiB pieces (three runs each of 2 x 2 and 2 x 3, 1-64 MiB): the leader variant
//! at 0.85-1.07x of this model, the reduce-scatter variant at 0.83-1.01x of the shared-link one;
//! with one piece the leader variant on 2 x 3 was up to 1.78x of it (MPI's intra-group stages
//! for 3 ranks move more than the bound priced here).
//!
//! g = 1 is a flat ring over P ranks in both variants; g >= P one group (G = 1, no ring).
//! Measured with g = 2 and one rank per emulated host (docs/transport-benchmarks.md), 4 and
//! 64 MiB: leader 0.82-1.18x of this model on 1 Gbit/s links (0.58-0.83x at 10 Gbit/s, where
//! the calibrated alpha dominates at 4 MiB); reduce-scatter 0.82-1.14x on 2 hosts at 1 Gbit/s,
//! but 1.4x on 4 hosts, which no volume explains (the schedule's bytes are as modelled). O(1).
//! @param bytes M >= 0. @param ranks P >= 1. @param group g, 1 <= g <= P.
//! @param intra the network inside a group (alpha, beta, gamma of the intra-group stages).
//! @param inter the network between groups (the ring among leaders or shard holders).
//! @param variant the schedule: leader (S4, the default) or reduce_scatter.
//! @param group_shares_link reduce_scatter: a group's ranks share one inter-group link (a
//! group is one host); false (default): every rank has its own.
//! @param piece_bytes the transport's pieces, pipelined (see above); 0 (default): one piece.
//! @throws std::invalid_argument if ranks < 1, group is outside [1, ranks] or piece_bytes is
//! negative or not finite.
[[nodiscard]] inline double
hierarchical_allreduce_seconds(double bytes,
                               int ranks,
                               int group,
                               const network& intra,
                               const network& inter,
                               hierarchical_variant variant = hierarchical_variant::leader,
                               bool group_shares_link = false,
                               double piece_bytes = 0.0) {
  detail::check_ranks(ranks);
  gradcomp::detail::require(group >= 1 && group <= ranks, "group size ", group, " is outside [1, ",
                            ranks, "]");
  gradcomp::detail::require(std::isfinite(piece_bytes) && piece_bytes >= 0.0, "piece size ",
                            piece_bytes, " bytes is negative or not finite");
  if (group == 1) {
    return ring_allreduce_seconds(bytes, ranks, inter);
  }
  const double pieces =
      piece_bytes > 0.0 && piece_bytes < bytes ? std::ceil(bytes / piece_bytes) : 1.0;
  const double piece = bytes / pieces;
  const double g = group;
  const int groups = (ranks + group - 1) / group;
  double gather = 0.0, across = 0.0, spread = 0.0; // stages 1, 2, 3 of one piece
  if (variant == hierarchical_variant::leader) {
    gather = (g - 1) * intra.alpha_seconds + piece * intra.beta_seconds_per_byte +
             (g - 1) / g * piece * intra.gamma_seconds_per_byte;
    across = ring_allreduce_seconds(piece, groups, inter);
    spread = (g - 1) * intra.alpha_seconds + piece * intra.beta_seconds_per_byte;
  } else {
    const int smallest = ranks % group == 0 ? group : ranks % group;
    const double m = smallest;
    gather = (g - 1) * intra.alpha_seconds +
             (g - 1) / m * piece * (intra.beta_seconds_per_byte + intra.gamma_seconds_per_byte);
    const double allgather_share = smallest == group ? (g - 1) / g : 1.0;
    spread = (g - 1) * intra.alpha_seconds + allgather_share * piece * intra.beta_seconds_per_byte;
    network ring_net = inter;
    if (group_shares_link) { // the m shard rings of a host share its link
      ring_net.beta_seconds_per_byte *= m;
    }
    across = ring_allreduce_seconds(piece / m, groups, ring_net);
  }
  return gather + across + spread + (pieces - 1.0) * std::max(gather + spread, across);
}

} // namespace gradcomp::cost
