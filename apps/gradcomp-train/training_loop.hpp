// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The epoch loop of gradcomp-train's synchronous training: per iteration the remedies'
//! step boundary, forward and backward (the hooks hand each gradient to the pipeline as backward
//! produces it), the pipeline's average into .grad, loss scaling's agreement and the update;
//! test-set evaluations --evals-per-epoch times per epoch. --transport none: every rank trains
//! alone on its own gradients, no pipeline at all (the no-communication floor: nothing but
//! forward, backward and the optimizer step).
#pragma once

#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/ring_trace.hpp>
#include <gradcomp/pipeline.hpp>

#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

#include "auto_method.hpp"
#include "checkpoint.hpp"
#include "coded_training.hpp"
#include "exchange.hpp"
#include "fidelity.hpp"
#include "hooks.hpp"
#include "large_batch.hpp"
#include "merge_plan.hpp"
#include "powersgd.hpp"
#include "report.hpp"
#include "setup.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! Times, bytes and compressor counts summed over this rank's iterations.
struct iteration_sums {
  double iteration = 0, forward = 0, backward = 0, compress = 0, finish_wait = 0, apply = 0,
         communicate = 0, communicate_cpu = 0, step = 0;
  double bytes_sent = 0, bytes_received = 0, selected = 0, numel = 0;
  std::size_t fallbacks = 0, compress_calls = 0;
  std::int64_t iterations = 0;
};

//! Whether stderr is a terminal (the progress line is only drawn there).
inline bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

//! @brief The update of each iteration: momentum SGD or LARS (--optimizer) on the data-parallel
//! parameters at the learning rate of each step (--warmup-epochs) and loss scaling
//! (--loss-scale): large_batch.hpp, docs/large-batch.md; with --parallel hybrid plain momentum
//! SGD on the model-parallel slices (complete gradients, no exchange).
struct sync_update {
  explicit sync_update(const sync_setup& s)
      : update(s.model.params, s.o.large_batch, s.o.lr, s.correction ? 0.0 : s.o.momentum),
        scaling(s.o.large_batch, s.o.method.compressor.nonfinite, s.rank, s.ranks),
        learning_rate(s.o.lr, s.o.large_batch, s.data.iterations_per_epoch, s.o.epochs) {
    if (s.model.hybrid->active()) {
      mp_update.emplace(s.model.mp_params, s.o.large_batch, s.o.lr, s.o.momentum);
    }
  }

  update_rule update;
  std::optional<update_rule> mp_update;
  loss_scaling scaling;
  learning_rate_schedule learning_rate;
  std::int64_t global_iteration = 0; //!< iterations done
};

//! @brief The synchronous training's epoch loop and what it records: builds the pipeline of the
//! merge plan (none with --transport none) and wires the gradient hooks to it. Not copyable: the
//! hooks refer to it.
class sync_trainer {
public:
  sync_trainer(sync_setup& s, sync_update& u, const merge_plan& plan)
      : train_seconds(plan.seconds),
        remedies(s.o.fidelity, s.o.method, s.model.numel, s.ranks, s.data.iterations_per_epoch),
        s_(s), u_(u), coded_(s) {
    const train_options& o = s.o;
    if (alone()) {
      s.hooks.on_gradient = [](std::size_t, const torch::Tensor&) {};
      return;
    }
    transport_settings transport = o.transport;
    transport.trace = o.ring_trace.empty() ? nullptr : &ring_trace;
    method_settings method = o.method;
    if (method.name == "auto") { // its small layers go dense (--auto-dense-share)
      method.dense_below =
          gradcomp::schedule::dense_below_elements(s.model.numel, method.automatic.dense_share);
    }
    exchange =
        o.method.name == "powersgd"
            ? make_powersgd_exchange(s.comm, o.method, transport, s.model.params)
            : make_exchange(
                  s.comm, method, transport, s.model.numel,
                  training_grouping{plan.groups, {&s.comm, plan.planner}, o.replan_mode == "keep"},
                  s.mc);
    if (o.method.name == "auto") {
      automatic.emplace(s, plan, method.dense_below);    // collective: the agreed calibration
      train_seconds += automatic->calibration_seconds(); // start-up: training time, as the plan's
    }
    s.hooks.on_gradient = [this](std::size_t i, const torch::Tensor& g) {
      remedies.gradient(i, u_.scaling.note(u_.global_iteration, grad_span(g, keep_)),
                        u_.scaling.scale(), [&](std::size_t l, std::span<const float> v) {
                          exchange->gradient_ready(coded_.part(), l, v);
                        });
    };
  }
  sync_trainer(const sync_trainer&) = delete;
  sync_trainer& operator=(const sync_trainer&) = delete;

  //! Evaluates the initial model (with --resume: the resumed one, after loading the checkpoint),
  //! then trains until --epochs epochs are done or --stop-after-iterations; writes the
  //! checkpoints of --checkpoint. Collective.
  void train() {
    const train_options& o = s_.o;
    if (!o.resume.empty()) {
      resume_from(o.resume);
    }
    const evaluation initial = s_.evaluate();
    // the epoch this point falls in (0: before training; a resumed run's first point may fall
    // in the middle of an epoch)
    const int first_epoch = position.global_iteration == 0 ? 0
                            : position.iteration > 0       ? position.epoch + 1
                                                           : position.epoch;
    points.push_back({first_epoch, position.global_iteration,
                      position.epoch + static_cast<double>(position.iteration) /
                                           static_cast<double>(s_.data.iterations_per_epoch),
                      0.0, 0.0, initial});
    barrier(s_.comm);
    if (reached_target()) { // already there (a resumed run): nothing to train
      stopped_early = true;
      return;
    }
    for (int epoch = position.epoch; epoch < o.epochs; ++epoch) {
      // this rank's shard, or with transport coded the whole permutation (every rank needs every
      // part's samples)
      const std::vector<std::int64_t> mine =
          s_.coded ? std::vector<std::int64_t>{} : s_.data.shard(s_.ranks, s_.rank, o.seed, epoch);
      const std::vector<std::int64_t> order =
          s_.coded ? gx::epoch_order(s_.data.train_set.size(), o.seed, epoch)
                   : std::vector<std::int64_t>{};
      const std::int64_t first = epoch == position.epoch ? position.iteration : 0;
      // the evaluations this epoch's iterations before `first` already made
      next_eval_ = 1 + static_cast<int>(first * std::max(1, o.evals_per_epoch) /
                                        s_.data.iterations_per_epoch);
      for (std::int64_t it = first; it < s_.data.iterations_per_epoch; ++it) {
        iterate(epoch, it, mine, order);
        const bool last = it + 1 == s_.data.iterations_per_epoch;
        position = {last ? epoch + 1 : epoch, last ? 0 : it + 1, u_.global_iteration};
        const bool stop =
            (o.stop_after_iterations > 0 && u_.global_iteration >= o.stop_after_iterations) ||
            reached_target();
        if (!o.checkpoint.empty() && !stop && o.checkpoint_every > 0 &&
            u_.global_iteration % o.checkpoint_every == 0) {
          save_checkpoint();
        }
        if (stop) {
          stopped_early = true;
          if (!o.checkpoint.empty()) {
            save_checkpoint();
          }
          return;
        }
      }
    }
    if (!o.checkpoint.empty()) {
      save_checkpoint();
    }
  }

  //! This rank's training state (checkpoint.hpp), read or written in place.
  [[nodiscard]] trainer_state checkpoint_view() {
    return trainer_state(s_.o, s_.ranks, position, s_.model.params, u_.update, u_.scaling,
                         exchange.get());
  }

  training_position position; //!< the next iteration to run
  bool resumed = false;       //!< --resume loaded a checkpoint
  bool stopped_early = false; //!< --stop-after-iterations or --target-accuracy ended training

  //! The first evaluation point whose test accuracy reached --target-accuracy, if any. The
  //! same on every rank (the accuracy is a ratio of integer sums over all ranks).
  [[nodiscard]] const eval_point* target_point() const {
    if (s_.o.target_accuracy <= 0) {
      return nullptr;
    }
    for (const eval_point& p : points) {
      if (p.test.accuracy >= s_.o.target_accuracy) {
        return &p;
      }
    }
    return nullptr;
  }
  //! Whether the latest evaluation reached --target-accuracy. Training stops there, so no
  //! earlier point did: checked after every iteration in O(1); target_point() finds it after.
  [[nodiscard]] bool reached_target() const {
    return s_.o.target_accuracy > 0 && points.back().test.accuracy >= s_.o.target_accuracy;
  }

  iteration_sums totals; //!< this rank's iterations
  //! --replan-after W: this rank's forward and update (pointing .grad at the averages plus the
  //! optimizer step) seconds of its first W iterations in this process, for the report's
  //! prediction from measured times (sync_report.hpp)
  std::vector<double> warmup_forward_seconds, warmup_update_seconds;
  std::vector<eval_point> points; //!< the evaluations, the initial one first
  double train_seconds = 0;       //!< training only (planning included, evaluation excluded)
  //! --ring-trace: the ring's timeline (outlives the exchange that appends to it) and t0 .. t4
  //! of each iteration (start, backward start, backward end, finish end, step end)
  gradcomp::mpi::ring_trace ring_trace;
  std::vector<std::array<double, 5>> iteration_trace;
  //! --density-warmup-epochs, --clip-norm, --adaptive-density (fidelity.hpp, docs/fidelity.md)
  fidelity_remedies remedies;
  std::unique_ptr<gradient_exchange> exchange; //!< the pipeline (null with --transport none)
  std::optional<auto_control> automatic;       //!< --method auto's decisions (auto_method.hpp)

private:
  //! --transport none: no pipeline.
  [[nodiscard]] bool alone() const { return s_.o.transport.name == "none"; }

  //! Loads the newest checkpoint in `dir` that every rank has: a job stopped while its ranks
  //! wrote a checkpoint leaves some ranks at the new iteration and some at the previous one
  //! (write_checkpoint keeps one generation back), so each rank reads the iterations of its
  //! current and previous files, the ranks agree on the newest one all of them hold, and each
  //! loads that file. Collective. @throws agreed_refusal on every rank naming the iterations if
  //! no iteration is held by every rank, or whatever loading a file throws.
  void resume_from(const std::string& dir) {
    const std::string current = checkpoint_state_path(dir, s_.rank);
    // the previous file first: the current one, the usual choice, is then the one loaded last
    const std::array<std::string, 2> paths = {current, previous_checkpoint_path(current)};
    std::array<std::int64_t, 2> held = {-1, -1}; // iterations of the files, -1: none
    std::int64_t loaded = -1;                    // the iteration of the file read last
    for (const std::size_t i : {1, 0}) {
      if (std::ifstream(paths[i]).good()) {
        trainer_state state = checkpoint_view();
        read_checkpoint(state, paths[i]);
        held[i] = loaded = position.global_iteration;
      }
    }
    const std::vector<std::uint64_t> cur =
        allgather(s_.comm, static_cast<std::uint64_t>(held[0] + 1));
    const std::vector<std::uint64_t> prev =
        allgather(s_.comm, static_cast<std::uint64_t>(held[1] + 1));
    std::int64_t chosen = -1;
    for (const std::uint64_t candidate : {cur[0], prev[0]}) {
      bool everywhere = candidate > 0;
      for (std::size_t r = 0; r < cur.size() && everywhere; ++r) {
        everywhere = cur[r] == candidate || prev[r] == candidate;
      }
      if (everywhere) {
        chosen = std::max(chosen, static_cast<std::int64_t>(candidate) - 1);
      }
    }
    if (chosen < 0) {
      std::string all;
      for (std::size_t r = 0; r < cur.size(); ++r) {
        const auto text = [](std::uint64_t v) {
          return v == 0 ? std::string("none") : std::to_string(v - 1);
        };
        all += (r == 0 ? "" : ", ") + text(cur[r]) + "/" + text(prev[r]);
      }
      throw agreed_refusal("gradcomp-train: no iteration of the checkpoints in " + dir +
                           " is held by every rank (current/previous per rank: " + all + ")");
    }
    if (loaded != chosen) {
      trainer_state state = checkpoint_view();
      read_checkpoint(state, paths[held[0] == chosen ? 0 : 1]);
    }
    u_.global_iteration = position.global_iteration;
    resumed = true;
    if (chosen != held[0] && s_.rank == 0) {
      std::printf("gradcomp-train: resuming at iteration %lld, the newest checkpoint every rank "
                  "holds (some ranks wrote a newer one)\n",
                  static_cast<long long>(chosen));
    }
  }

  //! Writes this rank's checkpoint into --checkpoint (between iterations).
  void save_checkpoint() {
    const trainer_state state = checkpoint_view();
    write_checkpoint(state, checkpoint_state_path(s_.o.checkpoint, s_.rank));
  }

  //! One iteration `it` of epoch `epoch` (`mine`: this rank's shard; transport coded: `order`,
  //! the epoch's permutation), then its statistics, the progress line and the evaluation due.
  void iterate(int epoch,
               std::int64_t it,
               const std::vector<std::int64_t>& mine,
               const std::vector<std::int64_t>& order) {
    const auto t0 = clock_type::now();
    if (!alone() && remedies.active()) {
      remedies.before_iteration(u_.global_iteration, u_.learning_rate.at(u_.global_iteration),
                                *exchange, s_.comm);
    }
    if (automatic) {
      automatic->before_iteration(u_.global_iteration, u_.learning_rate.at(u_.global_iteration),
                                  train_seconds, *exchange);
    }
    const backward_times c = s_.coded ? coded_.run(order, it, *exchange, u_.scaling.scale())
                                      : forward_backward(mine, it, t0);
    const auto t2 = clock_type::now();
    if (!alone()) {
      average_into_gradients();
    }
    // loss scaling: agree on overflow, unscale, skip the step on every rank if it overflowed
    const bool apply = u_.scaling.settle(s_.comm, s_.model.params, exchange.get());
    const auto t3 = clock_type::now();
    if (apply) {
      u_.update.step(u_.learning_rate.at(u_.global_iteration));
      if (u_.mp_update) {
        u_.mp_update->step(u_.learning_rate.at(u_.global_iteration));
      }
    }
    if (automatic) { // part of the method: timed with the step
      automatic->after_iteration(*exchange, apply);
    }
    const auto t4 = clock_type::now();
    if (!s_.o.ring_trace.empty()) {
      const auto at = [](clock_type::time_point t) {
        return std::chrono::duration<double>(t.time_since_epoch()).count();
      };
      iteration_trace.push_back({at(t0), at(s_.hooks.backward_start), at(t2), at(t3), at(t4)});
    }
    const auto& st = alone() ? no_stats_ : exchange->last_stats();
    remedies.after_iteration(st, exchange.get());
    add(c, st, t0, t2, t3, t4);
    show_progress(epoch, it);
    // evaluation points: evals per epoch, the last at the epoch's end
    const int evals = std::max(1, s_.o.evals_per_epoch);
    if ((it + 1) * evals >= static_cast<std::int64_t>(next_eval_) * s_.data.iterations_per_epoch) {
      ++next_eval_;
      evaluation_point(epoch, it);
    }
  }

  //! Forward and backward of this rank's batch of iteration `it` of its shard `mine` (the
  //! forward time counts from `t0`, the iteration's start).
  backward_times forward_backward(const std::vector<std::int64_t>& mine,
                                  std::int64_t it,
                                  clock_type::time_point t0) {
    backward_times c;
    const auto [x, y] = s_.data.batch(mine, it * s_.o.batch_size);
    clear_gradients(s_.model.params);
    clear_gradients(s_.model.mp_params);
    const torch::Tensor loss =
        torch::nn::functional::cross_entropy(s_.model.net.module.forward(x), y);
    const auto t1 = clock_type::now();
    s_.hooks.backward_start = t1;
    if (u_.scaling.enabled()) {
      (loss * u_.scaling.scale()).backward();
    } else {
      loss.backward();
    }
    c.forward = std::chrono::duration<double>(t1 - t0).count();
    c.backward = seconds_since(t1);
    c.loss = loss.item<double>();
    c.samples = x.size(0);
    return c;
  }

  //! Waits for the pipeline; .grad becomes a view of its average (valid until the next
  //! finish(); the optimizer only reads it, and clear_gradients() drops the view before the next
  //! backward).
  void average_into_gradients() {
    exchange->finish();
    std::vector<torch::Tensor>& params = s_.model.params;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::span<const float> avg = exchange->averaged(i);
      params[i].mutable_grad() = torch::from_blob(const_cast<float*>(avg.data()), params[i].sizes(),
                                                  torch::TensorOptions().dtype(torch::kFloat32));
    }
  }

  //! Adds one iteration (started at t0, backward ended at t2, exchange settled at t3, step ended
  //! at t4) to the totals and the training loss.
  void add(const backward_times& c,
           const gradcomp::pipeline_iteration_stats& st,
           clock_type::time_point t0,
           clock_type::time_point t2,
           clock_type::time_point t3,
           clock_type::time_point t4) {
    iteration_sums& s = totals;
    const double iteration = std::chrono::duration<double>(t4 - t0).count();
    s.iteration += iteration;
    s.forward += c.forward;
    s.backward += c.backward - st.compress_seconds;
    s.compress += st.compress_seconds;
    s.finish_wait += st.finish_wait_seconds;
    const double apply = std::chrono::duration<double>(t3 - t2).count() - st.finish_wait_seconds;
    const double step = std::chrono::duration<double>(t4 - t3).count();
    s.apply += apply;
    s.communicate += st.communicate_seconds;
    s.communicate_cpu += st.communicate_cpu_seconds;
    s.step += step;
    if (std::cmp_less(warmup_forward_seconds.size(), s_.o.replan_after)) {
      warmup_forward_seconds.push_back(c.forward);
      warmup_update_seconds.push_back(apply + step);
    }
    s.bytes_sent += static_cast<double>(st.bytes_sent);
    s.bytes_received += static_cast<double>(st.bytes_received);
    s.selected += static_cast<double>(st.selected);
    s.numel += static_cast<double>(st.numel);
    for (const auto& l : st.layers) {
      s.fallbacks += l.fallback ? 1 : 0;
      ++s.compress_calls;
    }
    ++s.iterations;
    ++u_.global_iteration;
    train_seconds += iteration;
    if (c.samples > 0) {
      loss_sum_ += c.loss;
      ++loss_count_;
    }
  }

  //! The progress line on a terminal (rank 0), every 10 iterations and at the epoch's end.
  void show_progress(int epoch, std::int64_t it) const {
    const std::int64_t n = s_.data.iterations_per_epoch;
    if (s_.root && stderr_is_terminal() && (it % 10 == 9 || it + 1 == n)) {
      std::fprintf(stderr, "\rgradcomp-train: epoch %d/%d  %5lld/%lld  loss %.4f  %.1f ms/it ",
                   epoch + 1, s_.o.epochs, static_cast<long long>(it + 1),
                   static_cast<long long>(n), loss_sum_ / loss_count_,
                   1000.0 * totals.iteration / static_cast<double>(totals.iterations));
    }
  }

  //! An evaluation point after iteration `it` of epoch `epoch`: the training loss over all ranks
  //! since the last one and the test set's accuracy and loss. Collective.
  void evaluation_point(int epoch, std::int64_t it) {
    double l[2] = {loss_sum_, static_cast<double>(loss_count_)};
    allreduce(s_.comm, std::span<double>(l), MPI_SUM);
    const double epochs_done = epoch + static_cast<double>(it + 1) / s_.data.iterations_per_epoch;
    const double train_loss = l[0] / std::max(1.0, l[1]);
    if (!std::isfinite(train_loss)) { // the same sum on every rank: all stop here together
      throw agreed_refusal(gradcomp_tools::format("the training diverged: the training loss over "
                                                  "all ranks is %g at epoch %.2f (iteration "
                                                  "%lld). Hint: %s",
                                                  train_loss, epochs_done,
                                                  static_cast<long long>(u_.global_iteration),
                                                  divergence_hint),
                           exit_diverged);
    }
    // staged (it may stop early far below the target) unless the epoch ends here
    const evaluation e = s_.evaluate(it + 1 < s_.data.iterations_per_epoch);
    points.push_back({epoch + 1, u_.global_iteration, epochs_done, train_seconds, train_loss, e});
    loss_sum_ = 0;
    loss_count_ = 0;
    if (s_.root) {
      if (stderr_is_terminal()) {
        std::fputc('\n', stderr);
      }
      std::fprintf(stderr,
                   "gradcomp-train: epoch %.2f: test accuracy %.2f %%%s, test loss %.4f, "
                   "train loss %.4f, %.1f s training, %.1f ms/iteration\n",
                   points.back().epochs_done, 100.0 * e.accuracy,
                   e.samples < s_.data.test_set.size()
                       ? gradcomp_tools::format(" (stopped early: %lld test images)",
                                                static_cast<long long>(e.samples))
                             .c_str()
                       : "",
                   e.loss, points.back().train_loss, train_seconds,
                   1000.0 * totals.iteration / static_cast<double>(totals.iterations));
      if (target_point() == &points.back()) {
        std::fprintf(stderr,
                     "gradcomp-train: the test accuracy reached --target-accuracy %.2f %% after "
                     "%.1f s of training: training stops\n",
                     100.0 * s_.o.target_accuracy, train_seconds);
      }
    }
    barrier(s_.comm); // ranks leave evaluation together, so iteration timings stay comparable
  }

  sync_setup& s_;
  sync_update& u_;
  coded_backward coded_;
  torch::Tensor keep_; // the current gradient's contiguous copy, if it needs one
  const gradcomp::pipeline_iteration_stats no_stats_{};
  double loss_sum_ = 0;
  std::int64_t loss_count_ = 0;
  int next_eval_ = 1;
};

} // namespace gradcomp_train
