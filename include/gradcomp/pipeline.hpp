// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's pipeline (standard library only): the pipeline, its
//! policy concepts, the grouping policies, the loopback transport and the core (compressors,
//! error feedback: gradcomp.hpp). The MPI transports are in
//! <gradcomp/mpi/pipeline_transports.hpp> (needs gradcomp::mpi).
#pragma once

#include <gradcomp/gradcomp.hpp> // the compressors and error feedback a pipeline is built from
#include <gradcomp/pipeline/any_transport.hpp>
#include <gradcomp/pipeline/grouping_policy.hpp>
#include <gradcomp/pipeline/loopback.hpp>
#include <gradcomp/pipeline/pipeline.hpp>
#include <gradcomp/pipeline/transport.hpp>
