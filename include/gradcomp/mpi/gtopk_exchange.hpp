// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::gtopk_exchange: gTop-k (mpi::gtopk_allreduce) as a pipeline transport
//! with error feedback on the global selection.
#pragma once

#include <gradcomp/mpi/global_topk_exchange.hpp>
#include <gradcomp/mpi/gtopk_allreduce.hpp>
#include <gradcomp/pipeline/transport.hpp>

namespace gradcomp::mpi {

//! @brief Averages one message per rank with gTop-k (global_topk_exchange over
//! mpi::gtopk_allreduce: a binomial tree of sparse merges keeping exactly k =
//! k_for_density(n, density) elements of each group's n). With a sparse compressor at the same
//! density each rank sends about k values and the exchange moves O(k log P) bytes per rank
//! (cost::gtopk_bytes_sent for the busiest rank), against the allgather's O(k P). Constructed
//! as `gtopk_exchange(comm, density, gtopk_allreduce_options{})`; collective as
//! global_topk_exchange says.
using gtopk_exchange = global_topk_exchange<gtopk_allreduce>;

static_assert(pipeline_policy::transport<gtopk_exchange>);
static_assert(pipeline_policy::selecting_transport<gtopk_exchange>);
static_assert(pipeline_policy::byte_counting_transport<gtopk_exchange>);

} // namespace gradcomp::mpi
