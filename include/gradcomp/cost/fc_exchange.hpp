// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::fc_exchange: how a model-parallel fully connected layer exchanges outputs and
//! output gradients, and the collectives and values each exchange costs (priced by the cost
//! model in gradcomp/cost/hybrid.hpp, run by gradcomp::mpi::column_parallel_linear). Standard
//! library only.
#pragma once

namespace gradcomp {

//! @brief How a model-parallel FC layer (K inputs, N outputs over P ranks, local batch M)
//! exchanges outputs and output gradients.
enum class fc_exchange {
  //! Forward: an all-to-all of output slices, each rank receiving only its own samples' N
  //! outputs; backward: an all-to-all of output-gradient columns; the inputs gathered in the
  //! forward pass are kept for the backward pass (P M K floats of memory). 4 data collectives,
  //! 2 P M K + M N + P M n_r values in S2's accounting.
  all_to_all,
  //! S2 as published: forward gathers every rank's output slice (each rank then reads its own
  //! rows), backward gathers every rank's output gradient and gathers the inputs again.
  //! 5 data collectives; exactly S2's 3 M K P + 2 M N P values.
  s2_allgather,
};

} // namespace gradcomp
