// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model of gTop-k (mpi::gtopk_allreduce): bytes of its busiest rank and alpha-beta
//! time, O(k log P) (Shi et al. 2019).
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>

namespace gradcomp::cost {

//! @brief Bytes gtopk_allreduce's busiest rank (rank 0, ceil(log2 P) children) sends when every
//! set has k elements: (8 + 4k) + (8 + 8k) per tree level; 0 for one rank. O(log P).
[[nodiscard]] inline double gtopk_bytes_sent(double k, int ranks) {
  return tree_levels(ranks) * ((8.0 + 4.0 * k) + (8.0 + 8.0 * k));
}

//! @brief Alpha-beta time of gtopk_allreduce with k elements per set: per tree level, the
//! selection step (2 messages: count, then 8k bytes of pairs, and the merge, gamma on 8k), the
//! broadcast of G (count + 4k), the sum step (4k, gamma on 4k) and the final broadcast (count +
//! 8k): ceil(log2 P) x (9 alpha + 24 k beta + 12 k gamma), each count, index array and value
//! array a message of its own. O(log P).
[[nodiscard]] inline double gtopk_allreduce_seconds(double k, int ranks, const network& net) {
  return tree_levels(ranks) * (9.0 * net.alpha_seconds + 24.0 * k * net.beta_seconds_per_byte +
                               12.0 * k * net.gamma_seconds_per_byte);
}

} // namespace gradcomp::cost
