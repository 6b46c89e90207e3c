// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp::mpi: communicator handling, wait policies, the MPI
//! transports, the pipeline transports over them (mpi/pipeline_transports.hpp) and plan
//! agreement (mpi/agreed_grouping.hpp). Needs MPI (link gradcomp::mpi); includes the core
//! (gradcomp.hpp) as well.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi/agreed_grouping.hpp>
#include <gradcomp/mpi/any_rank.hpp>
#include <gradcomp/mpi/async_parameter_server.hpp>
#include <gradcomp/mpi/calibrate.hpp>
#include <gradcomp/mpi/calibrate_column_parallel.hpp>
#include <gradcomp/mpi/coded_exchange.hpp>
#include <gradcomp/mpi/coded_sparse.hpp>
#include <gradcomp/mpi/column_parallel_linear.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/global_topk_exchange.hpp>
#include <gradcomp/mpi/gtopk_allreduce.hpp>
#include <gradcomp/mpi/gtopk_exchange.hpp>
#include <gradcomp/mpi/hierarchical_allreduce.hpp>
#include <gradcomp/mpi/native_allreduce.hpp>
#include <gradcomp/mpi/nonblocking_operation.hpp>
#include <gradcomp/mpi/oktopk_allreduce.hpp>
#include <gradcomp/mpi/oktopk_exchange.hpp>
#include <gradcomp/mpi/parameter_server.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/mpi/powersgd_allreduce.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/ring_trace.hpp>
#include <gradcomp/mpi/sparse_allgather.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
