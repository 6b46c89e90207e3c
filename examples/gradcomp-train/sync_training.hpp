// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --sync sync: data-parallel training in which every rank trains on its
//! own shard and the gradients are averaged through a gradcomp pipeline each iteration (or, with
//! --transport coded, CSSGD's coded exchange over the parts of the global batch).
#pragma once

#include <gradcomp/coded.hpp>
#include <gradcomp/cost/transport.hpp>
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/pipeline.hpp>
#include <gradcomp/pipeline/agree_grouping.hpp>
#include <gradcomp/pipeline/mpi_exchange.hpp>
#include <gradcomp/schedule.hpp>
#include <gradcomp/tensor/torch.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "../common/sample_order.hpp"
#include "../common/tool_support.hpp"
#include "exchange.hpp"
#include "fidelity.hpp"
#include "hybrid.hpp"
#include "large_batch.hpp"
#include "report.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

namespace gt = gradcomp_train;
using gradcomp::schedule::strategy;
using gradcomp_tools::format;

// ---- data sharding ------------------------------------------------------------------------------

// The epoch's order of the samples and this rank's shard of it (DistributedSampler's layout)
// live in examples/common/sample_order.hpp, which scripts/ddp_train.py reproduces exactly.
using gx::epoch_order;
using gx::shard;

// Transport coded: the samples of iteration i of all ranks together (each rank's batch of `len`
// samples from shard position `begin` = i B), in position order: positions [begin P,
// (begin + len) P) of the permutation `order` padded by wrapping. The same samples as the
// union of the P shard batches of the other transports; every rank computes it alone.
inline std::vector<std::int64_t> global_batch(const std::vector<std::int64_t>& order,
                                              int ranks,
                                              std::int64_t begin,
                                              std::int64_t len) {
  const auto n = static_cast<std::int64_t>(order.size());
  std::vector<std::int64_t> samples;
  samples.reserve(static_cast<std::size_t>(len * ranks));
  for (std::int64_t p = begin * ranks; p < (begin + len) * ranks; ++p) {
    samples.push_back(order[static_cast<std::size_t>(p % n)]);
  }
  return samples;
}

// ---- planning -------------------------------------------------------------------------------

struct layer_info {
  std::string name;
  std::size_t numel = 0;
};

// Seconds to exchange one group message of `bytes` on the transport, from the calibrated
// network: the library's model of that transport (gradcomp::cost::message_cost in
// cost/transport.hpp) under gradcomp-train's transport names and options. Transport coded: the
// coded exchange of its variant (coded::coded_exchange_load, point to point, full-duplex links)
// of bytes / 4 elements per part, the dense message's size (a sparse part's union is not known
// before the exchange).
inline std::function<double(std::uint64_t)> transport_cost(const gt::transport_settings& transport,
                                                           int ranks,
                                                           const gradcomp::cost::network& net) {
  if (transport.name == "coded") {
    const gradcomp::mpi::coded_allreduce_options o = gt::coded_options(transport);
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
      {"allreduce", kind::native_allreduce},          {"ring", kind::ring_allreduce},
      {"allgather", kind::sparse_allgather},          {"ps", kind::parameter_server},
      {"hierarchical", kind::hierarchical_allreduce}, {"none", kind::none}};
  for (const auto& [name, k] : kinds) {
    if (transport.name == name) {
      return gradcomp::cost::message_cost(
          k, ranks, net, {.servers = transport.servers, .group_size = transport.group_size});
    }
  }
  throw std::invalid_argument("unknown transport '" + transport.name + "'");
}

// ---- statistics -------------------------------------------------------------------------------

struct sums {
  double iteration = 0, forward = 0, backward = 0, compress = 0, finish_wait = 0, apply = 0,
         communicate = 0, communicate_cpu = 0, step = 0;
  double bytes_sent = 0, bytes_received = 0, selected = 0, numel = 0;
  std::size_t fallbacks = 0, compress_calls = 0;
  std::int64_t iterations = 0;
};

inline bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

// ---- training -------------------------------------------------------------------------------

inline int train_sync(const train_options& o, const gradcomp::mpi::communicator& comm) {
  const int rank = comm.rank();
  const int ranks = comm.size();
  const bool root = rank == 0;
  const auto say = [&](const std::string& text) {
    if (root) {
      std::fprintf(stderr, "gradcomp-train: %s\n", text.c_str());
    }
  };

  // --- input checks, agreed by every rank before any training
  std::string problem;
  gx::dataset train_set, test_set;
  problem = gt::load_data(o, ranks, "ranks", train_set, test_set);
  // transport coded: 1 <= R < P; building a coded exchange (local) also checks the options
  // and the placement's limits. `coded` is the placement: which parts this rank computes.
  const bool coded_transport = o.transport.name == "coded";
  std::optional<gradcomp::coded::placement> coded;
  if (problem.empty() && coded_transport) {
    const int r = o.transport.redundancy;
    if (r < 1 || r >= ranks) {
      problem = format(
          "--redundancy %d is outside [1, P) = [1, %d): --transport coded needs 1 <= R < P%s", r,
          ranks, ranks == 1 ? " (one rank has nothing to exchange: run 2 or more ranks)" : "");
    } else {
      try {
        const gradcomp::mpi::coded_allreduce check(comm, gt::coded_options(o.transport));
        coded.emplace(check.placement());
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
  }
  if (gt::any_rank_has_problem(comm, problem)) {
    return exit_bad_input;
  }

  torch::set_num_threads(o.threads);
  torch::manual_seed(o.seed);
  network net = make_network(o.model);
  std::vector<torch::Tensor> params;
  std::vector<layer_info> layers;
  for (const auto& item : net.base->named_parameters()) {
    params.push_back(item.value());
    layers.push_back({item.key(), static_cast<std::size_t>(item.value().numel())});
  }
  broadcast_parameters(comm, params);
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
  // its own communicator: the model-parallel collectives run on this thread while the
  // pipeline's communication thread exchanges gradients
  const gradcomp::mpi::communicator hybrid_comm(comm.native());
  std::optional<gt::hybrid_parallelism> hybrid;
  try { // a layer that cannot be split (N < P) fails here, the same way on every rank
    hybrid.emplace(hybrid_comm, net, o, hybrid_net, hybrid_cost);
  } catch (const std::invalid_argument& e) {
    say(std::string("error: ") + e.what());
    return exit_bad_input;
  }
  if (hybrid->active()) {
    std::vector<torch::Tensor> kept;
    std::vector<layer_info> kept_layers;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!hybrid->owns(layers[i].name)) {
        kept.push_back(params[i]);
        kept_layers.push_back(layers[i]);
      }
    }
    params = std::move(kept);
    layers = std::move(kept_layers);
  }
  std::vector<torch::Tensor> mp_params = hybrid->parameters();
  std::vector<std::size_t> numel;
  std::size_t total_numel = 0;
  for (const layer_info& l : layers) {
    numel.push_back(l.numel);
    total_numel += l.numel;
  }
  // DGC's momentum correction for sparse methods (Lin et al. 2018, eqs. 4-6), inside the
  // pipeline's error feedback (gradcomp::momentum_correction): each rank keeps its own velocity
  // u = m u + g per layer, accumulates u (not g) in the residual, sends the top of it and zeroes
  // u where it sent (momentum factor masking); the optimizer then applies the averaged update
  // without momentum. With a dense method this is exactly momentum SGD, so dense methods keep
  // the optimizer's momentum.
  const bool correction =
      o.momentum_correction && gt::is_sparse_method(o.method.name) && o.transport.name != "none";
  const gradcomp::momentum_correction mc{correction ? o.momentum : 0.0};
  // the update (momentum SGD, or LARS: --optimizer) at the learning rate of each step
  // (--warmup-epochs), and loss scaling (--loss-scale): large_batch.hpp, docs/large-batch.md
  gt::update_rule update(params, o.large_batch, o.lr, correction ? 0.0 : o.momentum);
  // the model-parallel slices: complete gradients, plain momentum SGD (no exchange)
  std::optional<gt::update_rule> mp_update;
  if (hybrid->active()) {
    mp_update.emplace(mp_params, o.large_batch, o.lr, o.momentum);
  }
  // evaluation with the model-parallel slices gathered into the full layers (collective)
  const auto evaluate_model = [&] {
    hybrid->begin_full_model();
    const evaluation e = evaluate(comm, net, test_set);
    hybrid->end_full_model();
    return e;
  };
  gt::loss_scaling scaling(o.large_batch, rank, ranks);
  std::int64_t global_iteration = 0;

  const std::int64_t per_rank = (train_set.size() + ranks - 1) / ranks;
  const std::int64_t iterations_per_epoch = (per_rank + o.batch_size - 1) / o.batch_size;
  const gt::learning_rate_schedule learning_rate(o.lr, o.large_batch, iterations_per_epoch,
                                                 o.epochs);
  // the batch of up to batch_size samples of `shard_indices` from position `begin`
  const auto batch = [&](const std::vector<std::int64_t>& shard_indices, std::int64_t begin) {
    return gt::shard_batch(train_set, shard_indices, per_rank, begin, o.batch_size);
  };
  const std::string blas = blas_in_use();
  say(format("%d ranks, model %s (%zu parameters in %zu tensors), %lld training samples "
             "(%lld per rank, %lld iterations of batch %d per epoch), method %s, transport %s, "
             "merge %s, %d torch thread(s) per rank, BLAS: %s",
             ranks, o.model.c_str(), total_numel, layers.size(),
             static_cast<long long>(train_set.size()), static_cast<long long>(per_rank),
             static_cast<long long>(iterations_per_epoch), o.batch_size, o.method.name.c_str(),
             o.transport.name.c_str(), o.merge.c_str(), o.threads, blas.c_str()));
  if (coded) {
    const gradcomp::coded::placement& pl = *coded;
    say(format("coded: redundancy R = %d, coding %s, schedule %s, variant %s: each global "
               "batch of up to "
               "%lld samples is split into C(%d, %d) = %zu parts; every rank computes %zu of "
               "them (R/P of the batch, R times the work of plain data parallelism)",
               pl.redundancy(), o.transport.coding.c_str(), o.transport.coded_schedule.c_str(),
               o.transport.coded_variant.c_str(), static_cast<long long>(o.batch_size) * ranks,
               ranks, pl.redundancy(), pl.part_count(), pl.parts_per_rank()));
  }

  // --- hooks: each parameter's gradient goes to `on_gradient` as backward produces it
  std::function<void(std::size_t, const torch::Tensor&)> on_gradient;
  std::vector<double> ready_at(params.size(), 0.0); // seconds since backward started
  std::vector<std::array<double, 3>> layer_trace;   // --ring-trace: layer, hook entered, left
  clock_type::time_point backward_start;
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].register_hook([&, i](torch::Tensor grad) {
      ready_at[i] = seconds_since(backward_start);
      const double t_in = o.ring_trace.empty() ? 0.0 : gradcomp::mpi::ring_trace::now_seconds();
      on_gradient(i, grad);
      if (!o.ring_trace.empty()) {
        layer_trace.push_back(
            {static_cast<double>(i), t_in, gradcomp::mpi::ring_trace::now_seconds()});
      }
    });
  }
  const auto grad_span = [](const torch::Tensor& g, torch::Tensor& keep) {
    keep = g.is_contiguous() ? g : g.contiguous();
    const gradcomp::host_view<float> v = gradcomp::torch_host_view(keep); // checked: CPU, float32
    return std::span<const float>(v.data(), v.size());
  };

  const auto training_start = clock_type::now();
  double train_seconds = 0; // training only: evaluation excluded

  // --- the merge plan (transport coded too: its pipeline exchanges a group once every part's
  // layers of it are ready; the profile is the plain batch's backward, and the planner's cost
  // is the coded exchange of transport_cost)
  const auto t_plan = clock_type::now();
  const std::optional<strategy> merge = gradcomp::schedule::strategy_from_name(o.merge);
  gradcomp::schedule::grouping proposal;
  nlohmann::json plan_info = nlohmann::json::object();
  {
    // profile: forward/backward of the first batches with a scratch compressor per layer in
    // the hooks (no exchange, no step), as in training
    std::vector<double> backward_median(params.size(), 0.0);
    double forward_median = 0;
    if (o.profile_iterations > 0) {
      std::vector<std::vector<double>> per_layer(params.size());
      std::vector<double> forwards;
      gt::with_method(o.method, [&](auto prototype) {
        using C = decltype(prototype);
        std::vector<gradcomp::error_feedback<C>> scratch;
        for (const std::size_t n : numel) {
          scratch.emplace_back(n, prototype, mc);
        }
        gradcomp::sparse_message m;
        torch::Tensor keep;
        on_gradient = [&](std::size_t i, const torch::Tensor& g) {
          scratch[i].compress(grad_span(g, keep), m);
        };
        const std::vector<std::int64_t> first = shard(train_set.size(), ranks, rank, o.seed, 0);
        // transport coded profiles one part's backward: B P / C(P, R) samples
        const std::int64_t profile_batch =
            coded ? std::max<std::int64_t>(1, static_cast<std::int64_t>(o.batch_size) * ranks /
                                                  static_cast<std::int64_t>(coded->part_count()))
                  : o.batch_size;
        for (int it = 0; it < o.profile_iterations; ++it) {
          const auto [full_x, full_y] = batch(first, (it * o.batch_size) % per_rank);
          const std::int64_t rows = std::min<std::int64_t>(profile_batch, full_x.size(0));
          const torch::Tensor x = full_x.narrow(0, 0, rows);
          const torch::Tensor y = full_y.narrow(0, 0, rows);
          gt::clear_gradients(params);
          const auto t0 = clock_type::now();
          const torch::Tensor loss = torch::nn::functional::cross_entropy(net.module.forward(x), y);
          forwards.push_back(seconds_since(t0));
          backward_start = clock_type::now();
          loss.backward();
          // each layer's backward time in the planner's order (backward order: the last
          // forward layer first): from the latest ready event of the layers before it in that
          // order to its own, so that the model's cumulative sums are the running maximum of
          // the observed ready times. A layer whose hook fires after a later one's (a bias
          // reported after its weight) is then ready with it, not earlier: the time order
          // alone would let the planner merge a layer with a group it cannot join in time
          double latest = 0;
          for (std::size_t k = params.size(); k-- > 0;) {
            per_layer[k].push_back(std::max(0.0, ready_at[k] - latest));
            latest = std::max(latest, ready_at[k]);
          }
        }
      });
      const auto median = [](std::vector<double> v) {
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        return v[v.size() / 2];
      };
      for (std::size_t i = 0; i < params.size(); ++i) {
        backward_median[i] = median(per_layer[i]);
      }
      forward_median = median(forwards);
      gt::clear_gradients(params);
    }
    // calibrate alpha and beta on this network (a short ring allreduce sweep)
    gradcomp::cost::network net_model;
    const bool calibrated = ranks > 1 && o.transport.name != "none" && merge &&
                            *merge != strategy::per_layer && *merge != strategy::single &&
                            *merge != strategy::size_threshold;
    // calibrate under the load training puts on the cores (not with --parallel hybrid, whose
    // forward runs collectives of its own)
    const bool under_load = calibrated && o.calibrate_under_load && o.parallel != "hybrid";
    if (calibrated) {
      gradcomp::mpi::calibration_options co;
      co.max_bytes = std::size_t{1} << 22;
      co.repetitions = 3;
      if (o.transport.name == "ring") { // the ring as training runs it (wait policy, segments)
        co.transport = gt::ring_options(o.transport);
        co.transport.trace = nullptr;
        co.transport.check_lengths = true;
      }
      // under load: this rank's forward and backward passes run in a second thread while the
      // ring sweep measures (--calibrate-under-load; the exchange overlaps backward in training,
      // and on shared cores both slow down). The jthread stops and joins when the block ends,
      // an exception included
      {
        std::jthread load;
        if (under_load) {
          on_gradient = [](std::size_t, const torch::Tensor&) {};
          const auto [x, y] = batch(shard(train_set.size(), ranks, rank, o.seed, 0), 0);
          load = std::jthread([&, x = x, y = y](const std::stop_token& stop) {
            while (!stop.stop_requested()) {
              gt::clear_gradients(params);
              torch::nn::functional::cross_entropy(net.module.forward(x), y).backward();
            }
          });
        }
        net_model = gradcomp::mpi::calibrate_ring_allreduce(comm, co).net;
      }
      gt::clear_gradients(params);
      net_model.alpha_seconds = std::max(0.0, net_model.alpha_seconds);
      net_model.beta_seconds_per_byte = std::max(0.0, net_model.beta_seconds_per_byte);
    }
    gradcomp::pipeline_policy::planned_grouping planner;
    planner.strategy = merge.value_or(strategy::size_threshold);
    planner.model.communication_seconds = transport_cost(o.transport, ranks, net_model);
    if (gt::is_sparse_method(o.method.name)) {
      planner.model.message.density = o.method.density;
    }
    planner.backward_seconds = backward_median;
    planner.forward_seconds = forward_median;
    if (coded) {
      // every part but the last runs its forward and backward before the last part's backward,
      // which alone overlaps the exchange: they add to the forward time before it
      const auto earlier = static_cast<double>(coded->parts_per_rank() - 1);
      planner.forward_seconds +=
          earlier *
          (forward_median + std::accumulate(backward_median.begin(), backward_median.end(), 0.0));
    }
    planner.options.bucket_bytes = static_cast<std::uint64_t>(o.bucket_mib * 1024 * 1024);
    gradcomp::mpi::agreed_grouping<gradcomp::pipeline_policy::planned_grouping> agreed{&comm,
                                                                                       planner};
    proposal = agreed.groups(numel);
    plan_info = {{"strategy", o.merge},
                 {"alpha_seconds", net_model.alpha_seconds},
                 {"beta_seconds_per_byte", net_model.beta_seconds_per_byte},
                 {"forward_seconds", forward_median},
                 {"backward_seconds_rank0", backward_median},
                 {"profile_iterations", o.profile_iterations},
                 {"calibrated_under_load", under_load}};
    if (calibrated) { // the plan's predicted iteration (S1 eqs. 2-7, rank 0's profile)
      plan_info["predicted_iteration_seconds"] =
          planner.predicted_iteration_seconds(numel, proposal);
    }
  }
  nlohmann::json groups_json = nlohmann::json::array();
  std::string plan_text;
  for (const auto& g : proposal) {
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
    plan_text += (plan_text.empty() ? "" : " | ") + text;
  }
  plan_info["groups"] = groups_json;
  const double plan_seconds = seconds_since(t_plan);
  train_seconds += plan_seconds;
  say(format("merge plan (%s, %zu groups, backward order, %.2f s to profile and plan): %s",
             o.merge.c_str(), proposal.size(), plan_seconds, plan_text.c_str()));

  // --- the pipeline
  // --transport none: every rank trains alone on its own gradients, no pipeline at all (the
  // no-communication floor: nothing but forward, backward and the optimizer step)
  const bool alone = o.transport.name == "none";
  gradcomp::mpi::ring_trace ring_trace; // --ring-trace; outlives the exchange that appends to it
  std::vector<std::array<double, 5>> iteration_trace; // --ring-trace: t0 .. t4 of each iteration
  std::unique_ptr<gt::gradient_exchange> exchange;
  torch::Tensor keep;
  std::size_t current_part = 0; // transport coded: the part whose backward runs
  // --density-warmup-epochs, --clip-norm, --adaptive-density (fidelity.hpp, docs/fidelity.md)
  gt::fidelity_remedies remedies(o.fidelity, o.method, numel, ranks, iterations_per_epoch);
  if (alone) {
    on_gradient = [](std::size_t, const torch::Tensor&) {};
  } else {
    gt::transport_settings transport = o.transport;
    transport.trace = o.ring_trace.empty() ? nullptr : &ring_trace;
    exchange = gt::make_exchange(comm, o.method, transport, numel, proposal, mc);
    on_gradient = [&](std::size_t i, const torch::Tensor& g) {
      remedies.gradient(i, scaling.note(global_iteration, grad_span(g, keep)), scaling.scale(),
                        [&](std::size_t l, std::span<const float> v) {
                          exchange->gradient_ready(current_part, l, v);
                        });
    };
  }
  const gradcomp::pipeline_iteration_stats no_stats{};

  // --- transport coded (CSSGD, docs/coded.md "Training with coded exchange"): per iteration,
  // one forward + backward per part this rank owns, in placement().parts_of(rank) order, over
  // that part's samples of the global batch (the same batch_size x P samples as the other
  // transports); the hooks hand each part's gradients to the multi-part pipeline, which
  // compresses them with that part's error feedback and sends a group once every part's
  // layers of it arrived (so the last part's backward overlaps the exchange). The pipeline's
  // average is the mean over the C(P, R) parts; each part's loss is its samples' summed loss
  // times C(P, R) / (global batch), so that mean is the gradient of the global batch's mean
  // loss exactly, whatever the parts' sizes. A part with no samples (a short last batch)
  // reports zero gradients.
  const std::vector<float> zeros(numel.empty() ? 0 : *std::max_element(numel.begin(), numel.end()),
                                 0.0f);
  struct backward_times {
    double forward = 0, backward = 0;
    double loss = 0;          // mean over this rank's samples
    std::int64_t samples = 0; // this rank's samples (over its parts)
  };
  // Forward and backward of this rank's parts of iteration `it` of the epoch's permutation.
  const auto coded_backward = [&](const std::vector<std::int64_t>& order, std::int64_t it) {
    using seconds = std::chrono::duration<double>;
    backward_times c;
    const std::int64_t begin = it * o.batch_size;
    const std::vector<std::int64_t> global =
        global_batch(order, ranks, begin, std::min<std::int64_t>(o.batch_size, per_rank - begin));
    const gradcomp::coded::placement& pl = *coded;
    const std::span<const std::size_t> owned = pl.parts_of(rank);
    const auto cross_entropy_sum =
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
    // each part's weight in the mean, times the loss scale (1 without --loss-scale)
    const double part_weight =
        static_cast<double>(pl.part_count()) / static_cast<double>(global.size()) * scaling.scale();
    double loss_total = 0;
    for (std::size_t k = 0; k < owned.size(); ++k) {
      current_part = k;
      const gradcomp::coded::index_range r = pl.part_samples(owned[k], global.size());
      const auto tf = clock_type::now();
      if (r.size() == 0) {
        for (std::size_t i = 0; i < params.size(); ++i) {
          exchange->gradient_ready(k, i, std::span<const float>(zeros.data(), numel[i]));
        }
        c.backward += seconds_since(tf);
        continue;
      }
      const torch::Tensor index = torch::tensor(
          std::vector<std::int64_t>(global.begin() + static_cast<std::ptrdiff_t>(r.begin),
                                    global.begin() + static_cast<std::ptrdiff_t>(r.end)),
          torch::kInt64);
      gt::clear_gradients(params);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(
          net.module.forward(train_set.images.index_select(0, index)),
          train_set.labels.index_select(0, index), cross_entropy_sum);
      const auto tb = clock_type::now();
      backward_start = tb;
      exchange->begin_backward();
      (loss * part_weight).backward();
      c.forward += seconds(tb - tf).count();
      c.backward += seconds_since(tb);
      loss_total += loss.item<double>();
      c.samples += static_cast<std::int64_t>(r.size());
    }
    c.loss = c.samples > 0 ? loss_total / static_cast<double>(c.samples) : 0.0;
    return c;
  };

  // --- training loop
  sums s;
  std::vector<eval_point> points;
  const evaluation initial = evaluate_model();
  points.push_back({0, 0, 0.0, 0.0, 0.0, initial});
  double loss_sum = 0;
  std::int64_t loss_count = 0;
  const int evals = std::max(1, o.evals_per_epoch);
  barrier(comm);
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    // this rank's shard, or with transport coded the whole permutation (every rank needs every
    // part's samples)
    const std::vector<std::int64_t> mine =
        coded ? std::vector<std::int64_t>{} : shard(train_set.size(), ranks, rank, o.seed, epoch);
    const std::vector<std::int64_t> order =
        coded ? epoch_order(train_set.size(), o.seed, epoch) : std::vector<std::int64_t>{};
    int next_eval = 1;
    for (std::int64_t it = 0; it < iterations_per_epoch; ++it) {
      const auto t0 = clock_type::now();
      if (!alone && remedies.active()) {
        remedies.before_iteration(global_iteration, learning_rate.at(global_iteration), *exchange,
                                  comm);
      }
      backward_times c;
      if (coded) {
        c = coded_backward(order, it);
      } else {
        const auto [x, y] = batch(mine, it * o.batch_size);
        gt::clear_gradients(params);
        gt::clear_gradients(mp_params);
        const torch::Tensor loss = torch::nn::functional::cross_entropy(net.module.forward(x), y);
        const auto t1 = clock_type::now();
        backward_start = t1;
        if (scaling.enabled()) {
          (loss * scaling.scale()).backward();
        } else {
          loss.backward();
        }
        c.forward = std::chrono::duration<double>(t1 - t0).count();
        c.backward = seconds_since(t1);
        c.loss = loss.item<double>();
        c.samples = x.size(0);
      }
      const auto t2 = clock_type::now();
      if (!alone) {
        exchange->finish();
        // .grad becomes a view of the pipeline's average (valid until the next finish(); the
        // optimizer only reads it, and clear_gradients() drops the view before the next
        // backward)
        for (std::size_t i = 0; i < params.size(); ++i) {
          const std::span<const float> avg = exchange->averaged(i);
          params[i].mutable_grad() =
              torch::from_blob(const_cast<float*>(avg.data()), params[i].sizes(),
                               torch::TensorOptions().dtype(torch::kFloat32));
        }
      }
      // loss scaling: agree on overflow, unscale, skip the step on every rank if it overflowed
      const bool apply = scaling.settle(comm, params, exchange.get());
      const auto t3 = clock_type::now();
      if (apply) {
        update.step(learning_rate.at(global_iteration));
        if (mp_update) {
          mp_update->step(learning_rate.at(global_iteration));
        }
      }
      const auto t4 = clock_type::now();
      if (!o.ring_trace.empty()) {
        const auto at = [](clock_type::time_point t) {
          return std::chrono::duration<double>(t.time_since_epoch()).count();
        };
        iteration_trace.push_back({at(t0), at(backward_start), at(t2), at(t3), at(t4)});
      }
      const auto& st = alone ? no_stats : exchange->last_stats();
      remedies.after_iteration(st);
      const double iteration = std::chrono::duration<double>(t4 - t0).count();
      s.iteration += iteration;
      s.forward += c.forward;
      s.backward += c.backward - st.compress_seconds;
      s.compress += st.compress_seconds;
      s.finish_wait += st.finish_wait_seconds;
      s.apply += std::chrono::duration<double>(t3 - t2).count() - st.finish_wait_seconds;
      s.communicate += st.communicate_seconds;
      s.communicate_cpu += st.communicate_cpu_seconds;
      s.step += std::chrono::duration<double>(t4 - t3).count();
      s.bytes_sent += static_cast<double>(st.bytes_sent);
      s.bytes_received += static_cast<double>(st.bytes_received);
      s.selected += static_cast<double>(st.selected);
      s.numel += static_cast<double>(st.numel);
      for (const auto& l : st.layers) {
        s.fallbacks += l.fallback ? 1 : 0;
        ++s.compress_calls;
      }
      ++s.iterations;
      ++global_iteration;
      train_seconds += iteration;
      if (c.samples > 0) {
        loss_sum += c.loss;
        ++loss_count;
      }

      if (root && stderr_is_terminal() && (it % 10 == 9 || it + 1 == iterations_per_epoch)) {
        std::fprintf(stderr, "\rgradcomp-train: epoch %d/%d  %5lld/%lld  loss %.4f  %.1f ms/it ",
                     epoch + 1, o.epochs, static_cast<long long>(it + 1),
                     static_cast<long long>(iterations_per_epoch), loss_sum / loss_count,
                     1000.0 * s.iteration / static_cast<double>(s.iterations));
      }
      // evaluation points: evals per epoch, the last at the epoch's end
      if ((it + 1) * evals >= static_cast<std::int64_t>(next_eval) * iterations_per_epoch) {
        ++next_eval;
        double l[2] = {loss_sum, static_cast<double>(loss_count)};
        allreduce(comm, std::span<double>(l), MPI_SUM);
        const evaluation e = evaluate_model();
        points.push_back({epoch + 1, global_iteration,
                          epoch + static_cast<double>(it + 1) / iterations_per_epoch, train_seconds,
                          l[0] / std::max(1.0, l[1]), e});
        loss_sum = 0;
        loss_count = 0;
        if (root) {
          if (stderr_is_terminal()) {
            std::fputc('\n', stderr);
          }
          std::fprintf(stderr,
                       "gradcomp-train: epoch %.2f: test accuracy %.2f %%, test loss %.4f, "
                       "train loss %.4f, %.1f s training, %.1f ms/iteration\n",
                       points.back().epochs_done, 100.0 * e.accuracy, e.loss,
                       points.back().train_loss, train_seconds,
                       1000.0 * s.iteration / static_cast<double>(s.iterations));
        }
        barrier(comm); // ranks leave evaluation together, so iteration timings stay comparable
      }
    }
  }
  const double wall_seconds = seconds_since(training_start);
  if (!o.ring_trace.empty()) {
    gt::write_ring_trace(o.ring_trace, rank, ring_trace, iteration_trace, layer_trace);
  }

  // --- replicas and statistics across ranks
  // hybrid: the model-parallel slices against the model with the gathered full layers
  // (outputs of a fixed batch; only the order of fp32 sums differs, so they must agree within
  // mp_tolerance, or the run fails like differing replicas)
  constexpr double mp_tolerance = 1e-3;
  double mp_difference = 0.0;
  double mp_sent_bytes = 0.0;
  if (hybrid->active()) {
    mp_sent_bytes = hybrid->sent_bytes(); // before the check's own forward pass
    const auto [x, y] = batch(shard(train_set.size(), ranks, rank, o.seed, 0), 0);
    mp_difference = hybrid->max_difference_to_gathered(comm, x);
  }
  const bool slices_agree = mp_difference <= mp_tolerance;
  const std::uint64_t hash = parameter_hash(params);
  const std::vector<std::uint64_t> hashes = allgather(comm, hash);
  const bool identical =
      std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; });
  const auto n_it = static_cast<double>(std::max<std::int64_t>(1, s.iterations));
  constexpr std::size_t n_values = gt::per_iteration_count;
  double per_rank_values[n_values] = {
      s.iteration / n_it,   s.forward / n_it,    s.backward / n_it,      s.compress / n_it,
      s.finish_wait / n_it, s.apply / n_it,      s.communicate / n_it,   s.communicate_cpu / n_it,
      s.step / n_it,        s.bytes_sent / n_it, s.bytes_received / n_it};
  double mean_values[n_values];
  std::copy(std::begin(per_rank_values), std::end(per_rank_values), std::begin(mean_values));
  allreduce(comm, std::span<double>(mean_values), MPI_SUM);
  for (double& v : mean_values) {
    v /= ranks;
  }
  double max_values[n_values];
  std::copy(std::begin(per_rank_values), std::end(per_rank_values), std::begin(max_values));
  allreduce(comm, std::span<double>(max_values), MPI_MAX);
  double counts[3] = {s.selected, s.numel, static_cast<double>(s.fallbacks)};
  allreduce(comm, std::span<double>(counts), MPI_SUM);

  const evaluation final_eval = points.back().test;
  const int status = gt::run_status((!identical && o.transport.name != "none") || !slices_agree,
                                    final_eval.accuracy, o.require_accuracy);
  if (!root) {
    return status;
  }

  // --- report (rank 0)
  const nlohmann::json per_iteration = gt::per_iteration_json(mean_values, max_values);
  const nlohmann::json curve = gt::curve_json(points);
  const nlohmann::json hash_list = gt::hash_list_json(hashes);
  const double density = counts[1] > 0 ? counts[0] / counts[1] : 1.0;
  const std::string coded_text =
      coded ? format("R = %d, %s, %s, %s%s", o.transport.redundancy, o.transport.coding.c_str(),
                     o.transport.coded_schedule.c_str(), o.transport.coded_variant.c_str(),
                     o.transport.uncoded ? ", uncoded" : "")
            : std::string();
  std::string label = o.label;
  if (label.empty()) {
    label = coded ? o.method.name + " / coded (" + coded_text + ") / " + o.merge
                  : o.method.name + " / " + o.transport.name + " / " + o.merge;
  }
  nlohmann::json config = gt::common_config(o, ranks, train_set.size(), test_set.size(),
                                            iterations_per_epoch, total_numel, layers.size(), blas);
  config["transport"] = o.transport.name;
  config["sync"] = "sync";
  config["parallel"] = o.parallel;
  if (o.parallel == "hybrid") {
    config["mp_layers"] = o.mp_layers;
    config["hybrid_layers"] = hybrid->decisions();
    config["model_parallel_check_max_difference"] = mp_difference;
    config["model_parallel_check_tolerance"] = mp_tolerance;
    config["model_parallel_sent_bytes_per_iteration"] =
        mp_sent_bytes / static_cast<double>(std::max<std::int64_t>(1, s.iterations));
  }
  config["ps_pull"] = o.transport.name != "ps"    ? "n/a"
                      : o.transport.ps_dense_pull ? "dense"
                                                  : "adaptive";
  config["merge"] = o.merge;
  config["momentum_correction"] = correction;
  config["compression_scope"] = o.method.scope;
  config["precision"] = o.large_batch.precision;
  config["loss_scale"] = o.large_batch.loss_scale;
  config["optimizer"] = o.large_batch.optimizer;
  config["warmup_epochs"] = o.large_batch.warmup_epochs;
  if (o.large_batch.optimizer == "lars") {
    config["trust_coefficient"] = o.large_batch.trust_coefficient;
    config["weight_decay"] = o.large_batch.weight_decay;
  }
  nlohmann::json report = {{"label", label},
                           {"config", config},
                           {"plan", plan_info},
                           {"curve", curve},
                           {"final_test_accuracy", final_eval.accuracy},
                           {"final_test_loss", final_eval.loss},
                           {"train_seconds", train_seconds},
                           {"wall_seconds", wall_seconds},
                           {"per_iteration", per_iteration},
                           {"achieved_density", density},
                           {"guard_fallbacks", counts[2]},
                           {"replica_hashes", hash_list},
                           {"replicas_identical", identical},
                           {"loss_scale_final", scaling.scale()},
                           {"skipped_steps", scaling.skipped_steps()},
                           {"dropped_non_finite", scaling.dropped_values()}};
  remedies.add_to(report);
  if (coded) {
    const gradcomp::coded::placement& pl = *coded;
    nlohmann::json& config = report["config"];
    config["redundancy"] = pl.redundancy();
    config["coding"] = o.transport.coding;
    config["coded_schedule"] = o.transport.coded_schedule;
    config["coded_variant"] = o.transport.coded_variant;
    config["uncoded"] = o.transport.uncoded;
    config["parts"] = pl.part_count();
    config["parts_per_rank"] = pl.parts_per_rank();
    config["global_batch"] = static_cast<std::int64_t>(o.batch_size) * ranks;
  }

  std::string table = gt::epoch_table(points);
  table += "\n| per iteration (mean over ranks) | value |\n|---|---|\n";
  table += format("| iteration | %.1f ms |\n", 1000 * mean_values[0]);
  const std::string over_parts =
      coded ? format(" over this rank's %zu parts", coded->parts_per_rank()) : std::string();
  table += format("| compute (forward + backward%s, compression excluded) | %.1f ms |\n",
                  over_parts.c_str(), 1000 * (mean_values[1] + mean_values[2]));
  table += format("| compression (in the backward hooks) | %.2f ms |\n", 1000 * mean_values[3]);
  table += format("| communication not overlapped (waiting in finish) | %.2f ms |\n",
                  1000 * mean_values[4]);
  table +=
      format("| averages into .grad (copy, momentum masking) | %.2f ms |\n", 1000 * mean_values[5]);
  table += format("| communication thread busy | %.2f ms |\n", 1000 * mean_values[6]);
  table += format("| communication thread CPU time | %.2f ms |\n", 1000 * mean_values[7]);
  table += format("| optimizer step | %.2f ms |\n", 1000 * mean_values[8]);
  table +=
      format("| bytes sent / received per rank | %.0f / %.0f |\n", mean_values[9], mean_values[10]);
  table += format("| achieved density | %.5f |\n", density);
  if (coded) {
    const gradcomp::coded::placement& pl = *coded;
    table += format("| redundancy R (parts, parts per rank) | %d (%zu, %zu) |\n", pl.redundancy(),
                    pl.part_count(), pl.parts_per_rank());
    table += format("| coding (schedule, variant) | %s (%s, %s)%s |\n", o.transport.coding.c_str(),
                    o.transport.coded_schedule.c_str(), o.transport.coded_variant.c_str(),
                    o.transport.uncoded ? ", uncoded baseline: slices unicast, no coding" : "");
  }
  table += format("| merge plan (%s) | %s |\n", o.merge.c_str(), plan_text.c_str());
  if (plan_info.contains("predicted_iteration_seconds")) {
    table += format("| iteration predicted by the merge model (rank 0's profile) | %.1f ms |\n",
                    1000 * plan_info["predicted_iteration_seconds"].get<double>());
  }
  table += format("| training time / wall time | %.1f s / %.1f s |\n", train_seconds, wall_seconds);
  table += format("| replicas identical | %s (%s) |\n", identical ? "yes" : "NO",
                  hash_list.dump().c_str());
  table += format("| BLAS | %s |\n", blas.c_str());
  if (gt::emit_report(report, table, label, ranks, o.report) != 0) {
    return 1;
  }
  return gt::explain_status(status,
                            slices_agree
                                ? "the replicas differ across ranks: " + hash_list.dump()
                                : format("the model-parallel slices give outputs %g away from "
                                         "the gathered layers' (tolerance %g)",
                                         mp_difference, mp_tolerance),
                            final_eval.accuracy, o.require_accuracy);
}

} // namespace gradcomp_train
