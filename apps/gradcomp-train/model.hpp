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

//! @brief Runs the layers `d` names model parallel in replica `r` (built by build_replica with
//! none split yet): their full tensors leave the data-parallel parameters (and so the exchange
//! and the optimizer), their slices become r.mp_params. Collective over r.hybrid_comm.
inline void split_layers(replica& r, hybrid_decision d) {
  r.hybrid.emplace(*r.hybrid_comm, r.net, std::move(d));
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
  r.numel.clear();
  r.total_numel = 0;
  for (const layer_info& l : r.layers) {
    r.numel.push_back(l.numel);
    r.total_numel += l.numel;
  }
}

//! @brief Builds this rank's replica `r` of --model: seeded with --seed, rank 0's parameters
//! broadcast to every rank, and with --parallel hybrid and a --mp-layers list those FC layers
//! split over the ranks (split_layers; with auto, plan_hybrid splits them after the profile).
//! Collective over `comm`.
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
  // --parallel hybrid (S2, hybrid.hpp): a --mp-layers list is split here; auto waits for the
  // profile (plan_hybrid), which needs the whole model data parallel first
  r.hybrid_comm.emplace(comm.native());
  hybrid_decision d;
  if (o.parallel == "hybrid" && o.mp_layers != "auto") {
    try { // a layer that cannot be split (N < P) fails here, the same way on every rank
      d = decide_per_layer(r.net, o, ranks, {});
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  }
  split_layers(r, std::move(d));
  return {};
}

//! Test accuracy and mean loss of replica `r` on `test`, the model-parallel slices gathered into
//! the full layers; `stages` and `target` as evaluate()'s. Collective over `comm`.
inline evaluation evaluate_replica(const gradcomp::mpi::communicator& comm,
                                   replica& r,
                                   const gx::dataset& test,
                                   int stages = 1,
                                   double target = 0) {
  r.hybrid->begin_full_model();
  const evaluation e = evaluate(comm, r.net, test, stages, target);
  r.hybrid->end_full_model();
  return e;
}

} // namespace gradcomp_train
