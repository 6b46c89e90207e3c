// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Cost model of CSSGD's coded gradient exchange (S3; docs/coded.md, "Load formulas"):
//! per-rank messages and bytes of the coded exchange, of the uncoded exchange of the same
//! placement and of a ring allreduce without redundancy (gradcomp/coded/exchange_load.hpp,
//! included here); iteration time T(r) = r T_compute + T_comm(r) under the alpha-beta-gamma
//! model of gradcomp::cost; and the choice of r. No MPI needed.
//!
//! The exchange variants (exchange_variant) and the gradient of d elements of b wire bytes are
//! as gradcomp/coded/exchange_load.hpp describes them.
#pragma once

#include <gradcomp/coded/exchange_load.hpp>
#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace gradcomp::coded {

//! @brief Which side of a rank's link limits the exchange time.
enum class link_model {
  //! The rank's transmissions are the bottleneck and receptions overlap them freely (S3's
  //! accounting, "each worker sends 1/r of the necessary data"; CDC's shared-bus view).
  sender_bound,
  //! Full-duplex links to a switch, all ranks transferring at once: time follows the larger of
  //! what a rank sends and what it receives (docs/coded.md, "Network caveat": coding cuts
  //! transmissions, not what each rank receives).
  full_duplex,
};

//! @brief Seconds of an exchange with `load` under the alpha-beta-gamma model (gradcomp::cost,
//! as in S4's ring formula; the per-rank counts plus one alpha per message, docs/coded.md, "Load
//! formulas"):
//! - sender_bound: alpha sent_messages + beta sent_bytes + gamma reduced_bytes;
//! - full_duplex: alpha max(sent, received messages) + beta max(sent, received bytes)
//!   + gamma reduced_bytes.
//! Messages and bytes are serialised on the rank's link; O(1).
[[nodiscard]] inline double
exchange_seconds(const exchange_load& load, const cost::network& net, link_model link) noexcept {
  const bool duplex = link == link_model::full_duplex;
  const double messages = static_cast<double>(
      duplex ? std::max(load.sent_messages, load.received_messages) : load.sent_messages);
  const double bytes = duplex ? std::max(load.sent_bytes, load.received_bytes) : load.sent_bytes;
  return net.alpha_seconds * messages + net.beta_seconds_per_byte * bytes +
         net.gamma_seconds_per_byte * load.reduced_bytes;
}

//! @brief The work of one training iteration, the same on every rank.
struct workload {
  std::size_t gradient_elements = 0; //!< d: elements of the full gradient (all layers).
  std::size_t bytes_per_element = 4; //!< b: wire bytes per element (4: int32 codes, XOR words).
  //! Forward and backward time of one iteration without redundancy (each rank computing 1/n of
  //! the batch), seconds; with redundancy r a rank computes r / n of it (S3: "compute per
  //! worker grows r times").
  double compute_seconds = 0.0;
};

//! @brief How the coded exchange is carried and what limits it.
struct coded_model {
  delivery mode = delivery::point_to_point;  //!< default: what an MPI transport does.
  link_model link = link_model::full_duplex; //!< default: a switched full-duplex network.
  //! Which form of the exchange (default S3's; reduce_scatter uses the busiest rank's load).
  exchange_variant variant = exchange_variant::full_recovery;
};

namespace detail {
inline void check_workload(const workload& w) {
  check_bytes_per_element(w.bytes_per_element);
  gradcomp::detail::require(std::isfinite(w.compute_seconds) && w.compute_seconds >= 0.0,
                            "coded exchange: compute time ", w.compute_seconds,
                            " s is not a finite value >= 0");
}
} // namespace detail

//! @brief Iteration time of CSSGD with redundancy r (S3 time model T = r T_calc + T_comm / r,
//! with the exchange time computed from the per-rank counts instead of assuming T_comm / r, as
//! docs/coded.md, "Load formulas" explains for gradients):
//! T(r) = r compute_seconds + exchange_seconds(coded_exchange_load(n, r, d, b, mode, variant),
//! net, link). Computation and exchange do not overlap. O(min(r, n - r)).
//! @throws std::invalid_argument as coded_exchange_load, or if compute_seconds is negative or
//! not finite.
[[nodiscard]] inline double coded_iteration_seconds(int ranks,
                                                    int redundancy,
                                                    const workload& work,
                                                    const cost::network& net,
                                                    const coded_model& model = {}) {
  detail::check_workload(work);
  const exchange_load load = coded_exchange_load(ranks, redundancy, work.gradient_elements,
                                                 work.bytes_per_element, model.mode, model.variant);
  return redundancy * work.compute_seconds + exchange_seconds(load, net, model.link);
}

//! @brief Iteration time with the uncoded exchange of the same placement:
//! r compute_seconds + exchange_seconds(uncoded_exchange_load(n, r, d, b), net, link).
//! @throws std::invalid_argument as uncoded_exchange_load, or for a bad compute_seconds.
[[nodiscard]] inline double uncoded_iteration_seconds(int ranks,
                                                      int redundancy,
                                                      const workload& work,
                                                      const cost::network& net,
                                                      link_model link = link_model::full_duplex) {
  detail::check_workload(work);
  const exchange_load load =
      uncoded_exchange_load(ranks, redundancy, work.gradient_elements, work.bytes_per_element);
  return redundancy * work.compute_seconds + exchange_seconds(load, net, link);
}

//! @brief Iteration time of plain data parallelism with a ring allreduce (no redundancy):
//! compute_seconds + cost::ring_allreduce_seconds(d b, n, net) (S4 after Thakur et al.,
//! docs/references.md [TRG05]).
//! @throws std::invalid_argument if ranks < 1 or for a bad workload.
[[nodiscard]] inline double
ring_iteration_seconds(int ranks, const workload& work, const cost::network& net) {
  detail::check_workload(work);
  const double bytes =
      static_cast<double>(work.gradient_elements) * static_cast<double>(work.bytes_per_element);
  return work.compute_seconds + cost::ring_allreduce_seconds(bytes, ranks, net);
}

//! @brief T(r) for one redundancy.
struct redundancy_cost {
  int redundancy = 0;                 //!< r.
  double compute_seconds = 0.0;       //!< r compute_seconds.
  double communication_seconds = 0.0; //!< the coded exchange.
  double iteration_seconds = 0.0;     //!< their sum, T(r).
};

//! @brief The redundancy that minimises the coded iteration time, and the whole table.
struct redundancy_choice {
  int redundancy = 0;                  //!< argmin over the table; the smallest r among ties.
  double iteration_seconds = 0.0;      //!< T at that r.
  std::vector<redundancy_cost> table;  //!< T(r) for r = 1 .. max_redundancy, in order.
  double ring_iteration_seconds = 0.0; //!< ring_iteration_seconds, for comparison.
};

//! @brief Evaluates coded_iteration_seconds for every r = 1 .. max_redundancy and returns the
//! argmin (S3: "an optimal r exists"; with T_comm independent of r, r* = sqrt(T_comm / T_calc),
//! docs/coded.md, "Load formulas"), the smallest r among equal times. max_redundancy = 0 means
//! n - 1. Every r is evaluated (no search shortcut), so the result is the exact argmin of the
//! model; deterministic. The ring allreduce is reported beside it, not chosen: compare
//! `iteration_seconds` with `ring_iteration_seconds`. O(n^2).
//! @throws std::invalid_argument naming the value if n < 2, max_redundancy is outside
//! [0, n - 1], a binomial coefficient of some evaluated r does not fit 64 bits (n above 67 with
//! max_redundancy near n / 2), or the workload is bad.
[[nodiscard]] inline redundancy_choice choose_redundancy(int ranks,
                                                         const workload& work,
                                                         const cost::network& net,
                                                         const coded_model& model = {},
                                                         int max_redundancy = 0) {
  gradcomp::detail::require(ranks >= 2, "choose_redundancy: rank count n = ", ranks, " is below 2");
  gradcomp::detail::require(max_redundancy >= 0 && max_redundancy < ranks,
                            "choose_redundancy: max redundancy ", max_redundancy,
                            " is outside [0, n - 1 = ", ranks - 1, "] (0 means n - 1)");
  detail::check_workload(work);
  const int last = max_redundancy == 0 ? ranks - 1 : max_redundancy;
  redundancy_choice choice;
  choice.table.reserve(static_cast<std::size_t>(last));
  for (int r = 1; r <= last; ++r) {
    const exchange_load load = coded_exchange_load(
        ranks, r, work.gradient_elements, work.bytes_per_element, model.mode, model.variant);
    redundancy_cost row;
    row.redundancy = r;
    row.compute_seconds = r * work.compute_seconds;
    row.communication_seconds = exchange_seconds(load, net, model.link);
    row.iteration_seconds = row.compute_seconds + row.communication_seconds;
    if (choice.table.empty() || row.iteration_seconds < choice.iteration_seconds) {
      choice.redundancy = r;
      choice.iteration_seconds = row.iteration_seconds;
    }
    choice.table.push_back(row);
  }
  choice.ring_iteration_seconds = ring_iteration_seconds(ranks, work, net);
  return choice;
}

} // namespace gradcomp::coded
