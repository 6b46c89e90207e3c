// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The options of gradcomp::mpi::async_parameter_server (mpi/async_parameter_server.hpp):
//! the dedicated servers, the staleness bound, the pushes' index encoding, the pushes in flight,
//! the tags and the wait policy; and the settings of its default server update rule (async_sgd,
//! lr_scaling).
#pragma once

#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/wire.hpp>

namespace gradcomp::mpi {

//! @brief Options of async_parameter_server. The fields marked "agreed" must be equal on every
//! rank (checked at construction: a disagreement makes every rank throw).
struct async_parameter_server_options {
  //! Number of dedicated server ranks S (agreed), 1 <= S < P: ranks P-S .. P-1 serve, ranks
  //! 0 .. P-S-1 are the W = P - S workers. Server s owns the elements [n s / S, n (s+1) / S).
  int servers = 1;
  //! SSP bound k (agreed), >= 0. 0: pure ASGD, a pull is answered as soon as the puller's own
  //! pushes are applied. k >= 1: a pull from a worker whose clock c (pushes it made) exceeds
  //! the smallest clock among the workers not yet finished plus k is deferred until it no
  //! longer does (Ho et al., NIPS 2013), so every answer includes each worker's pushes up to
  //! clock c - k. A server counts a worker's clock as the pushes it has received from it; a
  //! finished worker's clock (once all its pushes are in) counts as infinity.
  int staleness_bound = 0;
  //! Index encoding of sparse pushes on the wire (never none; dense pushes carry no indices).
  index_encoding indices = index_encoding::delta_varint;
  //! Pushes a worker may have in flight (>= 1): push() first waits for its oldest push's
  //! sends to complete when this many are pending. Memory: this many encoded pushes.
  int max_pushes_in_flight = 4;
  //! How waits complete (see wait_policy.hpp): pull(), finish(), a push beyond
  //! max_pushes_in_flight, the server's idle loop, the construction's agreement.
  wait_policy wait{};
  //! First message tag (agreed): the object uses tag_base .. tag_base + 3. Objects live at the
  //! same time on one communicator need disjoint tag ranges. tag_base + 3 <= MPI_TAG_UB.
  int tag_base = 0;
};

//! @brief How the default update rule scales the learning rate.
enum class lr_scaling {
  //! lr / W: W asynchronous pushes move the weights as far as one synchronous step of the
  //! averaged gradient (the default).
  inverse_workers,
  //! lr as given (each push is a full SGD step).
  none,
};

//! @brief The default server update rule: SGD with momentum on the server, per shard element
//! v = momentum v + g, w -= step v, with step = lr / float(W) (lr_scaling::inverse_workers) or
//! lr (none), in float. The velocity starts at zero and lives on the server (n_s floats). With
//! momentum 0 no velocity is kept and only the pushed elements change (w -= step g, the same
//! result). O(n_s) per push with momentum, O(nnz) without.
struct async_sgd {
  float lr = 0.01f;      //!< learning rate, finite and >= 0.
  float momentum = 0.9f; //!< in [0, 1].
  //! step = lr / float(W) (inverse_workers, the default) or lr (none).
  lr_scaling scaling = lr_scaling::inverse_workers;
};

} // namespace gradcomp::mpi
