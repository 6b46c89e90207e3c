// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --sync async: asynchronous SGD (ASGD, S3's third baseline; with
//! --staleness-bound k >= 1, stale-synchronous SGD) through gradcomp::mpi::async_parameter_server.
//! The last S = --servers ranks (1 if 0) serve the model's parameters and apply every push the
//! moment it arrives (SGD with momentum on the server, lr / W per push); the other W = P - S
//! ranks are workers that, with no barrier between them, pull the current parameters, compute
//! the gradient of their own batch, compress it with their error feedback and push it.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/async_parameter_server.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "../common/sample_order.hpp"
#include "../common/tool_support.hpp"
#include "exchange.hpp"
#include "report.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! The model's parameters as one vector of n floats, layers in parameter order (what the
//! asynchronous parameter server holds), with the copies between it and the model.
struct flat_parameters {
  std::vector<torch::Tensor>& params;
  const std::vector<std::size_t>& numel;
  std::vector<float> flat;

  //! The model's parameters into `flat`. O(n).
  void to_flat() {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::memcpy(flat.data() + offset, params[i].data_ptr<float>(), numel[i] * sizeof(float));
      offset += numel[i];
    }
  }
  //! `flat` into the model's parameters. O(n).
  void from_flat() {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::memcpy(params[i].data_ptr<float>(), flat.data() + offset, numel[i] * sizeof(float));
      offset += numel[i];
    }
  }
};

//! What one worker's training loop of train_async records.
struct async_worker_totals {
  std::vector<eval_point> points;              //!< the evaluations, the initial one first
  double sums[per_iteration_count] = {};       //!< per_iteration_names' sums over the iterations
  double selected = 0;                         //!< elements pushed
  double staleness_sum = 0, staleness_max = 0; //!< staleness seen at the pulls
  std::int64_t iterations = 0;
  double train_seconds = 0; //!< training only (evaluations excluded)

  //! Adds one iteration: its time points `at` (start, pulled, replica updated, forward done,
  //! backward done, compressed, pushed), the bytes it sent and received, the elements it pushed
  //! and the staleness its pull saw.
  void add_iteration(const std::array<clock_type::time_point, 7>& at,
                     double sent_bytes,
                     double received_bytes,
                     double pushed,
                     double staleness) {
    const auto secs = [&](std::size_t a, std::size_t b) {
      return std::chrono::duration<double>(at[b] - at[a]).count();
    };
    const double iteration = secs(0, 6);
    const double values[per_iteration_count] = {iteration,  secs(2, 3), secs(3, 4),    secs(4, 5),
                                                secs(0, 1), secs(1, 2), 0.0,           0.0,
                                                secs(5, 6), sent_bytes, received_bytes};
    for (std::size_t k = 0; k < per_iteration_count; ++k) {
      sums[k] += values[k];
    }
    selected += pushed;
    staleness_sum += staleness;
    staleness_max = std::max(staleness_max, staleness);
    ++iterations;
    train_seconds += iteration;
  }
};

//! What train_async's worker loop needs besides the options.
struct async_worker_setup {
  const gradcomp::mpi::communicator& group; //!< the workers' communicator
  gradcomp::mpi::async_parameter_server& ps;
  network& net;
  flat_parameters& model;
  const gx::dataset& train_set;
  const gx::dataset& test_set;
  int workers;
  std::int64_t per_worker;           //!< samples per worker and epoch
  std::int64_t iterations_per_epoch; //!< per worker
  std::size_t total_numel;
  bool root; //!< worker 0 prints the progress lines
};

//! One worker's training loop of train_async (see there): pulls, forward and backward, the
//! layers compressed with the method's error feedback and pushed; evaluations at the synchronous
//! training's points. Collective over the workers' communicator s.group.
inline void
run_async_worker(const train_options& o, const async_worker_setup& s, async_worker_totals& t) {
  namespace gm = gradcomp::mpi;
  using gradcomp_tools::format;
  const gm::communicator& group = s.group;
  gm::async_parameter_server& ps = s.ps;
  network& net = s.net;
  std::vector<torch::Tensor>& params = s.model.params;
  const std::vector<std::size_t>& numel = s.model.numel;
  std::vector<float>& flat = s.model.flat;
  const gx::dataset& train_set = s.train_set;
  const gx::dataset& test_set = s.test_set;
  const int workers = s.workers;
  const int w = group.rank();
  const std::int64_t per_worker = s.per_worker;
  const std::int64_t iterations_per_epoch = s.iterations_per_epoch;
  const std::size_t total_numel = s.total_numel;
  std::vector<eval_point>& points = t.points;
  std::int64_t& iterations = t.iterations;
  double& train_seconds = t.train_seconds;
  const auto say = [&](const std::string& text) {
    if (s.root) {
      std::fprintf(stderr, "gradcomp-train: %s\n", text.c_str());
    }
  };
  with_method(o.method, [&](auto prototype) {
    using C = decltype(prototype);
    std::vector<gradcomp::error_feedback<C>> feedback;
    for (const std::size_t n : numel) {
      feedback.emplace_back(n, prototype, gradcomp::momentum_correction{0.0});
    }
    gradcomp::sparse_message layer, push;
    torch::Tensor keep;
    points.push_back({0, 0, 0.0, 0.0, 0.0, evaluate(group, net, test_set)});
    double loss_sum = 0;
    std::int64_t loss_count = 0;
    const int evals = std::max(1, o.evals_per_epoch);
    barrier(group);
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
      const std::vector<std::int64_t> mine = gx::shard(train_set.size(), workers, w, o.seed, epoch);
      int next_eval = 1;
      for (std::int64_t it = 0; it < iterations_per_epoch; ++it) {
        const auto t0 = clock_type::now();
        const std::size_t received_before = ps.bytes_received();
        const std::size_t sent_before = ps.bytes_sent();
        const gm::async_pull_result pulled = ps.pull(flat);
        const auto t1 = clock_type::now();
        s.model.from_flat();
        const auto t2 = clock_type::now();
        const auto [x, y] =
            shard_batch(train_set, mine, per_worker, it * o.batch_size, o.batch_size);
        clear_gradients(params);
        const torch::Tensor loss = torch::nn::functional::cross_entropy(net.module.forward(x), y);
        const auto t3 = clock_type::now();
        loss.backward();
        const auto t4 = clock_type::now();
        gradcomp::begin_concatenation(push, total_numel);
        std::uint64_t offset = 0;
        for (std::size_t i = 0; i < params.size(); ++i) {
          const torch::Tensor& g = params[i].grad();
          keep = g.is_contiguous() ? g : g.contiguous();
          feedback[i].compress(std::span<const float>(keep.data_ptr<float>(), numel[i]), layer);
          gradcomp::append_concatenated(push, layer, offset, i == 0);
          offset += numel[i];
        }
        const auto t5 = clock_type::now();
        ps.push(push);
        t.add_iteration({t0, t1, t2, t3, t4, t5, clock_type::now()},
                        static_cast<double>(ps.bytes_sent() - sent_before),
                        static_cast<double>(ps.bytes_received() - received_before),
                        static_cast<double>(push.nnz()), static_cast<double>(pulled.staleness));
        loss_sum += loss.item<double>();
        ++loss_count;
        if ((it + 1) * evals >= static_cast<std::int64_t>(next_eval) * iterations_per_epoch) {
          ++next_eval;
          double l[2] = {loss_sum, static_cast<double>(loss_count)};
          allreduce(group, std::span<double>(l), MPI_SUM);
          const bool last = epoch + 1 == o.epochs && it + 1 == iterations_per_epoch;
          if (last) {
            ps.finish(flat); // every worker's replica: the servers' final parameters
          } else {
            ps.pull(flat);
          }
          s.model.from_flat();
          const evaluation e = evaluate(group, net, test_set);
          points.push_back({epoch + 1, iterations,
                            epoch + static_cast<double>(it + 1) / iterations_per_epoch,
                            train_seconds, l[0] / std::max(1.0, l[1]), e});
          loss_sum = 0;
          loss_count = 0;
          say(format("epoch %.2f: test accuracy %.2f %%, test loss %.4f, train loss %.4f, %.1f "
                     "s training, %.1f ms/iteration",
                     points.back().epochs_done, 100.0 * e.accuracy, e.loss,
                     points.back().train_loss, train_seconds,
                     1000.0 * t.sums[0] / static_cast<double>(iterations)));
          barrier(group);
        }
      }
    }
  });
}

//! What train_async's report (rank 0) is made of: the statistics agreed among the workers and
//! the servers, the evaluations, the run's shape and its status.
struct async_summary {
  std::vector<std::uint64_t> hashes; //!< every worker's parameter hash, in worker order
  const double (&worker_counts)[3];  //!< selected, iterations, staleness sum: over the workers
  const double (&server_sums)[4];    //!< pushes applied, staleness sum, pulls answered, deferred
  const double (&maxima)[3];         //!< server staleness, clock gap, worker staleness
  const double (&mean_values)[per_iteration_count];
  const double (&max_values)[per_iteration_count];
  const std::vector<eval_point>& points;
  std::size_t total_numel;
  int servers, workers, ranks;
  std::int64_t train_samples, test_samples, iterations_per_epoch;
  std::size_t tensors;
  const std::string& blas;
  double train_seconds, wall_seconds;
  int status; //!< run_status() of the replicas and the accuracy
};

//! Writes train_async's report and table (rank 0) and returns the exit status.
inline int report_async(const train_options& o, const async_summary& r) {
  using gradcomp_tools::format;
  const std::vector<std::uint64_t>& hashes = r.hashes;
  const auto& worker_counts = r.worker_counts;
  const auto& server_sums = r.server_sums;
  const auto& maxima = r.maxima;
  const auto& mean_values = r.mean_values;
  const auto& max_values = r.max_values;
  const std::vector<eval_point>& points = r.points;
  const std::size_t total_numel = r.total_numel;
  const int servers = r.servers, workers = r.workers, ranks = r.ranks;
  const std::int64_t iterations_per_epoch = r.iterations_per_epoch;
  const std::string& blas = r.blas;
  const double train_seconds = r.train_seconds, wall_seconds = r.wall_seconds;
  const int status = r.status;
  const bool identical =
      std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; });
  const evaluation final_eval = points.back().test;
  // --- report (rank 0)
  const nlohmann::json hash_list = hash_list_json(hashes);
  const double all_iterations = std::max(1.0, worker_counts[1]);
  const double density = worker_counts[0] / (all_iterations * static_cast<double>(total_numel));
  // server_sums: each push is applied once by every server (one part each)
  const double applied_per_server = server_sums[0] / servers;
  const double worker_staleness_mean = worker_counts[2] / all_iterations;
  const double server_staleness_mean = server_sums[0] > 0 ? server_sums[1] / server_sums[0] : 0.0;
  const std::string label = !o.label.empty() ? o.label
                                             : format("%s / asgd (%d server%s, staleness bound %d)",
                                                      o.method.name.c_str(), servers,
                                                      servers == 1 ? "" : "s", o.staleness_bound);
  nlohmann::json config = common_config(o, ranks, r.train_samples, r.test_samples,
                                        iterations_per_epoch, total_numel, r.tensors, blas);
  config["workers"] = workers;
  config["servers"] = servers;
  config["sync"] = "async";
  config["staleness_bound"] = o.staleness_bound;
  config["server_rule"] = "async_sgd: momentum on the servers, lr / W per push";
  config["transport"] = "ps";
  config["merge"] = "single";
  config["momentum_correction"] = false;
  nlohmann::json report = {{"label", label},
                           {"config", config},
                           {"plan", nlohmann::json::object()},
                           {"curve", curve_json(points)},
                           {"final_test_accuracy", final_eval.accuracy},
                           {"final_test_loss", final_eval.loss},
                           {"train_seconds", train_seconds},
                           {"wall_seconds", wall_seconds},
                           {"per_iteration", per_iteration_json(mean_values, max_values)},
                           {"achieved_density", density},
                           {"guard_fallbacks", 0},
                           {"replica_hashes", hash_list},
                           {"replicas_identical", identical},
                           {"asgd",
                            {{"worker_staleness_mean", worker_staleness_mean},
                             {"worker_staleness_max", maxima[2]},
                             {"server_staleness_mean", server_staleness_mean},
                             {"server_staleness_max", maxima[0]},
                             {"max_clock_gap", maxima[1]},
                             {"pushes_applied_per_server", applied_per_server},
                             {"pulls_answered", server_sums[2]},
                             {"pulls_deferred", server_sums[3]}}}};

  std::string table = epoch_table(points);
  table += "\n| per iteration (mean over workers) | value |\n|---|---|\n";
  table += format("| iteration | %.1f ms |\n", 1000 * mean_values[0]);
  table += format("| compute (forward + backward) | %.1f ms |\n",
                  1000 * (mean_values[1] + mean_values[2]));
  table += format("| compression (error feedback, one message of the model) | %.2f ms |\n",
                  1000 * mean_values[3]);
  table +=
      format("| pull (waiting for the servers' parameters) | %.2f ms |\n", 1000 * mean_values[4]);
  table += format("| parameters into the model | %.2f ms |\n", 1000 * mean_values[5]);
  table += format("| push (posting; the SGD step runs on the servers) | %.2f ms |\n",
                  1000 * mean_values[8]);
  table += format("| bytes sent / received per worker | %.0f / %.0f |\n", mean_values[9],
                  mean_values[10]);
  table += format("| achieved density | %.5f |\n", density);
  table += format("| workers / servers / staleness bound | %d / %d / %d |\n", workers, servers,
                  o.staleness_bound);
  table += format("| staleness seen at a pull (mean / max): pushes of others since the previous "
                  "pull | %.2f / %.0f |\n",
                  worker_staleness_mean, maxima[2]);
  table += format("| servers: staleness of an applied push (mean / max), largest clock gap | "
                  "%.2f / %.0f, %.0f |\n",
                  server_staleness_mean, maxima[0], maxima[1]);
  table += format("| training time / wall time | %.1f s / %.1f s |\n", train_seconds, wall_seconds);
  table += format("| worker replicas identical after finish() | %s (%s) |\n",
                  identical ? "yes" : "NO", hash_list.dump().c_str());
  table += format("| BLAS | %s |\n", blas.c_str());
  if (emit_report(report, table, label, ranks, o.report) != 0) {
    return 1;
  }
  return explain_status(status, "the workers' replicas differ: " + hash_list.dump(),
                        final_eval.accuracy, o.require_accuracy);
}

//! train_async's input checks, agreed by every rank before any training (the command line has
//! already refused a negative --staleness-bound): a worker must remain beside the `servers`
//! dedicated server ranks, and the data must load (into `train_set` and `test_set`). Each
//! problem is printed on stderr. Collective. @return whether the input was refused.
inline bool async_input_refused(const train_options& o,
                                const gradcomp::mpi::communicator& comm,
                                int servers,
                                gx::dataset& train_set,
                                gx::dataset& test_set) {
  const int workers = comm.size() - servers;
  std::string problem;
  if (workers < 1) {
    problem = gradcomp_tools::format("--sync async needs a worker: %d dedicated server(s) "
                                     "(--servers) leave none of the %d ranks; run at least %d "
                                     "ranks",
                                     servers, comm.size(), servers + 1);
  }
  if (problem.empty()) {
    problem = load_data(o, workers, "workers", train_set, test_set);
  }
  return any_rank_has_problem(comm, problem);
}

//! The workers' own communicator (ranks below `workers`; the servers get one of their own):
//! evaluation and statistics among the workers only, while the servers are inside serve() until
//! every worker has finished. Collective over `comm`.
inline gradcomp::mpi::communicator workers_communicator(const gradcomp::mpi::communicator& comm,
                                                        int workers) {
  MPI_Comm split = MPI_COMM_NULL;
  if (MPI_Comm_split(comm.native(), comm.rank() < workers ? 0 : 1, comm.rank(), &split) !=
      MPI_SUCCESS) {
    throw std::runtime_error("MPI_Comm_split failed");
  }
  gradcomp::mpi::communicator group(split); // duplicates it
  MPI_Comm_free(&split);
  return group;
}

//! @brief Trains with ASGD (see the file) and reports like the synchronous training (rank 0,
//! which is worker 0). Collective over `comm` (P >= 2 ranks, S < P).
//!
//! Per worker iteration: pull (wait for every server's shard) -> copy into the model ->
//! forward, backward -> each layer compressed by its own error feedback (the method's
//! compressor; no momentum correction: the momentum lives on the server) and the layers
//! concatenated into one message of the model's n elements -> push (returns once posted). Each
//! worker trains on its own DistributedSampler shard of the W workers, so an epoch is
//! ceil(N / W / B) iterations per worker. Evaluation points (the same schedule as the
//! synchronous training): the workers pull the current parameters (the last point: finish(), so
//! every replica equals the servers' final parameters), evaluate 1/W of the test set each with
//! its replica, and wait for each other; that time is excluded from training time, as in the
//! synchronous training.
//!
//! The report's per-iteration times mean: exchange_wait = the pull (waiting for the servers'
//! answers), gradient_apply = copying the pulled parameters into the model, compression = the
//! error feedback and concatenation, optimizer_step = posting the push (the SGD step itself runs
//! on the servers), communication_thread_busy = 0 (no communication thread); bytes per worker
//! per iteration: pushed parts sent, pulled shards received. Also reported: the staleness the
//! workers observed (pushes of other workers applied between two pulls of one worker) and the
//! servers' statistics (mpi::async_server_stats).
//!
//! Returns the exit status (0, exit_bad_input, exit_replicas_differ, exit_accuracy_low, 1 when
//! the report cannot be written). Non-deterministic: the servers apply pushes in arrival order.
inline int train_async(const train_options& o, const gradcomp::mpi::communicator& comm) {
  namespace gm = gradcomp::mpi;
  using gradcomp_tools::format;
  const int rank = comm.rank();
  const int ranks = comm.size();
  const int servers = o.transport.servers > 0 ? o.transport.servers : 1;
  const int workers = ranks - servers;
  const bool root = rank == 0; // worker 0
  const auto say = [&](const std::string& text) {
    if (root) {
      std::fprintf(stderr, "gradcomp-train: %s\n", text.c_str());
    }
  };

  gx::dataset train_set, test_set;
  if (async_input_refused(o, comm, servers, train_set, test_set)) {
    return exit_bad_input;
  }

  torch::set_num_threads(o.threads);
  torch::manual_seed(o.seed);
  network net = make_network(o.model);
  std::vector<torch::Tensor> params;
  std::vector<std::size_t> numel;
  std::size_t total_numel = 0;
  for (const auto& item : net.base->named_parameters()) {
    params.push_back(item.value());
    numel.push_back(static_cast<std::size_t>(item.value().numel()));
    total_numel += numel.back();
  }
  broadcast_parameters(comm, params);
  // the model as one vector of n floats, layers in parameter order
  flat_parameters model{params, numel, std::vector<float>(total_numel)};
  model.to_flat();

  const gm::communicator group = workers_communicator(comm, workers);
  gm::async_parameter_server ps(comm, total_numel,
                                {.servers = servers, .staleness_bound = o.staleness_bound});

  const std::int64_t per_worker = (train_set.size() + workers - 1) / workers;
  const std::int64_t iterations_per_epoch = (per_worker + o.batch_size - 1) / o.batch_size;
  const std::string blas = blas_in_use();
  say(format("--sync async: %d workers and %d dedicated server rank(s) (ranks %d..%d), staleness "
             "bound %d; model %s (%zu parameters in %zu tensors), %lld training samples (%lld "
             "per worker, %lld iterations of batch %d per epoch), method %s, %d torch thread(s) "
             "per rank, BLAS: %s",
             workers, servers, workers, ranks - 1, o.staleness_bound, o.model.c_str(), total_numel,
             params.size(), static_cast<long long>(train_set.size()),
             static_cast<long long>(per_worker), static_cast<long long>(iterations_per_epoch),
             o.batch_size, o.method.name.c_str(), o.threads, blas.c_str()));

  const auto training_start = clock_type::now();
  async_worker_totals totals;
  gm::async_server_stats server_stats;

  if (ps.is_server()) {
    server_stats = ps.serve(model.flat, gm::async_sgd{.lr = static_cast<float>(o.lr),
                                                      .momentum = static_cast<float>(o.momentum)});
  } else {
    run_async_worker(o,
                     {group, ps, net, model, train_set, test_set, workers, per_worker,
                      iterations_per_epoch, total_numel, root},
                     totals);
  }
  const double wall_seconds = seconds_since(training_start);

  // --- statistics: the workers' among the workers, the servers' to every rank
  const auto n_it = static_cast<double>(std::max<std::int64_t>(1, totals.iterations));
  double mean_values[per_iteration_count], max_values[per_iteration_count];
  for (std::size_t k = 0; k < per_iteration_count; ++k) {
    mean_values[k] = max_values[k] = totals.sums[k] / n_it;
  }
  std::vector<std::uint64_t> hashes;
  double worker_counts[3] = {totals.selected, static_cast<double>(totals.iterations),
                             totals.staleness_sum};
  if (ps.is_worker()) {
    allreduce(group, std::span<double>(mean_values), MPI_SUM);
    for (double& v : mean_values) {
      v /= workers;
    }
    allreduce(group, std::span<double>(max_values), MPI_MAX);
    allreduce(group, std::span<double>(worker_counts), MPI_SUM);
    hashes = allgather(group, parameter_hash(params));
  }
  const double pushes_applied = static_cast<double>(server_stats.version);
  double server_sums[4] = {pushes_applied, server_stats.mean_staleness * pushes_applied,
                           static_cast<double>(server_stats.pulls_answered),
                           static_cast<double>(server_stats.pulls_deferred)};
  allreduce(comm, std::span<double>(server_sums), MPI_SUM);
  double maxima[3] = {static_cast<double>(server_stats.max_staleness),
                      static_cast<double>(server_stats.max_clock_gap), totals.staleness_max};
  allreduce(comm, std::span<double>(maxima), MPI_MAX);
  if (ps.is_server()) {
    return 0;
  }
  const bool identical =
      std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t h) { return h == hashes[0]; });
  const evaluation final_eval = totals.points.back().test;
  const int status = run_status(!identical, final_eval.accuracy, o.require_accuracy);
  if (!root) {
    return status;
  }

  return report_async(o, {std::move(hashes), worker_counts, server_sums, maxima, mean_values,
                          max_values, totals.points, total_numel, servers, workers, ranks,
                          train_set.size(), test_set.size(), iterations_per_epoch, params.size(),
                          blas, totals.train_seconds, wall_seconds, status});
}

} // namespace gradcomp_train
