// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model of Ok-Topk (mpi::oktopk_allreduce): bytes per rank and alpha-beta time,
//! about 2 (P-1)/P k pairs per rank (Li & Hoefler 2022).
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/sparse/wire.hpp>

namespace gradcomp::cost {

//! @brief Bytes one rank of oktopk_allreduce sends when the regions are balanced: each of its
//! k_local selected pairs falls k_local / P into every region, and its region holds k_global / P
//! of the global selection (every block non-empty). With 4-byte indices and values
//! (index_encoding::u32, bytes_per_pair = 8) and 32-byte wire headers:
//! 8 (P-1) + (P-1) (32 + 8 k_local / P) (reduce-scatter: sizes, blocks) + 16 (P-1) + (P-1) (32 +
//! 8 k_global / P) (allgather: sizes, blocks), plus 8 (P-1) L when the regions are repartitioned
//! and 4 x 1024 L when the threshold is evaluated (L = ceil(log2 P), the allreduces' payloads
//! times the rounds of recursive doubling; one round only, 1024 L, when fewer than k elements
//! were selected at all). Delta + varint indices: pass bytes_per_pair of
//! about 5.3 (density 0.01; the count is then an estimate). 0 for one rank. O(log P).
[[nodiscard]] inline double oktopk_bytes_sent(double k_local,
                                              double k_global,
                                              int ranks,
                                              double bytes_per_pair = 8.0,
                                              bool repartitioned = false,
                                              bool threshold_evaluated = false) {
  const double p = ranks;
  const int levels = tree_levels(ranks);
  const auto header = static_cast<double>(wire_header_bytes);
  const double reduce_scatter = 8.0 * (p - 1) + (p - 1) * (header + bytes_per_pair * k_local / p);
  const double allgather = 16.0 * (p - 1) + (p - 1) * (header + bytes_per_pair * k_global / p);
  return reduce_scatter + allgather + (repartitioned ? 8.0 * (p - 1) * levels : 0.0) +
         (threshold_evaluated ? 4.0 * 1024.0 * levels : 0.0);
}

//! @brief Alpha-beta time of oktopk_allreduce with k pairs of 8 bytes selected per rank and
//! globally, balanced regions, threshold reused: two rounds of sizes (the alltoall priced as P-1
//! messages, the allgather as ceil(log2 P)), the P-1 blocks of each phase posted at once, and
//! the reduction of the received pairs: alpha (3 (P-1) + L) + beta oktopk_bytes_sent(k, k, P) +
//! gamma 4 k (P-1)/P. 0 for one rank. O(log P).
[[nodiscard]] inline double oktopk_allreduce_seconds(double k, int ranks, const network& net) {
  if (ranks <= 1) {
    return 0.0;
  }
  const double p = ranks;
  return (3.0 * (p - 1) + tree_levels(ranks)) * net.alpha_seconds +
         oktopk_bytes_sent(k, k, ranks) * net.beta_seconds_per_byte +
         4.0 * k * (p - 1) / p * net.gamma_seconds_per_byte;
}

} // namespace gradcomp::cost
