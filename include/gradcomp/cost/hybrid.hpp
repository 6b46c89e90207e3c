// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Alpha-beta cost of one fully connected layer's communication per iteration, data
//! parallel (gradient allreduce) or model parallel (S2's collectives, as
//! gradcomp::mpi::column_parallel_linear runs them). No MPI needed.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/fc_exchange.hpp>
#include <gradcomp/error.hpp>

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

//! @brief Seconds of one FC layer's model-parallel collectives in each pass (see
//! fc_model_parallel_passes).
struct fc_model_parallel_times {
  double forward_seconds = 0.0;  //!< the forward pass's agreement and collectives.
  double backward_seconds = 0.0; //!< the backward pass's agreement and collectives.
  //! forward_seconds + backward_seconds.
  [[nodiscard]] double total_seconds() const noexcept { return forward_seconds + backward_seconds; }
};

//! @brief Seconds per iteration of one FC layer's communication model parallel over P ranks with
//! local batch M, as gradcomp::mpi::column_parallel_linear communicates, on the busiest rank
//! (n_max = ceil(N / P) outputs), every collective ring or pairwise, split by pass:
//!  - all_to_all:   forward  allgather(M K) + all_to_all(M n_max),
//!                  backward all_to_all(M n_max) + reduce_scatter(P M K);
//!  - s2_allgather: forward  allgather(M K) + allgather(P M n_max),
//!                  backward allgather(M N) + allgather(M K) + reduce_scatter(P M K)
//! (sizes in values, times bytes_per_value), plus ceil(log2 P) alpha per pass for its argument
//! agreement; with o.model_parallel_fixed_seconds >= 0, that measured fixed cost (of a forward and
//! a backward pass together) replaces all of these alpha terms, half in each pass (the beta and
//! gamma terms stay). The GEMMs are not included: both schemes compute M K N multiply-adds per
//! rank. Not modelled: the packing copies. O(1). Zero for P = 1 (no collective runs).
//! @throws std::invalid_argument if ranks < 1, M < 0, K < 1, N < 1 or bytes_per_value <= 0.
[[nodiscard]] inline fc_model_parallel_times
fc_model_parallel_passes(double batch_m,
                         double inputs_k,
                         double outputs_n,
                         int ranks,
                         const network& net,
                         const fc_cost_options& o = {}) {
  detail::check_fc(batch_m, inputs_k, outputs_n, ranks, o);
  if (ranks == 1) {
    return {};
  }
  if (o.model_parallel_fixed_seconds >= 0.0) {
    network no_latency = net;
    no_latency.alpha_seconds = 0.0;
    fc_cost_options rest = o;
    rest.model_parallel_fixed_seconds = -1.0;
    rest.argument_agreement = false;
    fc_model_parallel_times t =
        fc_model_parallel_passes(batch_m, inputs_k, outputs_n, ranks, no_latency, rest);
    t.forward_seconds += 0.5 * o.model_parallel_fixed_seconds;
    t.backward_seconds += 0.5 * o.model_parallel_fixed_seconds;
    return t;
  }
  const double p = ranks;
  const double b = o.bytes_per_value;
  const double n_max = std::ceil(outputs_n / p);
  const double agreement = // one 96-byte allreduce per pass, recursive doubling
      o.argument_agreement ? std::ceil(std::log2(p)) * net.alpha_seconds : 0.0;
  const double gather_inputs = allgather_seconds(batch_m * inputs_k * b, ranks, net);
  const double reduce_inputs = reduce_scatter_seconds(p * batch_m * inputs_k * b, ranks, net);
  if (o.exchange == fc_exchange::all_to_all) {
    const double exchange = all_to_all_seconds(batch_m * n_max * b, ranks, net);
    return {agreement + gather_inputs + exchange, agreement + exchange + reduce_inputs};
  }
  return {agreement + gather_inputs + allgather_seconds(p * batch_m * n_max * b, ranks, net),
          agreement + allgather_seconds(batch_m * outputs_n * b, ranks, net) + gather_inputs +
              reduce_inputs};
}

//! @brief Seconds per iteration (forward + backward) of one FC layer model parallel:
//! fc_model_parallel_passes(...).total_seconds(). O(1). Zero for P = 1.
//! @throws std::invalid_argument as fc_model_parallel_passes.
[[nodiscard]] inline double fc_model_parallel_seconds(double batch_m,
                                                      double inputs_k,
                                                      double outputs_n,
                                                      int ranks,
                                                      const network& net,
                                                      const fc_cost_options& o = {}) {
  return fc_model_parallel_passes(batch_m, inputs_k, outputs_n, ranks, net, o).total_seconds();
}

} // namespace gradcomp::cost
