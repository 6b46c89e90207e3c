// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The cost of one message on each of gradcomp's pipeline transports, as a function of
//! the message's size: the alpha-beta-gamma models of alpha_beta.hpp picked and parameterised
//! per transport (no MPI needed). A message_cost is what a merge planner's
//! schedule::cost_model::communication_seconds expects.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/cost/gtopk.hpp>
#include <gradcomp/cost/oktopk.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gradcomp::cost {

//! @brief The pipeline transports of gradcomp/mpi/pipeline_transports.hpp, by what they run.
enum class transport_kind {
  ring_allreduce,         //!< dense_exchange: gradcomp::mpi::ring_allreduce of the densified group.
  native_allreduce,       //!< native_dense_exchange: MPI_Iallreduce of the densified group.
  sparse_allgather,       //!< sparse_exchange: gradcomp::mpi::sparse_allgather of the messages.
  parameter_server,       //!< parameter_server_exchange: gradcomp::mpi::parameter_server.
  hierarchical_allreduce, //!< hierarchical_exchange: gradcomp::mpi::hierarchical_allreduce.
  none,                   //!< no exchange (each rank alone): costs nothing.
  gtopk,                  //!< gtopk_exchange: gradcomp::mpi::gtopk_allreduce (gTop-k).
  oktopk,                 //!< oktopk_exchange: gradcomp::mpi::oktopk_allreduce (Ok-Topk).
};

//! @brief The enumerator's name as written in the enum, e.g. "ring_allreduce". O(1).
[[nodiscard]] constexpr std::string_view name(transport_kind kind) noexcept {
  switch (kind) {
  case transport_kind::ring_allreduce:
    return "ring_allreduce";
  case transport_kind::native_allreduce:
    return "native_allreduce";
  case transport_kind::sparse_allgather:
    return "sparse_allgather";
  case transport_kind::parameter_server:
    return "parameter_server";
  case transport_kind::hierarchical_allreduce:
    return "hierarchical_allreduce";
  case transport_kind::none:
    return "none";
  case transport_kind::gtopk:
    return "gtopk";
  case transport_kind::oktopk:
    return "oktopk";
  }
  return "unknown";
}

//! @brief Transport parameters that change the cost; each kind reads only its own fields.
struct transport_options {
  //! parameter_server: server count S >= 1, or 0 for one server per rank (S = P, co-located
  //! only), the default of gradcomp-train's --servers.
  int servers = 0;
  //! parameter_server: co-located (the pipeline's only choice) or dedicated servers.
  server_placement placement = server_placement::colocated;
  //! parameter_server: the servers always pull the dense shard (gradcomp::mpi::pull_format::
  //! dense) instead of the pushes' union when that is smaller (adaptive, the default).
  bool dense_pull = false;
  //! hierarchical_allreduce: ranks per group g >= 1; values above P mean one group of P, as in
  //! the transport. 0 (the transport's "one group per node") is rejected: the node size is not
  //! known here, pass it.
  int group_size = 0;
  //! hierarchical_allreduce: the schedule (the transport's default is the leader variant).
  hierarchical_variant variant = hierarchical_variant::leader;
  //! hierarchical_allreduce, reduce_scatter: a group's ranks share one link between groups (a
  //! group is one host; hierarchical_allreduce_seconds's group_shares_link).
  bool group_shares_link = false;
  //! hierarchical_allreduce: the network inside a group; empty: the same as between groups.
  std::optional<network> intra_group = std::nullopt;
  //! hierarchical_allreduce: the transport's pipelined pieces, bytes
  //! (gradcomp::mpi::hierarchical_allreduce_options::piece_bytes, whose default this is; 0: the
  //! whole message as one piece). Must be finite and >= 0.
  double piece_bytes = 262144.0;
};

//! @brief Seconds to exchange one message of a given size on a transport over P ranks: a small
//! copyable callable, usable wherever a std::function<double(std::uint64_t)> is expected.
//!
//! Per kind, for a message of b bytes (what the caller's compressor sends: 4 n for a dense
//! fp32 group, about 8 k for k sparse pairs); all are 0 for P = 1 and for `none`:
//! - ring_allreduce: ring_allreduce_seconds(b, P, net), S4 after Thakur et al.:
//!   2 (P-1) alpha + (2 (P-1) beta + (P-1) gamma) b / P;
//! - native_allreduce: priced as the ring (the same formula). MPICH's large-message algorithm
//!   (Rabenseifner: reduce-scatter + allgather) has the same beta term and 2 log2(P) alpha, but
//!   measured 1.4-1.5x this on 4 emulated hosts (docs/transport-benchmarks.md);
//! - sparse_allgather: sparse_allgather_seconds(1, b, P, net) (one b-byte message per rank),
//!   the header round allgather_seconds(sparse_allgather_header_bytes, P) plus
//!   allgather_seconds(b, P) = (P-1) (alpha + beta b).
//!   The transport's dense switch (a ring allreduce of the dense group when gathering would
//!   receive more) needs the group's dense size and is not modelled;
//! - parameter_server: parameter_server_seconds(b, pull, W, S, net, placement), with W = P
//!   (co-located) or P - S (dedicated) and S = servers (0: P). The pull is what the servers send
//!   back: operator()(b) prices a dense push (pull = b); operator()(b, d) a push of b bytes from
//!   a group of d dense bytes: pull = d when the pull is dense (dense_pull, or b >= d), else
//!   min(d, W b), the union of the W pushes when no two share an index (an upper bound: pushes
//!   that overlap pull less);
//! - hierarchical_allreduce: hierarchical_allreduce_seconds(b, P, min(g, P), intra, net,
//!   variant, group_shares_link, piece_bytes), S4's two-level schedule in pipelined pieces;
//! - gtopk: gtopk_allreduce_seconds(b / 8, P, net) (k = b / 8 pairs);
//! - oktopk: oktopk_allreduce_seconds(b / 8, P, net) (k = b / 8 pairs, balanced regions, the
//!   threshold reused).
//! The dense transports (ring, native, hierarchical) densify a sparse message before the
//! allreduce; pass the dense size then.
class message_cost {
public:
  //! @brief The cost function of `kind` over `ranks` ranks on `net` (alpha, beta, gamma >= 0 and
  //! finite, e.g. from gradcomp::mpi::calibrate_ring_allreduce).
  //! @throws std::invalid_argument if ranks < 1, a network value is negative or not finite, or
  //! the options of `kind` are invalid: parameter_server with servers < 0, servers = 0 and
  //! dedicated, servers > P co-located or servers >= P dedicated (no worker left);
  //! hierarchical_allreduce with group_size < 1 or a negative or non-finite piece_bytes. Options of
  //! other kinds are not checked. O(1).
  message_cost(transport_kind kind, int ranks, const network& net, const transport_options& o = {})
      : kind_(kind), ranks_(ranks), net_(net), options_(o) {
    detail::check_ranks(ranks);
    check_network(net);
    if (o.intra_group) {
      check_network(*o.intra_group);
    }
    if (kind == transport_kind::parameter_server) {
      gradcomp::detail::require(o.servers >= 0, "message_cost: server count ", o.servers,
                                " is negative");
      const bool colocated = o.placement == server_placement::colocated;
      gradcomp::detail::require(colocated || o.servers > 0,
                                "message_cost: dedicated servers need an explicit count");
      servers_ = o.servers > 0 ? o.servers : ranks;
      gradcomp::detail::require(colocated ? servers_ <= ranks : servers_ < ranks,
                                "message_cost: ", servers_,
                                colocated ? " co-located servers exceed the "
                                          : " dedicated servers leave no worker among the ",
                                ranks, " ranks");
    }
    if (kind == transport_kind::hierarchical_allreduce) {
      gradcomp::detail::require(o.group_size >= 1, "message_cost: group size ", o.group_size,
                                " is below 1 (pass the ranks per node)");
      group_ = std::min(o.group_size, ranks);
      gradcomp::detail::require(std::isfinite(o.piece_bytes) && o.piece_bytes >= 0.0,
                                "message_cost: piece size ", o.piece_bytes,
                                " bytes is negative or not finite");
    }
  }

  //! @brief Seconds for one message of `message_bytes` bytes, by the formula of the kind (see
  //! the class); for the parameter_server, a dense push (the pull is as large). Finite and >= 0.
  //! O(1).
  [[nodiscard]] double operator()(std::uint64_t message_bytes) const noexcept {
    return (*this)(message_bytes, message_bytes);
  }

  //! @brief Seconds for one group whose message is `message_bytes` bytes on a rank, taken from
  //! a dense group of `dense_bytes` bytes (4 n at fp32): the same as operator()(message_bytes)
  //! except for the parameter_server, whose pull is priced as the class says. Finite and >= 0.
  //! O(1).
  [[nodiscard]] double operator()(std::uint64_t message_bytes,
                                  std::uint64_t dense_bytes) const noexcept {
    if (kind_ == transport_kind::none || ranks_ == 1) {
      return 0.0;
    }
    const auto b = static_cast<double>(message_bytes);
    switch (kind_) {
    case transport_kind::ring_allreduce:
    case transport_kind::native_allreduce:
      return ring_allreduce_seconds(b, ranks_, net_);
    case transport_kind::sparse_allgather:
      return sparse_allgather_seconds(1.0, b, ranks_, net_);
    case transport_kind::parameter_server: {
      const bool colocated = options_.placement == server_placement::colocated;
      const int workers = colocated ? ranks_ : ranks_ - servers_;
      const auto dense = static_cast<double>(dense_bytes);
      const double pull = options_.dense_pull || b >= dense ? dense : std::min(dense, workers * b);
      return parameter_server_seconds(b, pull, workers, servers_, net_, options_.placement);
    }
    case transport_kind::hierarchical_allreduce:
      return hierarchical_allreduce_seconds(b, ranks_, group_, options_.intra_group.value_or(net_),
                                            net_, options_.variant, options_.group_shares_link,
                                            options_.piece_bytes);
    case transport_kind::gtopk: // k pairs of 8 bytes
      return gtopk_allreduce_seconds(b / 8.0, ranks_, net_);
    case transport_kind::oktopk: // k pairs of 8 bytes, the threshold reused
      return oktopk_allreduce_seconds(b / 8.0, ranks_, net_);
    case transport_kind::none:
      break;
    }
    return 0.0;
  }

  //! The transport this prices.
  [[nodiscard]] transport_kind kind() const noexcept { return kind_; }
  //! The rank count P.
  [[nodiscard]] int ranks() const noexcept { return ranks_; }
  //! The network between ranks (between groups for hierarchical_allreduce).
  [[nodiscard]] const network& net() const noexcept { return net_; }
  //! The options as given.
  [[nodiscard]] const transport_options& options() const noexcept { return options_; }

private:
  static void check_network(const network& n) {
    const auto ok = [](double v) { return std::isfinite(v) && v >= 0.0; };
    gradcomp::detail::require(
        ok(n.alpha_seconds) && ok(n.beta_seconds_per_byte) && ok(n.gamma_seconds_per_byte),
        "message_cost: network (alpha ", n.alpha_seconds, " s, beta ", n.beta_seconds_per_byte,
        " s/B, gamma ", n.gamma_seconds_per_byte, " s/B) has a negative or non-finite value");
  }

  transport_kind kind_;
  int ranks_;
  network net_;
  transport_options options_;
  int servers_ = 1; // parameter_server: S resolved (0 -> P)
  int group_ = 1;   // hierarchical_allreduce: g clamped to P
};

} // namespace gradcomp::cost
