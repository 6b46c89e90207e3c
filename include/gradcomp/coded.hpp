// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's coded multicast pieces (CSSGD, S3): the placement of
//! batch parts on ranks and the multicast groups (coded/placement.hpp), exact fixed-point and
//! XOR coding of packets (coded/exact_coding.hpp), the per-rank loads of the exchanges
//! (coded/exchange_load.hpp), the cost model with the choice of the redundancy r
//! (coded/cost.hpp), and the sparse (top-k) form's union of index lists and restriction of a
//! part to the union (coded/sparse.hpp). Needs only the C++20 standard library and gradcomp's
//! core (never includes MPI or CUDA headers). The MPI exchanges that use them are
//! gradcomp::mpi::coded_allreduce (<gradcomp/mpi/coded_exchange.hpp>) and
//! gradcomp::mpi::coded_sparse_allreduce (<gradcomp/mpi/coded_sparse.hpp>), component
//! gradcomp::mpi.
#pragma once

#include <gradcomp/coded/cost.hpp>
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/coded/exchange_load.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/coded/sparse.hpp>
