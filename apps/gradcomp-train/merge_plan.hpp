// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's merge plan: which layers' gradients travel as one message
//! (gradcomp::schedule, --merge), planned from a profile of the first batches' forward and
//! backward passes and an alpha-beta model of the transport calibrated on this network (under
//! the load of training: --calibrate-under-load), and agreed by every rank. Transport coded plans
//! too: its pipeline exchanges a group once every part's layers of it are ready; the profile is
//! one part's backward, and the planner's cost is the coded exchange of transport_cost.
#pragma once

#include <gradcomp/coded.hpp>
#include <gradcomp/cost/transport.hpp>
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/agreed_grouping.hpp>
#include <gradcomp/mpi/detail/split.hpp>
#include <gradcomp/pipeline.hpp>
#include <gradcomp/schedule.hpp>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/tool_support.hpp"
#include "exchange.hpp"
#include "hooks.hpp"
#include "setup.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! Seconds to exchange one group message of `bytes` on the transport, from the calibrated
//! network (transport hierarchical: `intra_group`, the network inside a group, when calibrated):
//! the library's model of that transport (gradcomp::cost::message_cost in
//! cost/transport.hpp) under gradcomp-train's transport names and options. Transport coded: the
//! coded exchange of its variant (coded::coded_exchange_load, point to point, full-duplex links)
//! of bytes / 4 elements per part, the dense message's size (a sparse part's union is not known
//! before the exchange).
inline std::function<double(std::uint64_t)>
transport_cost(const transport_settings& transport,
               int ranks,
               const gradcomp::cost::network& net,
               std::optional<gradcomp::cost::network> intra_group = std::nullopt) {
  if (transport.name == "coded") {
    const gradcomp::mpi::coded_allreduce_options o = coded_options(transport);
    return [o, ranks, net](std::uint64_t bytes) {
      namespace gc = gradcomp::coded;
      const auto d = static_cast<std::size_t>((bytes + 3) / 4);
      return gc::exchange_seconds(gc::coded_exchange_load(ranks, o.redundancy, d, 4,
                                                          gc::delivery::point_to_point, o.variant),
                                  net, gc::link_model::full_duplex);
    };
  }
  using kind = gradcomp::cost::transport_kind;
  static const std::pair<const char*, kind> kinds[] = {
      {"allreduce", kind::native_allreduce},
      {"ring", kind::ring_allreduce},
      {"allgather", kind::sparse_allgather},
      {"ps", kind::parameter_server},
      {"hierarchical", kind::hierarchical_allreduce},
      {"none", kind::none},
      {"gtopk", kind::gtopk},
      {"oktopk", kind::oktopk}};
  for (const auto& [name, k] : kinds) {
    if (transport.name == name) {
      return gradcomp::cost::message_cost(k, ranks, net,
                                          {.servers = transport.servers,
                                           .group_size = transport.group_size,
                                           .intra_group = intra_group});
    }
  }
  throw std::invalid_argument("unknown transport '" + transport.name + "'");
}

//! The merge planner's model of a group's message on `transport` over the calibrated `net`: its
//! seconds (transport_cost) and size (fp32, pairs at --density for the sparse methods, or the
//! quantizers' bits). `after_backward`: the network calibrated without backward's load, which
//! prices the messages once backward has ended (schedule::cost_model's
//! communication_seconds_after_backward); nothing: `net` throughout.
inline gradcomp::schedule::cost_model
planner_cost_model(const sync_setup& s,
                   const gradcomp::cost::network& net,
                   std::optional<gradcomp::cost::network> intra_group = std::nullopt,
                   std::optional<gradcomp::cost::network> after_backward = std::nullopt) {
  gradcomp::schedule::cost_model model;
  model.communication_seconds = transport_cost(s.o.transport, s.ranks, net, intra_group);
  if (after_backward) {
    model.communication_seconds_after_backward =
        transport_cost(s.o.transport, s.ranks, *after_backward, intra_group);
  }
  if (is_sparse_method(s.o.method.name)) {
    model.message.density = s.o.method.compressor.density;
  } else if (is_quantizer_method(s.o.method.name)) {
    model.message.quantized_bits = quantizer_bits(s.o.method);
    model.message.quantized_bucket_elements = quantizer_bucket_elements(s.o.method);
  }
  return model;
}

//! The medians of the profiled forward and backward passes (all 0 without profile iterations).
struct backward_profile {
  std::vector<double> backward_seconds; //!< each layer's backward time, forward order
  double forward_seconds = 0;
};

//! @brief Profiles forward and backward of the first --profile-iterations batches with a scratch
//! compressor per layer in the hooks (no exchange, no step), as in training. Transport coded
//! profiles one part's backward: B P / C(P, R) samples.
inline backward_profile profile_backward(sync_setup& s) {
  const train_options& o = s.o;
  std::vector<torch::Tensor>& params = s.model.params;
  backward_profile profile{std::vector<double>(params.size(), 0.0), 0.0};
  if (o.profile_iterations <= 0) {
    return profile;
  }
  std::vector<std::vector<double>> per_layer(params.size());
  std::vector<double> forwards;
  with_method(o.method, [&](auto prototype) {
    using C = decltype(prototype);
    std::vector<gradcomp::error_feedback<C>> scratch;
    for (const std::size_t n : s.model.numel) {
      scratch.emplace_back(n, prototype, s.mc);
    }
    gradcomp::sparse_message m;
    torch::Tensor keep;
    s.hooks.on_gradient = [&](std::size_t i, const torch::Tensor& g) {
      scratch[i].compress(grad_span(g, keep), m);
    };
    const std::vector<std::int64_t> first = s.data.shard(s.ranks, s.rank, o.seed, 0);
    // transport coded profiles one part's backward: B P / C(P, R) samples
    const std::int64_t profile_batch =
        s.coded ? std::max<std::int64_t>(1, static_cast<std::int64_t>(o.batch_size) * s.ranks /
                                                static_cast<std::int64_t>(s.coded->part_count()))
                : o.batch_size;
    for (int it = 0; it < o.profile_iterations; ++it) {
      const auto [full_x, full_y] = s.data.batch(first, (it * o.batch_size) % s.data.per_rank);
      const std::int64_t rows = std::min<std::int64_t>(profile_batch, full_x.size(0));
      const torch::Tensor x = full_x.narrow(0, 0, rows);
      const torch::Tensor y = full_y.narrow(0, 0, rows);
      clear_gradients(params);
      const auto t0 = clock_type::now();
      const torch::Tensor loss =
          torch::nn::functional::cross_entropy(s.model.net.module.forward(x), y);
      forwards.push_back(seconds_since(t0));
      s.hooks.backward_start = clock_type::now();
      loss.backward();
      // each layer's backward time in the planner's order (backward order: the last
      // forward layer first): from the latest ready event of the layers before it in that
      // order to its own, so that the model's cumulative sums are the running maximum of
      // the observed ready times. A layer whose hook fires after a later one's (a bias
      // reported after its weight) is then ready with it, not earlier: the time order
      // alone would let the planner merge a layer with a group it cannot join in time
      double latest = 0;
      for (std::size_t k = params.size(); k-- > 0;) {
        per_layer[k].push_back(std::max(0.0, s.hooks.ready_at[k] - latest));
        latest = std::max(latest, s.hooks.ready_at[k]);
      }
    }
  });
  for (std::size_t i = 0; i < params.size(); ++i) {
    profile.backward_seconds[i] = median(per_layer[i]);
  }
  profile.forward_seconds = median(forwards);
  clear_gradients(params);
  return profile;
}

//! The short ring allreduce sweep of gradcomp-train's calibrations (4 KiB to 4 MiB, 3
//! repetitions) with ring options `co.transport`, over `comm`: alpha and beta, both at least 0.
//! Collective over `comm`.
inline gradcomp::cost::network ring_sweep(const gradcomp::mpi::communicator& comm,
                                          gradcomp::mpi::calibration_options co = {}) {
  co.max_bytes = std::size_t{1} << 22;
  co.repetitions = 3;
  gradcomp::cost::network net = gradcomp::mpi::calibrate_ring_allreduce(comm, co).net;
  net.alpha_seconds = std::max(0.0, net.alpha_seconds);
  net.beta_seconds_per_byte = std::max(0.0, net.beta_seconds_per_byte);
  return net;
}

//! @brief The network's alpha and beta from a short ring allreduce sweep (ring_sweep; the ring
//! as training runs it with transport ring or hierarchical: wait policy, segments).
//! `under_load`: this rank's forward and backward passes run in a second thread meanwhile (the
//! exchange overlaps backward in training, and on shared cores both slow down); a latency then
//! costs milliseconds, so that sweep lines the ranks up by a barrier and starts at 64 KiB
//! (gradient messages' sizes; a 64 KiB ring is latency-bound there too). Collective.
inline gradcomp::cost::network calibrate_network(sync_setup& s, bool under_load) {
  const train_options& o = s.o;
  gradcomp::cost::network net_model;
  gradcomp::mpi::calibration_options co;
  // the ring as training runs it (wait policy, segments); transport hierarchical's ring between
  // groups too (the library's default wait policy, under load, measured beta 4.5x the link's)
  if (o.transport.name == "ring" || o.transport.name == "hierarchical") {
    co.transport = ring_options(o.transport);
    co.transport.trace = nullptr;
    co.transport.check_lengths = true;
  }
  if (under_load) {
    co.line_up = gradcomp::mpi::calibration_line_up::barrier;
    co.min_bytes = std::size_t{1} << 16;
  }
  // under load: this rank's forward and backward passes run in a second thread while the
  // ring sweep measures (--calibrate-under-load; the exchange overlaps backward in training,
  // and on shared cores both slow down). The jthread stops and joins when the block ends,
  // an exception included
  {
    std::jthread load;
    if (under_load) {
      s.hooks.on_gradient = [](std::size_t, const torch::Tensor&) {};
      const auto [x, y] = s.data.batch(s.data.shard(s.ranks, s.rank, o.seed, 0), 0);
      load = std::jthread([&, x = x, y = y](const std::stop_token& stop) {
        while (!stop.stop_requested()) {
          clear_gradients(s.model.params);
          torch::nn::functional::cross_entropy(s.model.net.module.forward(x), y).backward();
        }
      });
    }
    net_model = ring_sweep(s.comm, co);
  }
  clear_gradients(s.model.params);
  return net_model;
}

//! @brief Transport hierarchical with groups of 2 or more ranks: the network inside a group,
//! from ring_sweep (the library's default ring) on a communicator of this rank's group (ranks r /
//! g; every group at once), so that the planner does not price the fast links inside a host at the
//! links between hosts; nothing otherwise. Each group gets its own (rank 0 plans with its
//! group's). Collective over s.comm.
inline std::optional<gradcomp::cost::network> calibrate_intra_group(sync_setup& s) {
  const int g = s.o.transport.group_size;
  if (s.o.transport.name != "hierarchical" || g < 2 || g > s.ranks) {
    return std::nullopt;
  }
  // the same groups as the transport's (gradcomp::mpi::hierarchical_allreduce splits by r / g)
  const std::optional<gradcomp::mpi::communicator> group =
      gradcomp::mpi::detail::split(s.comm, s.rank / g, s.rank);
  return ring_sweep(*group);
}

//! The agreed merge plan and what the report says of it.
struct merge_plan {
  gradcomp::schedule::grouping groups; //!< the layers of each message, backward order
  nlohmann::json info;                 //!< the report's "plan"
  std::string text;                    //!< the groups' layer names ("a+b | c")
  double seconds = 0;                  //!< time to profile, calibrate and plan (training time)
  //! The planner the groups came from (rank 0's profile and calibration on rank 0; replan_after
  //! = --replan-after): the pipeline re-plans with it, the report predicts with it.
  gradcomp::pipeline_policy::planned_grouping planner;
};

//! The report's description of `groups` of `layers`: per group its layers' names and elements
//! (JSON), and the text "a+b | c" (backward order).
inline std::pair<nlohmann::json, std::string>
describe_groups(const std::vector<layer_info>& layers, const gradcomp::schedule::grouping& groups) {
  nlohmann::json groups_json = nlohmann::json::array();
  std::string all;
  for (const auto& g : groups) {
    nlohmann::json names = nlohmann::json::array();
    std::size_t elements = 0;
    std::string text;
    for (std::size_t p = g.begin; p < g.end; ++p) {
      const std::size_t i = gradcomp::schedule::forward_index(p, layers.size());
      names.push_back(layers[i].name);
      elements += layers[i].numel;
      text += (text.empty() ? "" : "+") + layers[i].name;
    }
    groups_json.push_back({{"layers", names}, {"elements", elements}});
    all += (all.empty() ? "" : " | ") + text;
  }
  return {groups_json, all};
}

//! @brief Plans the merge of --merge from the profile and (for the strategies that price
//! messages) the calibrated network model, agreed by every rank; reports it on stderr.
//! Collective.
inline merge_plan plan_merge(sync_setup& s) {
  using gradcomp::schedule::strategy;
  const train_options& o = s.o;
  const auto t_plan = clock_type::now();
  const std::optional<strategy> merge = gradcomp::schedule::strategy_from_name(o.merge);
  merge_plan plan;
  {
    const backward_profile profile = profile_backward(s);
    const std::vector<double>& backward_median = profile.backward_seconds;
    const double forward_median = profile.forward_seconds;
    // calibrate alpha and beta on this network (a short ring allreduce sweep)
    gradcomp::cost::network net_model;
    const bool calibrated = s.ranks > 1 && o.transport.name != "none" && merge &&
                            *merge != strategy::per_layer && *merge != strategy::single &&
                            *merge != strategy::size_threshold;
    // calibrate under the load training puts on the cores (not with model-parallel layers,
    // whose forward runs collectives of its own)
    const bool under_load = calibrated && o.calibrate_under_load && !s.model.hybrid->active();
    std::optional<gradcomp::cost::network> intra_group;
    // under load, a second sweep without it prices what is sent after backward: on cores that
    // compute and communicate, those messages run several times faster (cost_model's
    // communication_seconds_after_backward); without it the planner saw a ring after backward
    // as slow as one beside it and chose between two-group plans by noise
    std::optional<gradcomp::cost::network> after_backward;
    if (calibrated) {
      net_model = calibrate_network(s, under_load);
      if (under_load) {
        after_backward = calibrate_network(s, false);
      }
      intra_group = calibrate_intra_group(s);
    }
    gradcomp::pipeline_policy::planned_grouping planner;
    planner.strategy = merge.value_or(strategy::size_threshold);
    planner.model = planner_cost_model(s, net_model, intra_group, after_backward);
    planner.backward_seconds = backward_median;
    planner.forward_seconds = forward_median;
    if (s.coded) {
      // every part but the last runs its forward and backward before the last part's backward,
      // which alone overlaps the exchange: they add to the forward time before it
      const auto earlier = static_cast<double>(s.coded->parts_per_rank() - 1);
      planner.forward_seconds +=
          earlier *
          (forward_median + std::accumulate(backward_median.begin(), backward_median.end(), 0.0));
    }
    planner.options.bucket_bytes = static_cast<std::uint64_t>(o.bucket_mib * 1024 * 1024);
    planner.replan_after = static_cast<std::size_t>(o.replan_after);
    plan.planner = planner;
    gradcomp::mpi::agreed_grouping<gradcomp::pipeline_policy::planned_grouping> agreed{&s.comm,
                                                                                       planner};
    plan.groups = agreed.groups(s.model.numel);
    plan.info = {{"strategy", o.merge},
                 {"alpha_seconds", net_model.alpha_seconds},
                 {"beta_seconds_per_byte", net_model.beta_seconds_per_byte},
                 {"forward_seconds", forward_median},
                 {"backward_seconds_rank0", backward_median},
                 {"profile_iterations", o.profile_iterations},
                 {"calibrated_under_load", under_load}};
    if (after_backward) {
      plan.info["after_backward_alpha_seconds"] = after_backward->alpha_seconds;
      plan.info["after_backward_beta_seconds_per_byte"] = after_backward->beta_seconds_per_byte;
    }
    if (intra_group) {
      plan.info["intra_group_alpha_seconds"] = intra_group->alpha_seconds;
      plan.info["intra_group_beta_seconds_per_byte"] = intra_group->beta_seconds_per_byte;
    }
    if (calibrated) { // the plan's predicted iteration (S1 eqs. 2-7, rank 0's profile)
      plan.info["predicted_iteration_seconds"] =
          planner.predicted_iteration_seconds(s.model.numel, plan.groups);
    }
  }
  std::tie(plan.info["groups"], plan.text) = describe_groups(s.model.layers, plan.groups);
  plan.seconds = seconds_since(t_plan);
  s.say(gradcomp_tools::format(
      "merge plan (%s, %zu groups, backward order, %.2f s to profile and plan): %s",
      o.merge.c_str(), plan.groups.size(), plan.seconds, plan.text.c_str()));
  return plan;
}

} // namespace gradcomp_train
