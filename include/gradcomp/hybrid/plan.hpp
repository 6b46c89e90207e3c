// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::hybrid: per fully connected layer, data or model parallelism (S2), from S2's
//! volume rule and from the alpha-beta cost of both sides. Standard library only.
#pragma once

#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/cost/volume.hpp>
#include <gradcomp/error.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gradcomp::hybrid {

//! @brief How one layer's work is split over the ranks.
enum class parallelism {
  data,  //!< every rank holds the whole layer; gradients are averaged (allreduce).
  model, //!< each rank holds a slice of the outputs (mpi::column_parallel_linear).
};

//! "data" or "model". O(1).
[[nodiscard]] constexpr std::string_view name(parallelism p) noexcept {
  return p == parallelism::data ? "data" : "model";
}

//! @brief A fully connected layer: K inputs, N outputs (weights N x K, bias N).
struct fc_layer {
  std::string name;          //!< for tables and messages.
  std::size_t inputs_k = 0;  //!< K, >= 1.
  std::size_t outputs_n = 0; //!< N, >= 1.
};

//! @brief VGG-16's three fully connected layers (Simonyan and Zisserman 2015; S2's FC1-FC3 with
//! 102.76 M, 16.78 M and 4.10 M weights): 25088 -> 4096, 4096 -> 4096, 4096 -> 1000.
[[nodiscard]] inline std::vector<fc_layer> vgg16_fc_layers() {
  return {{"fc1", 25088, 4096}, {"fc2", 4096, 4096}, {"fc3", 4096, 1000}};
}

//! @brief The decision for one layer at one (batch, ranks) point and what it rests on.
struct fc_choice {
  parallelism by_volume = parallelism::data; //!< S2's rule (cost::fc_prefer_model_parallel).
  parallelism by_cost = parallelism::data;   //!< the cheaper side under the alpha-beta model.
  double data_values = 0.0;                  //!< S2: K N + N (cost::fc_data_parallel_values).
  double model_values = 0.0;  //!< S2: 3 M K P + 2 M N P (cost::fc_model_parallel_values).
  double data_seconds = 0.0;  //!< cost::fc_data_parallel_seconds.
  double model_seconds = 0.0; //!< cost::fc_model_parallel_seconds.
};

//! @brief Decides data or model parallelism for `layer` with local batch M on P ranks: by S2's
//! volume rule (model parallel when M P < (K + 1) N / (3 K + 2 N)) and by the alpha-beta cost of
//! both sides on `net` (model parallel when strictly cheaper; ties go to data parallelism, which
//! needs no change to the model). Neither side checks N >= P, which splitting needs. The cost
//! side counts the latency of the model-parallel
//! collectives and the factor 2 of a ring allreduce's bandwidth term that the volume rule leaves
//! out, so the two can differ near the boundary. O(1).
//! @throws std::invalid_argument if K or N is 0, or ranks < 1.
[[nodiscard]] inline fc_choice choose(const fc_layer& layer,
                                      std::size_t batch_m,
                                      int ranks,
                                      const cost::network& net,
                                      const cost::fc_cost_options& o = {}) {
  detail::require(layer.inputs_k >= 1 && layer.outputs_n >= 1, "hybrid::choose: layer '",
                  layer.name, "' has K = ", layer.inputs_k, ", N = ", layer.outputs_n,
                  " (both must be >= 1)");
  const auto m = static_cast<double>(batch_m);
  const auto k = static_cast<double>(layer.inputs_k);
  const auto n = static_cast<double>(layer.outputs_n);
  const auto p = static_cast<double>(ranks);
  fc_choice c;
  c.data_seconds = cost::fc_data_parallel_seconds(k, n, ranks, net, o);
  c.model_seconds = cost::fc_model_parallel_seconds(m, k, n, ranks, net, o);
  c.data_values = cost::fc_data_parallel_values(k, n);
  c.model_values = cost::fc_model_parallel_values(m, k, n, p);
  c.by_volume = cost::fc_prefer_model_parallel(m, k, n, p) ? parallelism::model : parallelism::data;
  c.by_cost = c.model_seconds < c.data_seconds ? parallelism::model : parallelism::data;
  return c;
}

//! @brief choose() for every layer of `layers` (same order). O(layers).
//! @throws std::invalid_argument as choose().
[[nodiscard]] inline std::vector<fc_choice> plan(std::span<const fc_layer> layers,
                                                 std::size_t batch_m,
                                                 int ranks,
                                                 const cost::network& net,
                                                 const cost::fc_cost_options& o = {}) {
  std::vector<fc_choice> out;
  out.reserve(layers.size());
  for (const fc_layer& layer : layers) {
    out.push_back(choose(layer, batch_m, ranks, net, o));
  }
  return out;
}

} // namespace gradcomp::hybrid
