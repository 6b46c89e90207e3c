// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::hybrid::plan_with_overlap: which fully connected layers to run model parallel,
//! priced on the whole iteration (the data-parallel gradients' merge plan and their overlap with
//! backward, WFBP) instead of layer by layer. Standard library only.
#pragma once

#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/hybrid/plan.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>
#include <gradcomp/schedule/simulate.hpp>
#include <gradcomp/schedule/strategy.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace gradcomp::hybrid {

//! @brief A fully connected layer among the gradient tensors of a schedule::layer_profile.
struct fc_candidate {
  fc_layer layer;                   //!< its shape (K, N >= ranks to be splittable).
  std::vector<std::size_t> tensors; //!< forward indices of its gradients (weight, bias): >= 1.
};

//! @brief Options of plan_with_overlap.
struct overlap_plan_options {
  //! The merge strategy the data-parallel gradients are planned with (as the pipeline will).
  schedule::strategy strategy = schedule::strategy::optimal;
  schedule::plan_options plan;     //!< the strategy's options (size_threshold's bucket).
  cost::fc_cost_options fc;        //!< the model-parallel side's cost options.
  std::size_t max_candidates = 12; //!< 2^c iterations are simulated; more candidates throw.
};

//! @brief The predicted iteration of one set of model-parallel layers.
struct overlap_evaluation {
  std::vector<parallelism> layers;          //!< per candidate, in the candidates' order.
  double predicted_iteration_seconds = 0.0; //!< see plan_with_overlap.
  schedule::grouping groups; //!< the data-parallel tensors' merge plan (reduced profile).
};

//! @brief The result of plan_with_overlap.
struct overlap_plan {
  overlap_evaluation best;          //!< the fastest set (ties: fewer model-parallel layers).
  overlap_evaluation data_parallel; //!< every candidate data parallel (the baseline).
  //! Every set evaluated: 2^c entries, entry s has candidate i model parallel iff bit i of s.
  std::vector<overlap_evaluation> all;
};

//! @brief Decides which of `candidates` run model parallel (S2: column-parallel, N / P outputs
//! per rank) by simulating the whole iteration for every subset of them: the data-parallel
//! tensors keep their backward times and are merged and overlapped with backward as the
//! pipeline would (schedule::plan with o.strategy, then schedule::t_iter_seconds under `model`,
//! S1 eqs. 2-7), while each model-parallel layer leaves the profile and its collectives
//! (cost::fc_model_parallel_passes with local batch M on `ranks`, priced on `net`) join the
//! compute stream: the forward pass's on the forward time, the backward pass's (with the layer's
//! own backward compute, which is the same M K N multiply-adds per rank either way) before the
//! next data-parallel tensor's backward. Compute after the last data-parallel tensor's gradient
//! is ready still ends the iteration: the result is the larger of the simulated t_iter and the
//! end of compute.
//!
//! Why: S2's rule and hybrid::choose compare a layer's model-parallel collectives with its
//! gradient's allreduce as if that allreduce were on the critical path; under WFBP most of it
//! hides behind the backward of the layers below, so a layer that is cheaper model parallel in
//! isolation can make the iteration slower. Not modelled: the model-parallel collectives share
//! the links with data-parallel messages in flight at the same time (little in practice: the
//! forward collectives run before any gradient exists, and the FC layers' backward comes first).
//!
//! Complexity: 2^c plans and simulations of at most L tensors (c = candidates.size()).
//! Deterministic: the same inputs give the same choice on every rank.
//! @param profile    every gradient tensor, forward order, all data parallel (as profiled).
//! @param candidates the FC layers that may run model parallel, each with its tensors' indices.
//! @param batch_m    local batch M (samples per rank).
//! @param ranks      P >= 1.
//! @param net        the alpha-beta network the model-parallel collectives are priced on.
//! @param model      the merge planner's model of a data-parallel group's message (as the
//!                   pipeline's planner uses it).
//! @param o          the merge strategy, its options and the model-parallel cost options.
//! @throws std::invalid_argument if the profile or the model is invalid, a candidate has no
//! tensor, an index >= L or one shared with another candidate, N < ranks, K or N is 0, ranks < 1,
//! or there are more than o.max_candidates candidates.
[[nodiscard]] inline overlap_plan plan_with_overlap(const schedule::layer_profile& profile,
                                                    std::span<const fc_candidate> candidates,
                                                    std::size_t batch_m,
                                                    int ranks,
                                                    const cost::network& net,
                                                    const schedule::cost_model& model,
                                                    const overlap_plan_options& o = {}) {
  schedule::validate(profile);
  const std::size_t n_layers = profile.size();
  const std::size_t c = candidates.size();
  detail::require(c <= o.max_candidates && c < 32, "hybrid::plan_with_overlap: ", c,
                  " candidates, more than max_candidates = ", o.max_candidates,
                  " (2^c iterations are simulated)");
  detail::require(ranks >= 1, "hybrid::plan_with_overlap: ranks ", ranks, " < 1");
  // owner[i]: the candidate whose tensor forward index i is, or c (data parallel always)
  std::vector<std::size_t> owner(n_layers, c);
  std::vector<cost::fc_model_parallel_times> passes(c);
  for (std::size_t j = 0; j < c; ++j) {
    const fc_candidate& f = candidates[j];
    detail::require(!f.tensors.empty(), "hybrid::plan_with_overlap: candidate '", f.layer.name,
                    "' names no tensor");
    detail::require(f.layer.outputs_n >= static_cast<std::size_t>(ranks),
                    "hybrid::plan_with_overlap: candidate '", f.layer.name,
                    "' has N = ", f.layer.outputs_n, " outputs, fewer than the ", ranks,
                    " ranks it would be split over");
    for (const std::size_t t : f.tensors) {
      detail::require(t < n_layers, "hybrid::plan_with_overlap: candidate '", f.layer.name,
                      "' names tensor ", t, ", outside the profile's ", n_layers);
      detail::require(owner[t] == c, "hybrid::plan_with_overlap: tensor ", t,
                      " belongs to two candidates ('", candidates[owner[t]].layer.name, "', '",
                      f.layer.name, "')");
      owner[t] = j;
    }
    passes[j] = cost::fc_model_parallel_passes(
        static_cast<double>(batch_m), static_cast<double>(f.layer.inputs_k),
        static_cast<double>(f.layer.outputs_n), ranks, net, o.fc); // checks K, N and the options
  }

  const auto evaluate = [&](std::uint32_t set) {
    overlap_evaluation e;
    e.layers.resize(c, parallelism::data);
    schedule::layer_profile reduced;
    reduced.forward_seconds = profile.forward_seconds;
    for (std::size_t j = 0; j < c; ++j) {
      if ((set >> j) & 1U) {
        e.layers[j] = parallelism::model;
        reduced.forward_seconds += passes[j].forward_seconds;
      }
    }
    // backward order (forward index L-1 down to 0): compute of model-parallel tensors (and their
    // layer's backward collectives, once per layer) waits for the next data-parallel tensor
    std::vector<bool> collectives_added(c, false);
    double pending = 0.0;
    double compute = reduced.forward_seconds;
    std::vector<schedule::layer> kept; // backward order, reversed at the end
    for (std::size_t i = n_layers; i-- > 0;) {
      const schedule::layer& l = profile.layers[i];
      const std::size_t j = owner[i];
      double seconds = l.backward_seconds;
      if (j < c && ((set >> j) & 1U)) {
        if (!collectives_added[j]) {
          seconds += passes[j].backward_seconds;
          collectives_added[j] = true;
        }
        pending += seconds;
        compute += seconds;
        continue;
      }
      compute += seconds;
      kept.push_back({l.name, l.numel, seconds + pending});
      pending = 0.0;
    }
    if (kept.empty()) {
      e.predicted_iteration_seconds = compute;
      return e;
    }
    std::reverse(kept.begin(), kept.end());
    reduced.layers = std::move(kept);
    e.groups = schedule::plan(o.strategy, reduced, model, o.plan);
    e.predicted_iteration_seconds =
        std::max(schedule::t_iter_seconds(reduced, model, e.groups), compute);
    return e;
  };

  overlap_plan result;
  const std::uint32_t sets = std::uint32_t{1} << c;
  result.all.reserve(sets);
  for (std::uint32_t set = 0; set < sets; ++set) {
    result.all.push_back(evaluate(set));
  }
  result.data_parallel = result.all.front();
  // fastest; among equal times the fewest model-parallel layers, then the lowest set
  std::uint32_t best = 0;
  for (std::uint32_t set = 1; set < sets; ++set) {
    const double t = result.all[set].predicted_iteration_seconds;
    const double t_best = result.all[best].predicted_iteration_seconds;
    if (t < t_best || (t == t_best && std::popcount(set) < std::popcount(best))) {
      best = set;
    }
  }
  result.best = result.all[best];
  return result;
}

} // namespace gradcomp::hybrid
