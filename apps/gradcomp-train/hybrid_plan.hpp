// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --parallel hybrid --mp-layers auto: which fully connected layers run
//! model parallel, decided on the whole iteration (gradcomp::hybrid::plan_with_overlap: the
//! data-parallel gradients merged and overlapped with backward as the pipeline will run them)
//! from a profile of the model with every layer data parallel, a ring calibration and the
//! model-parallel layers' measured fixed cost. docs/hybrid.md.
#pragma once

#include <gradcomp/hybrid/overlap_plan.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/calibrate_column_parallel.hpp>
#include <gradcomp/schedule.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybrid.hpp"
#include "merge_plan.hpp"
#include "model.hpp"
#include "setup.hpp"

namespace gradcomp_train {

//! @brief With --parallel hybrid --mp-layers auto: calibrates the ring and the model-parallel
//! fixed cost, profiles forward and backward with every layer data parallel (hooks attached for
//! the profile and removed after), prices every set of splittable FC layers on the whole
//! iteration with rank 0's profile (broadcast, so that every rank decides the same), and splits
//! the fastest set (split_layers). Without profile iterations or with one rank: hybrid::choose
//! per layer (decide_per_layer). Does nothing otherwise. Collective.
//! @return seconds spent (training time: calibration, profile and plan; also in the plan's json).
inline double plan_hybrid(sync_setup& s) {
  const train_options& o = s.o;
  if (o.parallel != "hybrid" || o.mp_layers != "auto") {
    return 0.0;
  }
  const auto t0 = clock_type::now();
  replica& r = s.model;
  gradcomp::cost::network net;
  gradcomp::cost::fc_cost_options fc_cost;
  if (s.ranks > 1) {
    net = calibrate_network(s, /*under_load=*/false); // the same on every rank
    fc_cost.model_parallel_fixed_seconds =
        gradcomp::mpi::calibrate_model_parallel_fixed_seconds(s.comm);
  }
  hybrid_decision d = decide_per_layer(r.net, o, s.ranks, net, fc_cost);
  if (s.ranks > 1 && o.profile_iterations > 0) {
    s.hooks.attach(r.params, false);
    backward_profile profile = profile_backward(s);
    s.hooks.detach();
    // rank 0's profile on every rank (as the merge plan's agreement does)
    std::vector<double> shared = profile.backward_seconds;
    shared.push_back(profile.forward_seconds);
    MPI_Request request = MPI_REQUEST_NULL;
    gradcomp::mpi::check(MPI_Ibcast(shared.data(), static_cast<int>(shared.size()), MPI_DOUBLE, 0,
                                    s.comm.native(), &request),
                         "MPI_Ibcast");
    gradcomp::mpi::wait(request);

    gradcomp::schedule::layer_profile tensors;
    tensors.forward_seconds = shared.back();
    for (std::size_t i = 0; i < r.layers.size(); ++i) {
      tensors.layers.push_back({r.layers[i].name, r.layers[i].numel, shared[i]});
    }
    std::vector<gradcomp::hybrid::fc_candidate> candidates;
    std::vector<std::size_t> entry; // candidate -> index into d.layers
    for (std::size_t j = 0; j < d.layers.size(); ++j) {
      const nlohmann::json& layer = d.layers[j];
      gradcomp::hybrid::fc_candidate c{{layer["layer"].get<std::string>(),
                                        layer["inputs_k"].get<std::size_t>(),
                                        layer["outputs_n"].get<std::size_t>()},
                                       {}};
      if (c.layer.outputs_n < static_cast<std::size_t>(s.ranks)) {
        continue; // auto never splits a layer with fewer outputs than ranks
      }
      for (std::size_t i = 0; i < r.layers.size(); ++i) {
        if (r.layers[i].name.rfind(c.layer.name + ".", 0) == 0) {
          c.tensors.push_back(i);
        }
      }
      candidates.push_back(std::move(c));
      entry.push_back(j);
    }
    gradcomp::hybrid::overlap_plan_options po;
    po.strategy = gradcomp::schedule::strategy_from_name(o.merge).value_or(
        gradcomp::schedule::strategy::size_threshold);
    po.plan.bucket_bytes = static_cast<std::uint64_t>(o.bucket_mib * 1024 * 1024);
    po.fc = fc_cost;
    const gradcomp::hybrid::overlap_plan plan = gradcomp::hybrid::plan_with_overlap(
        tensors, candidates, static_cast<std::size_t>(o.batch_size), s.ranks, net,
        planner_cost_model(s, net), po);
    d.model_parallel.clear();
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const bool model = plan.best.layers[c] == gradcomp::hybrid::parallelism::model;
      nlohmann::json& layer = d.layers[entry[c]];
      layer["by_iteration"] = gradcomp::hybrid::name(plan.best.layers[c]);
      layer["parallelism"] = model ? "model" : "data";
      if (model) {
        d.model_parallel.push_back(candidates[c].layer.name);
      }
    }
    for (nlohmann::json& layer : d.layers) {
      if (!layer.contains("by_iteration")) {
        layer["parallelism"] = "data";
      }
    }
    d.plan = {{"predicted_iteration_seconds", plan.best.predicted_iteration_seconds},
              {"data_parallel_predicted_iteration_seconds",
               plan.data_parallel.predicted_iteration_seconds},
              {"alpha_seconds", net.alpha_seconds},
              {"beta_seconds_per_byte", net.beta_seconds_per_byte},
              {"model_parallel_fixed_seconds", fc_cost.model_parallel_fixed_seconds}};
  }
  std::string text;
  for (const nlohmann::json& layer : d.layers) {
    text += (text.empty() ? "" : ", ") + layer["layer"].get<std::string>() + " " +
            layer["parallelism"].get<std::string>();
  }
  if (d.plan.contains("predicted_iteration_seconds")) {
    text += gradcomp_tools::format(
        "; predicted iteration %.1f ms (every layer data parallel: %.1f ms)",
        1e3 * d.plan["predicted_iteration_seconds"].get<double>(),
        1e3 * d.plan["data_parallel_predicted_iteration_seconds"].get<double>());
  }
  const double seconds = seconds_since(t0);
  d.plan["seconds"] = seconds;
  split_layers(r, std::move(d));
  s.say(gradcomp_tools::format("hybrid plan (%.2f s to calibrate, profile and plan): %s", seconds,
                               text.c_str()));
  return seconds;
}

} // namespace gradcomp_train
