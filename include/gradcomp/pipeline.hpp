// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's pipeline (standard library only): the pipeline, its
//! policy concepts, the grouping policies and the loopback transport. The MPI transports are in
//! <gradcomp/pipeline/mpi_exchange.hpp> (needs gradcomp::mpi).
#pragma once

#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/pipeline/loopback.hpp>
#include <gradcomp/pipeline/pipeline.hpp>
#include <gradcomp/pipeline/transport.hpp>
