// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The options of gradcomp::mpi::parameter_server (mpi/parameter_server.hpp): how many
//! servers and where they run, the push's index encoding, the largest message, the pull's format,
//! the tags and the wait policy.
#pragma once

#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <cstddef>

namespace gradcomp::mpi {

//! @brief Which ranks of a parameter_server serve.
enum class server_placement {
  //! Every rank is a worker, and ranks 0 .. S-1 also serve (W = P; S <= P).
  colocated,
  //! Ranks P-S .. P-1 only serve; ranks 0 .. P-S-1 are the workers (W = P - S; S < P).
  dedicated,
};

//! @brief How a parameter_server's servers send the averaged shard back (the pull).
enum class pull_format {
  //! Always the dense shard: 4 n_s bytes of raw fp32 per server and rank.
  dense,
  //! The union of the pushes' indices with the averaged values, in the wire format (fp32
  //! values, the options' index encoding), when that encoding is smaller than the dense shard's
  //! 4 n_s bytes; the dense shard otherwise (and whenever a push part is dense). The result is
  //! bit-identical to the dense pull's: elements outside the union are exactly 0 in both.
  adaptive,
};

//! @brief Options of parameter_server. Every rank must pass the same options (checked: a
//! disagreement makes every rank throw).
struct parameter_server_options {
  //! Number of server ranks S, >= 1. Server s owns the elements [n s / S, n (s+1) / S).
  int servers = 1;
  //! Co-located (servers are also workers) or dedicated server ranks.
  server_placement placement = server_placement::colocated;
  //! Index encoding of sparse pushes on the wire (never index_encoding::none; dense pushes are
  //! always sent without indices).
  index_encoding indices = index_encoding::delta_varint;
  //! Largest point-to-point message, bytes (>= 4; capped at INT_MAX): longer pushes and pulls
  //! are sent as several messages, since MPI counts are int.
  std::size_t max_message_bytes = std::size_t{1} << 30;
  //! How the averaged shards come back (see pull_format).
  pull_format pull = pull_format::adaptive;
  //! How waits complete (see wait_policy.hpp).
  wait_policy wait{};
  //! First message tag: the operation uses tags tag_base .. tag_base + 2. Operations in flight at
  //! the same time on one communicator need disjoint tag ranges. >= 0.
  int tag_base = 0;
};

} // namespace gradcomp::mpi
