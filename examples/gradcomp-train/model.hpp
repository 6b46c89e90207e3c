// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief This rank's replica of the model in gradcomp-train's synchronous training: the network,
//! the parameters the data-parallel exchange averages (with their layers' names and sizes), and
//! with --parallel hybrid (S2, hybrid.hpp) the fully connected layers that run model parallel
//! instead.
#pragma once

#include <gradcomp/cost/transport.hpp>
#include <gradcomp/mpi.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "hybrid.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! One parameter tensor of the data-parallel exchange: its name and its elements.
struct layer_info {
  std::string name;
  std::size_t numel = 0;
};

//! This rank's replica of the model. Not copyable; build it in place (build_replica): the hybrid
//! layers and the gradient hooks refer to it.
struct replica {
  network net;
  std::vector<torch::Tensor> params; //!< the data-parallel parameters, forward order
  std::vector<layer_info> layers;    //!< their names and elements
  std::vector<std::size_t> numel;    //!< their elements
  std::size_t total_numel = 0;
  //! --parallel hybrid: its own communicator (the model-parallel collectives run on this thread
  //! while the pipeline's communication thread exchanges gradients) and the model-parallel layers
  std::optional<gradcomp::mpi::communicator> hybrid_comm;
  std::optional<hybrid_parallelism> hybrid;
  std::vector<torch::Tensor> mp_params; //!< the model-parallel slices (not exchanged)

  replica() = default;
  replica(const replica&) = delete;
  replica& operator=(const replica&) = delete;
};

//! @brief Builds this rank's replica `r` of --model: seeded with --seed, rank 0's parameters
//! broadcast to every rank, and with --parallel hybrid the chosen FC layers split over the ranks
//! (their tensors leave the data-parallel parameters). Collective over `comm`.
//! @return "" or why a layer cannot be split (N < P: the same on every rank).
inline std::string
build_replica(replica& r, const train_options& o, const gradcomp::mpi::communicator& comm) {
  const int ranks = comm.size();
  torch::set_num_threads(o.threads);
  torch::manual_seed(o.seed);
  r.net = make_network(o.model);
  for (const auto& item : r.net.base->named_parameters()) {
    r.params.push_back(item.value());
    r.layers.push_back({item.key(), static_cast<std::size_t>(item.value().numel())});
  }
  broadcast_parameters(comm, r.params);
  // --parallel hybrid (S2, hybrid.hpp): the chosen FC layers run model parallel from here on;
  // their full tensors leave the data-parallel exchange and the optimizer
  gradcomp::cost::network hybrid_net;
  gradcomp::cost::fc_cost_options hybrid_cost;
  if (o.parallel == "hybrid" && o.mp_layers == "auto" && ranks > 1) {
    gradcomp::mpi::calibration_options co;
    co.max_bytes = std::size_t{1} << 22;
    co.repetitions = 3;
    hybrid_net = gradcomp::mpi::calibrate_ring_allreduce(comm, co).net;
    // the model-parallel side's fixed cost, measured (MPI's small-message collectives)
    hybrid_cost.model_parallel_fixed_seconds =
        gradcomp::mpi::calibrate_model_parallel_fixed_seconds(comm);
  }
  r.hybrid_comm.emplace(comm.native());
  try { // a layer that cannot be split (N < P) fails here, the same way on every rank
    r.hybrid.emplace(*r.hybrid_comm, r.net, o, hybrid_net, hybrid_cost);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (r.hybrid->active()) {
    std::vector<torch::Tensor> kept;
    std::vector<layer_info> kept_layers;
    for (std::size_t i = 0; i < r.params.size(); ++i) {
      if (!r.hybrid->owns(r.layers[i].name)) {
        kept.push_back(r.params[i]);
        kept_layers.push_back(r.layers[i]);
      }
    }
    r.params = std::move(kept);
    r.layers = std::move(kept_layers);
  }
  r.mp_params = r.hybrid->parameters();
  for (const layer_info& l : r.layers) {
    r.numel.push_back(l.numel);
    r.total_numel += l.numel;
  }
  return {};
}

//! Test accuracy and mean loss of replica `r` on `test`, the model-parallel slices gathered into
//! the full layers. Collective over `comm`.
inline evaluation
evaluate_replica(const gradcomp::mpi::communicator& comm, replica& r, const gx::dataset& test) {
  r.hybrid->begin_full_model();
  const evaluation e = evaluate(comm, r.net, test);
  r.hybrid->end_full_model();
  return e;
}

} // namespace gradcomp_train
