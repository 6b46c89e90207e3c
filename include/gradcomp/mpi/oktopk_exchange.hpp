// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::oktopk_exchange: Ok-Topk (mpi::oktopk_allreduce) as a pipeline
//! transport with error feedback on the global selection.
#pragma once

#include <gradcomp/mpi/global_topk_exchange.hpp>
#include <gradcomp/mpi/oktopk_allreduce.hpp>
#include <gradcomp/pipeline/transport.hpp>

namespace gradcomp::mpi {

//! @brief Averages one message per rank with Ok-Topk (global_topk_exchange over
//! mpi::oktopk_allreduce: a balanced sparse reduce-scatter and an allgather of the elements
//! above a reused global threshold, about k = k_for_density(n, density) of each group's n).
//! With a sparse compressor at the same density each rank sends about 2 (P-1)/P x k pairs
//! (cost::oktopk_bytes_sent), against the allgather's (P-1) x k. Regions and threshold are
//! kept per group length (oktopk_allreduce). Constructed as `oktopk_exchange(comm, density,
//! oktopk_allreduce_options{})`; collective as global_topk_exchange says.
using oktopk_exchange = global_topk_exchange<oktopk_allreduce>;

static_assert(pipeline_policy::transport<oktopk_exchange>);
static_assert(pipeline_policy::selecting_transport<oktopk_exchange>);
static_assert(pipeline_policy::byte_counting_transport<oktopk_exchange>);

} // namespace gradcomp::mpi
