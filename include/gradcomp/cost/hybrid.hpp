// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Alpha-beta cost of one fully connected layer's communication per iteration, data
//! parallel (gradient allreduce) or model parallel (S2's collectives, as
//! gradcomp::mpi::column_parallel_linear runs them). No MPI needed.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/hybrid/fc_exchange.hpp>

#include <cmath>

namespace gradcomp::cost {

//! @brief Options of the FC-layer cost functions.
struct fc_cost_options {
  double bytes_per_value = 4.0; //!< wire bytes per value (4: fp32; 2: fp16 / bf16), > 0.
  //! Data parallel: the layer's gradient rides in an allreduce fused with other gradients, so it
  //! pays the bandwidth term only (S2: "fusable with all other gradients into one allreduce").
  bool fused = false;
  //! Model parallel: the exchange (gradcomp::fc_exchange).
  fc_exchange exchange = fc_exchange::all_to_all;
  //! Model parallel: each pass starts with the 96-byte argument agreement
  //! (column_parallel_linear_options::check_arguments), ceil(log2 P) alpha.
  bool argument_agreement = true;
  //! Model parallel: when >= 0, the measured seconds of one forward + backward pass of the
  //! smallest layer (mpi::calibrate_model_parallel_fixed_seconds), used in place of every alpha
  //! term of the model-parallel side (agreements and collectives): MPI's collectives for small
  //! messages use log-depth algorithms whose latency the ring's alpha x (P - 1) overprices.
  //! Negative (default): the alpha terms from the network.
  double model_parallel_fixed_seconds = -1.0;
};

namespace detail {
inline void
check_fc(double batch_m, double inputs_k, double outputs_n, int ranks, const fc_cost_options& o) {
  check_ranks(ranks);
  gradcomp::detail::require(batch_m >= 0 && inputs_k >= 1 && outputs_n >= 1,
                            "FC layer cost: batch ", batch_m, ", K ", inputs_k, ", N ", outputs_n,
                            " (need M >= 0, K >= 1, N >= 1)");
  gradcomp::detail::require(o.bytes_per_value > 0, "FC layer cost: bytes per value ",
                            o.bytes_per_value, " is not positive");
}
} // namespace detail

//! @brief Seconds per iteration to average one FC layer's weight and bias gradients (K N + N
//! values, S2) over P ranks with a ring allreduce (ring_allreduce_seconds); with `fused`, the
//! bandwidth and reduction terms only. Independent of the batch. O(1).
//! @throws std::invalid_argument if ranks < 1, K < 1, N < 1 or bytes_per_value <= 0.
[[nodiscard]] inline double fc_data_parallel_seconds(double inputs_k,
                                                     double outputs_n,
                                                     int ranks,
                                                     const network& net,
                                                     const fc_cost_options& o = {}) {
  detail::check_fc(0, inputs_k, outputs_n, ranks, o);
  const double bytes = (inputs_k * outputs_n + outputs_n) * o.bytes_per_value;
  const double full = ring_allreduce_seconds(bytes, ranks, net);
  return o.fused ? full - 2.0 * (ranks - 1) * net.alpha_seconds : full;
}

//! @brief Seconds per iteration (forward + backward) of one FC layer model parallel over P
//! ranks with local batch M, as gradcomp::mpi::column_parallel_linear communicates, on the
//! busiest rank (n_max = ceil(N / P) outputs), every collective ring or pairwise:
//!  - all_to_all:   allgather(M K) + 2 all_to_all(M n_max) + reduce_scatter(P M K)
//!  - s2_allgather: 2 allgather(M K) + allgather(P M n_max) + allgather(M N)
//!                  + reduce_scatter(P M K)
//! (sizes in values, times bytes_per_value), plus 2 ceil(log2 P) alpha for the two argument
//! agreements; with o.model_parallel_fixed_seconds >= 0, that measured fixed cost replaces all
//! of these alpha terms (the beta and gamma terms stay). The GEMMs are not included: both
//! schemes compute M K N multiply-adds per rank. Not modelled: the packing copies. O(1). Zero for
//! P = 1 (no collective runs).
//! @throws std::invalid_argument if ranks < 1, M < 0, K < 1, N < 1 or bytes_per_value <= 0.
[[nodiscard]] inline double fc_model_parallel_seconds(double batch_m,
                                                      double inputs_k,
                                                      double outputs_n,
                                                      int ranks,
                                                      const network& net,
                                                      const fc_cost_options& o = {}) {
  detail::check_fc(batch_m, inputs_k, outputs_n, ranks, o);
  if (ranks == 1) {
    return 0.0;
  }
  if (o.model_parallel_fixed_seconds >= 0.0) {
    network no_latency = net;
    no_latency.alpha_seconds = 0.0;
    fc_cost_options rest = o;
    rest.model_parallel_fixed_seconds = -1.0;
    rest.argument_agreement = false;
    return o.model_parallel_fixed_seconds +
           fc_model_parallel_seconds(batch_m, inputs_k, outputs_n, ranks, no_latency, rest);
  }
  const double p = ranks;
  const double b = o.bytes_per_value;
  const double n_max = std::ceil(outputs_n / p);
  const double agreement = // two 96-byte allreduces, recursive doubling
      o.argument_agreement ? 2.0 * std::ceil(std::log2(p)) * net.alpha_seconds : 0.0;
  const double common = allgather_seconds(batch_m * inputs_k * b, ranks, net) +
                        reduce_scatter_seconds(p * batch_m * inputs_k * b, ranks, net);
  if (o.exchange == fc_exchange::all_to_all) {
    return agreement + common + 2.0 * all_to_all_seconds(batch_m * n_max * b, ranks, net);
  }
  return agreement + common + allgather_seconds(batch_m * inputs_k * b, ranks, net) +
         allgather_seconds(p * batch_m * n_max * b, ranks, net) +
         allgather_seconds(batch_m * outputs_n * b, ranks, net);
}

} // namespace gradcomp::cost
