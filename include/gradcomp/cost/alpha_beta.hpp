// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Alpha-beta-gamma cost models of the collectives gradcomp's transports use (no MPI
//! needed). Every function returns seconds for one operation on P ranks.
#pragma once

#include <gradcomp/error.hpp>

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

//! @brief Sparse allgather of k (index, value) pairs per rank at `bytes_per_pair` each, plus the
//! count exchange (one more allgather of 24 bytes): the reference top-k exchange.
[[nodiscard]] inline double
sparse_allgather_seconds(double k, double bytes_per_pair, int ranks, const network& net) {
  return allgather_seconds(24.0, ranks, net) + allgather_seconds(k * bytes_per_pair, ranks, net);
}

//! @brief Parameter server (S1) with S servers and W workers, each pushing `push_bytes` and
//! pulling `pull_bytes`, keys sharded evenly: each server receives W pushes of push_bytes / S
//! and sends W pulls of pull_bytes / S over its one link, so the round takes
//! 2 alpha W + W beta (push_bytes + pull_bytes) / S + W gamma push_bytes / S.
//! This is the busiest server link of gradcomp::mpi::parameter_server up to small terms: there
//! a co-located server keeps its own push and pull local (W - 1 of each cross the link), a
//! dedicated server also sends its shard to the other S - 1 servers (every rank ends with the
//! average: W + S - 1 pulls), and each round adds one MPI_Ialltoall of 56 bytes per rank pair
//! (argument check and push sizes) and an 8-byte status per pull.
[[nodiscard]] inline double parameter_server_seconds(
    double push_bytes, double pull_bytes, int workers, int servers, const network& net) {
  detail::check_ranks(workers);
  gradcomp::detail::require(servers >= 1, "server count ", servers, " is below 1");
  const double w = workers;
  const double s = servers;
  return 2.0 * w * net.alpha_seconds +
         w * net.beta_seconds_per_byte * (push_bytes + pull_bytes) / s +
         w * net.gamma_seconds_per_byte * push_bytes / s;
}

//! @brief Leader-based hierarchical allreduce (S4): reduce to the leader inside each group of G
//! (a ring reduce: (G-1) alpha + (G-1)/G M (beta + gamma)), ring allreduce among the ceil(P/G)
//! leaders, broadcast inside the group ((G-1) alpha + (G-1)/G M beta, pipelined), with
//! separate intra-group and inter-group networks.
//! The intra-group terms are the bandwidth-optimal bounds; gradcomp::mpi::hierarchical_allreduce
//! (leader variant) runs MPI_Ireduce and MPI_Ibcast there, whose algorithms are the MPI
//! library's and can move up to about twice that volume. For its reduce-scatter variant (same
//! intra-group volume, then G rings of ceil(P/G) ranks on shards of M/G bytes in parallel),
//! replace the middle term by ring_allreduce_seconds(bytes / group, ceil(P/G), inter).
[[nodiscard]] inline double hierarchical_allreduce_seconds(
    double bytes, int ranks, int group, const network& intra, const network& inter) {
  detail::check_ranks(ranks);
  gradcomp::detail::require(group >= 1 && group <= ranks, "group size ", group, " is outside [1, ",
                            ranks, "]");
  const double g = group;
  const int leaders = (ranks + group - 1) / group;
  const double intra_part = (g - 1) / g * bytes;
  const double reduce = (g - 1) * intra.alpha_seconds +
                        intra_part * (intra.beta_seconds_per_byte + intra.gamma_seconds_per_byte);
  const double broadcast = (g - 1) * intra.alpha_seconds + intra_part * intra.beta_seconds_per_byte;
  return reduce + ring_allreduce_seconds(bytes, leaders, inter) + broadcast;
}

} // namespace gradcomp::cost
