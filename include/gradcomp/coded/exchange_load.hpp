// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Per-rank loads of CSSGD's coded gradient exchange (S3; docs/coded.md, "Load
//! formulas"): the messages and bytes each rank sends, receives and reduces in the coded
//! exchange (both variants, and the sparse form with its union agreement), in the uncoded
//! exchange of the same placement and in a ring allreduce without redundancy. Their time and
//! the choice of r: gradcomp/coded/cost.hpp. No MPI needed.
//!
//! Exchange variants (exchange_variant; docs/coded.md, "Variants F and R"): S3's (variant F,
//! full_recovery): every rank ends with the full gradient of every part it lacks and sums all
//! C(n, r) part gradients itself; and the reduce-scatter form (variant R, reduce_scatter): every
//! rank recovers and sums one block of 1/n of the coordinates, then a ring allgather spreads the
//! blocks. A gradient has d elements of b wire bytes (b = 4 for int32 fixed-point codes or XOR
//! words).
#pragma once

#include <gradcomp/coded/detail/combinatorics.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace gradcomp::coded {

//! @brief How a coded packet reaches the other r members of its group.
enum class delivery {
  //! One transmission reaches all r receivers (a shared medium or hardware multicast): S3's
  //! assumption, "multicast serves r receivers at once".
  multicast,
  //! r point-to-point copies (what an MPI transport with Isend to each peer does, and what
  //! MPI_Bcast over point-to-point links amounts to; docs/coded.md, "Network caveat").
  point_to_point,
};

//! @brief What each rank recovers in the coded exchange (docs/coded.md, "Variants F and R").
enum class exchange_variant {
  //! S3's exchange (variant F): every rank recovers the whole gradient of each of its
  //! C(n - 1, r) missing parts and sums all C(n, r) parts itself; no allgather.
  full_recovery,
  //! The reduce-scatter form (variant R, CDC-faithful): the coordinates are cut into n blocks
  //! (placement::block_elements); rank k recovers only block k of each missing part, sums block
  //! k of all C(n, r) parts, and a ring allgather of the n blocks gives every rank the whole sum.
  reduce_scatter,
};

//! @brief Per-rank work of one gradient exchange. For the uncoded exchange, sent_bytes is that
//! of the busiest rank; every other field is the same on every rank.
struct exchange_load {
  std::uint64_t sent_messages = 0;     //!< transmissions started by the rank.
  std::uint64_t received_messages = 0; //!< messages the rank receives.
  double sent_bytes = 0.0;             //!< bytes the rank transmits.
  double received_bytes = 0.0;         //!< bytes the rank receives.
  double reduced_bytes = 0.0;          //!< bytes passed through an add, subtract or XOR.
  //! Field by field equality.
  friend bool operator==(const exchange_load&, const exchange_load&) = default;
  //! Field by field sum: the load of two exchanges run one after the other.
  friend exchange_load operator+(const exchange_load& a, const exchange_load& b) noexcept {
    return {a.sent_messages + b.sent_messages, a.received_messages + b.received_messages,
            a.sent_bytes + b.sent_bytes, a.received_bytes + b.received_bytes,
            a.reduced_bytes + b.reduced_bytes};
  }
};

namespace detail {

[[nodiscard]] inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

inline void check_bytes_per_element(std::size_t bytes_per_element) {
  gradcomp::detail::require(bytes_per_element >= 1, "coded exchange: bytes per element ",
                            bytes_per_element, " is below 1");
}

} // namespace detail

//! @brief Per-rank load of the coded exchange (S3 "Exchange" and "Load"; docs/coded.md, "Load
//! formulas" and "Send rule and decoding"). With g = C(n - 1, r) groups per rank and packets of
//! P = ceil(d / r) b bytes (slices zero-padded to the longest):
//! - sent: multicast, g messages of P bytes (C(n-1, r) u / r with demand unit u = d b);
//!   point_to_point, r g messages of P bytes (r C(n-1, r) messages, each paying one alpha);
//! - received: r g messages of P bytes (one from each other member of each group; about
//!   C(n-1, r) u, the same as the uncoded exchange of the placement);
//! - reduced: (r - 1) P for each of the g packets built and r g packets decoded, plus
//!   (C(n, r) - 1) d b to sum all part gradients.
//! Every message is counted, even an empty one when d < r. O(min(r, n - r)).
//! @throws std::invalid_argument naming the value if n < 2, r < 1, r >= n, b < 1, or a count
//! does not fit 64 bits.
[[nodiscard]] inline exchange_load coded_exchange_load(int ranks,
                                                       int redundancy,
                                                       std::size_t gradient_elements,
                                                       std::size_t bytes_per_element,
                                                       delivery mode) {
  detail::check_ranks_and_redundancy(ranks, redundancy);
  detail::check_bytes_per_element(bytes_per_element);
  const auto n = static_cast<std::uint64_t>(ranks);
  const auto r = static_cast<std::uint64_t>(redundancy);
  const std::uint64_t groups = detail::binomial_or_throw(n - 1, r, "groups per rank");
  const std::uint64_t parts = detail::binomial_or_throw(n, r, "parts");
  const std::uint64_t copies = detail::product_or_throw(r, groups, "messages per rank");
  const double packet_bytes = static_cast<double>(detail::ceil_div(gradient_elements, r)) *
                              static_cast<double>(bytes_per_element);
  const double gradient_bytes =
      static_cast<double>(gradient_elements) * static_cast<double>(bytes_per_element);
  exchange_load load;
  load.sent_messages = mode == delivery::multicast ? groups : copies;
  load.received_messages = copies;
  load.sent_bytes = static_cast<double>(load.sent_messages) * packet_bytes;
  load.received_bytes = static_cast<double>(copies) * packet_bytes;
  load.reduced_bytes = static_cast<double>(r - 1) * packet_bytes *
                           (static_cast<double>(groups) + static_cast<double>(copies)) +
                       static_cast<double>(parts - 1) * gradient_bytes;
  return load;
}

namespace detail {
// |block k| of d elements cut into n blocks, longer blocks first (placement::block_elements)
[[nodiscard]] inline std::uint64_t
block_length(std::uint64_t elements, std::uint64_t ranks, std::uint64_t block) noexcept {
  return elements / ranks + (block < elements % ranks ? 1 : 0);
}
} // namespace detail

//! @brief Per-rank load of the reduce-scatter form of the coded exchange on rank `rank`
//! (exchange_variant::reduce_scatter; docs/coded.md, "Variants F and R" and "Load formulas":
//! demand unit u = one block, then a ring allgather of (n-1)/n d per rank). With
//! g = C(n - 1, r) groups per rank, blocks of B_k elements (the size of block k, which
//! placement::block_elements() gives for d elements: floor(d / n) or ceil(d / n)) and packets
//! of Q = ceil(ceil(d / n) / r) b bytes (the longest slice of the longest block;
//! placement::block_packet_elements):
//! - coded step: sent, multicast g messages of Q bytes, point_to_point r g; received r g
//!   messages of Q bytes (as the full form, with Q in place of ceil(d / r) b);
//! - ring allgather (rank -> rank + 1, n - 1 steps, step s sends block rank - s): n - 1
//!   messages each way; sent (d - B_{(rank + 1) mod n}) b bytes (every block but the right
//!   neighbour's), received (d - B_rank) b (every block but its own);
//! - reduced: (r - 1) Q for each of the g packets built and r g packets decoded, plus
//!   (C(n, r) - 1) B_rank b to sum block `rank` of all parts.
//! So sent = (r g Q + (d - B_{rank+1}) b) with point_to_point, about (C(n-1, r) / n + (n-1) / n) d
//! b against C(n - 1, r) d b for the full form. Every message is counted, even an empty one when d
//! < n r. O(min(r, n - r)).
//! @throws std::invalid_argument naming the value if n < 2, r < 1, r >= n, b < 1, rank is
//! outside [0, n), or a count does not fit 64 bits.
[[nodiscard]] inline exchange_load coded_reduce_scatter_load(int ranks,
                                                             int redundancy,
                                                             std::size_t gradient_elements,
                                                             std::size_t bytes_per_element,
                                                             delivery mode,
                                                             int rank) {
  detail::check_ranks_and_redundancy(ranks, redundancy);
  detail::check_bytes_per_element(bytes_per_element);
  gradcomp::detail::require(rank >= 0 && rank < ranks, "coded exchange: rank ", rank,
                            " is outside [0, n = ", ranks, ")");
  const auto n = static_cast<std::uint64_t>(ranks);
  const auto r = static_cast<std::uint64_t>(redundancy);
  const auto d = static_cast<std::uint64_t>(gradient_elements);
  const auto k = static_cast<std::uint64_t>(rank);
  const std::uint64_t groups = detail::binomial_or_throw(n - 1, r, "groups per rank");
  const std::uint64_t parts = detail::binomial_or_throw(n, r, "parts");
  const std::uint64_t copies = detail::product_or_throw(r, groups, "messages per rank");
  const double b = static_cast<double>(bytes_per_element);
  const double packet_bytes = static_cast<double>(detail::ceil_div(detail::ceil_div(d, n), r)) * b;
  const std::uint64_t coded_sent = mode == delivery::multicast ? groups : copies;
  exchange_load load;
  load.sent_messages = coded_sent + (n - 1);
  load.received_messages = copies + (n - 1);
  load.sent_bytes = static_cast<double>(coded_sent) * packet_bytes +
                    static_cast<double>(d - detail::block_length(d, n, (k + 1) % n)) * b;
  load.received_bytes = static_cast<double>(copies) * packet_bytes +
                        static_cast<double>(d - detail::block_length(d, n, k)) * b;
  load.reduced_bytes =
      static_cast<double>(r - 1) * packet_bytes *
          (static_cast<double>(groups) + static_cast<double>(copies)) +
      static_cast<double>(parts - 1) * static_cast<double>(detail::block_length(d, n, k)) * b;
  return load;
}

//! @brief The reduce-scatter form's load on its busiest ranks: every field is the largest over
//! the n ranks of coded_reduce_scatter_load(..., rank) (messages are the same on every rank;
//! bytes differ by at most b between ranks, and not all on the same rank, since blocks differ by
//! at most one element). exchange_seconds of it bounds every rank's time; equal to every rank's
//! load when n divides d. O(min(r, n - r)).
//! @throws std::invalid_argument as the per-rank overload.
[[nodiscard]] inline exchange_load coded_reduce_scatter_load(int ranks,
                                                             int redundancy,
                                                             std::size_t gradient_elements,
                                                             std::size_t bytes_per_element,
                                                             delivery mode) {
  // rank 0 reduces a longest block (largest reduced bytes); the busiest sender and receiver are
  // the ranks whose right neighbour's block, and whose own block, is a shortest one
  const auto n = static_cast<std::size_t>(std::max(ranks, 2));
  const std::size_t remainder = gradient_elements % n;
  const int shortest = remainder == 0 ? 0 : static_cast<int>(n) - 1;
  exchange_load load =
      coded_reduce_scatter_load(ranks, redundancy, gradient_elements, bytes_per_element, mode, 0);
  const exchange_load left_of_shortest =
      coded_reduce_scatter_load(ranks, redundancy, gradient_elements, bytes_per_element, mode,
                                (shortest + ranks - 1) % ranks);
  const exchange_load at_shortest = coded_reduce_scatter_load(ranks, redundancy, gradient_elements,
                                                              bytes_per_element, mode, shortest);
  load.sent_bytes = left_of_shortest.sent_bytes;
  load.received_bytes = at_shortest.received_bytes;
  return load;
}

//! @brief Per-rank load of either form of the coded exchange: coded_exchange_load for
//! full_recovery, the busiest-rank coded_reduce_scatter_load for reduce_scatter.
//! @throws std::invalid_argument as those.
[[nodiscard]] inline exchange_load coded_exchange_load(int ranks,
                                                       int redundancy,
                                                       std::size_t gradient_elements,
                                                       std::size_t bytes_per_element,
                                                       delivery mode,
                                                       exchange_variant variant) {
  return variant == exchange_variant::reduce_scatter
             ? coded_reduce_scatter_load(ranks, redundancy, gradient_elements, bytes_per_element,
                                         mode)
             : coded_exchange_load(ranks, redundancy, gradient_elements, bytes_per_element, mode);
}

//! @brief Wire bytes of one index in the sparse form's union agreement (uint32, as
//! sparse_message's indices).
inline constexpr std::size_t union_index_bytes = 4;

//! @brief Per-rank load of the union agreement of the sparse form (gradcomp::mpi::
//! coded_sparse_allreduce): a ring allgather, point to point, of every rank's contributed index
//! list (rank j contributes c_j = contributed_elements[j] indices, the union of the index lists
//! of the parts union_contributors gives it), in n - 1 steps to rank + 1, from rank - 1:
//! n - 1 messages each way; sent 4 (T - c_{(rank + 1) mod n}) bytes (every list but the right
//! neighbour's), received 4 (T - c_rank) (every list but its own), T = sum of c_j; nothing
//! reduced (the merge compares, it does not add). Not counted, as the dense exchange's
//! agreement is not: the allgather of a 32-byte header per rank (lengths, counts, flags) that
//! precedes it. Every message is counted, even an empty one. O(n).
//! @throws std::invalid_argument naming the value if contributed_elements is empty or rank is
//! outside [0, n).
[[nodiscard]] inline exchange_load
union_agreement_load(std::span<const std::uint64_t> contributed_elements, int rank) {
  gradcomp::detail::require(!contributed_elements.empty(),
                            "union agreement: no rank's contribution given (need n >= 1)");
  const auto n = static_cast<std::uint64_t>(contributed_elements.size());
  gradcomp::detail::require(rank >= 0 && static_cast<std::uint64_t>(rank) < n,
                            "union agreement: rank ", rank, " is outside [0, n = ", n, ")");
  const auto k = static_cast<std::uint64_t>(rank);
  double total = 0.0;
  for (const std::uint64_t c : contributed_elements) {
    total += static_cast<double>(c);
  }
  const double b = union_index_bytes;
  exchange_load load;
  load.sent_messages = n - 1;
  load.received_messages = n - 1;
  load.sent_bytes = (total - static_cast<double>(contributed_elements[(k + 1) % n])) * b;
  load.received_bytes = (total - static_cast<double>(contributed_elements[k])) * b;
  return load;
}

//! @brief Per-rank load of the sparse form of the coded exchange on rank `rank`
//! (gradcomp::mpi::coded_sparse_allreduce): the union agreement (union_agreement_load) plus the
//! coded exchange of |U| = union_elements elements instead of d (coded_exchange_load for
//! full_recovery, the per-rank coded_reduce_scatter_load for reduce_scatter). Full form,
//! point_to_point: sent 4 (T - c_{rank+1}) + r C(n - 1, r) ceil(|U| / r) b bytes. It sends fewer
//! bytes than the dense coded exchange of d elements when
//! 4 (T - c_{rank+1}) < r C(n - 1, r) b (ceil(d / r) - ceil(|U| / r)), about
//! T - c < C(n - 1, r) (d - |U|) for b = 4 (docs/coded.md "The sparse form"). O(n).
//! @throws std::invalid_argument as union_agreement_load and coded_exchange_load, or if
//! contributed_elements does not have n entries.
[[nodiscard]] inline exchange_load
coded_sparse_load(int ranks,
                  int redundancy,
                  std::size_t union_elements,
                  std::span<const std::uint64_t> contributed_elements,
                  std::size_t bytes_per_element,
                  delivery mode,
                  exchange_variant variant,
                  int rank) {
  detail::check_ranks_and_redundancy(ranks, redundancy);
  gradcomp::detail::require(contributed_elements.size() == static_cast<std::size_t>(ranks),
                            "coded sparse exchange: ", contributed_elements.size(),
                            " contributions given for n = ", ranks, " ranks");
  const exchange_load coded =
      variant == exchange_variant::reduce_scatter
          ? coded_reduce_scatter_load(ranks, redundancy, union_elements, bytes_per_element, mode,
                                      rank)
          : coded_exchange_load(ranks, redundancy, union_elements, bytes_per_element, mode);
  return union_agreement_load(contributed_elements, rank) + coded;
}

//! @brief Per-rank load of the uncoded exchange of the same placement (docs/coded.md, "Load
//! formulas": CDC's uncoded shuffle, each missing part delivered separately, no coding): every
//! owner of a part sends its slice of the part's gradient (split_evenly into r slices, its
//! position among the owners) to each of the n - r ranks that lack the part, as one unicast
//! message. So each rank sends (n - r) C(n - 1, r - 1) = r C(n - 1, r) messages and receives the
//! r slices of each of its C(n - 1, r) missing parts: r C(n - 1, r) messages, C(n - 1, r) d b
//! bytes. sent_bytes is the busiest rank's, r C(n - 1, r) ceil(d / r) b (rank 0, which holds
//! slice 0, a longest one, of every part it owns); it equals the average when r divides d.
//! reduced: (C(n, r) - 1) d b to sum all part gradients. O(min(r, n - r)).
//! @throws std::invalid_argument naming the value if n < 2, r < 1, r >= n, b < 1, or a count
//! does not fit 64 bits.
[[nodiscard]] inline exchange_load uncoded_exchange_load(int ranks,
                                                         int redundancy,
                                                         std::size_t gradient_elements,
                                                         std::size_t bytes_per_element) {
  detail::check_ranks_and_redundancy(ranks, redundancy);
  detail::check_bytes_per_element(bytes_per_element);
  const auto n = static_cast<std::uint64_t>(ranks);
  const auto r = static_cast<std::uint64_t>(redundancy);
  const std::uint64_t missing = detail::binomial_or_throw(n - 1, r, "groups per rank");
  const std::uint64_t parts = detail::binomial_or_throw(n, r, "parts");
  const std::uint64_t messages = detail::product_or_throw(r, missing, "messages per rank");
  const double b = static_cast<double>(bytes_per_element);
  const double gradient_bytes = static_cast<double>(gradient_elements) * b;
  exchange_load load;
  load.sent_messages = messages;
  load.received_messages = messages;
  load.sent_bytes = static_cast<double>(messages) *
                    static_cast<double>(detail::ceil_div(gradient_elements, r)) * b;
  load.received_bytes = static_cast<double>(missing) * gradient_bytes;
  load.reduced_bytes = static_cast<double>(parts - 1) * gradient_bytes;
  return load;
}

//! @brief Per-rank load of a ring allreduce of the d b-byte gradient over n ranks without
//! redundancy (Thakur et al., Patarasuk & Yuan: docs/references.md [TRG05], [PY09]; the model
//! of gradcomp::cost::ring_allreduce_seconds): 2 (n - 1) messages and 2 (n - 1) / n d b bytes each
//! way, (n - 1) / n d b reduced bytes. exchange_seconds of this load equals
//! cost::ring_allreduce_seconds under either link model. All zero for n = 1.
//! @throws std::invalid_argument if ranks < 1 or b < 1.
[[nodiscard]] inline exchange_load
ring_allreduce_load(int ranks, std::size_t gradient_elements, std::size_t bytes_per_element) {
  gradcomp::detail::require(ranks >= 1, "ring allreduce: rank count ", ranks, " is below 1");
  detail::check_bytes_per_element(bytes_per_element);
  const double p = ranks;
  const double m = static_cast<double>(gradient_elements) * static_cast<double>(bytes_per_element);
  exchange_load load;
  load.sent_messages = 2 * static_cast<std::uint64_t>(ranks - 1);
  load.received_messages = load.sent_messages;
  load.sent_bytes = 2.0 * (p - 1) / p * m;
  load.received_bytes = load.sent_bytes;
  load.reduced_bytes = (p - 1) / p * m;
  return load;
}

} // namespace gradcomp::coded
