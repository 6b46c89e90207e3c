// SPDX-License-Identifier: Apache-2.0
// The pieces a training loop adds around gradcomp's pipeline, each in a short run on a small
// model (a linear layer, weights and bias, fitted to a fixed random linear map; each rank draws
// its own batches), with exact top-k and error feedback over the sparse allgather:
//  1. DGC's density warm-up and local gradient clipping (docs/fidelity.md);
//  2. dynamic loss scaling with an fp16 overflow check agreed by every rank (docs/large-batch.md);
//  3. LARS with a polynomial learning-rate schedule (docs/large-batch.md);
//  4. a step with a NaN on one rank, skipped by every rank (docs/compressors.md, skip_step);
//  5. online re-planning of the merge groups from measured backward times (docs/pipeline.md).
// Each run must lower the loss and leave bit-identical parameters on every rank; runs 2 and 4
// must skip the steps they are built to skip, run 5 must re-plan. Exits 1 on every rank
// otherwise. Needs gradcomp::mpi. Run:
//   mpiexec -n 2 build/examples/10_training_loop/gradcomp_example_training_loop
#include <gradcomp/compressor/density_schedule.hpp>
#include <gradcomp/compressor/local_clipping.hpp>
#include <gradcomp/gradcomp.hpp> // the compressors
#include <gradcomp/mpi.hpp>
#include <gradcomp/optimizer/lars.hpp>
#include <gradcomp/optimizer/lr_schedule.hpp>
#include <gradcomp/pipeline.hpp>
#include <gradcomp/precision/loss_scale.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t inputs = 32, outputs = 8, batch = 16;
const std::vector<std::size_t> numel = {outputs * inputs, outputs}; // layer 0: W, layer 1: b

//! The model: y = W x + b.
struct toy_model {
  std::vector<std::vector<float>> layers = {std::vector<float>(outputs * inputs, 0.01f),
                                            std::vector<float>(outputs, 0.0f)};
};

//! The data: x ~ N(0, 1), y = W* x + b* for a fixed W*, b*; each rank draws its own batches.
class toy_problem {
public:
  explicit toy_problem(int rank) : rng_(100u + static_cast<unsigned>(rank)) {
    std::mt19937 teacher(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : w_) {
      v = normal(teacher) / std::sqrt(static_cast<float>(inputs));
    }
    for (float& v : b_) {
      v = normal(teacher);
    }
  }

  //! The next batch's loss, mean of 0.5 ||W x + b - y||^2, and its gradient per layer, both
  //! multiplied by `scale` (a loss scale; 1 without).
  double gradients(const toy_model& m, double scale, std::vector<std::vector<float>>& grads) {
    grads = {std::vector<float>(numel[0], 0.0f), std::vector<float>(numel[1], 0.0f)};
    double loss = 0.0;
    std::vector<float> x(inputs);
    for (std::size_t s = 0; s < batch; ++s) {
      std::generate(x.begin(), x.end(), [&] { return normal_(rng_); });
      for (std::size_t o = 0; o < outputs; ++o) {
        float predicted = m.layers[1][o], wanted = b_[o];
        for (std::size_t i = 0; i < inputs; ++i) {
          predicted += m.layers[0][o * inputs + i] * x[i];
          wanted += w_[o * inputs + i] * x[i];
        }
        const float error = predicted - wanted;
        loss += 0.5 * error * error / batch;
        const auto e = static_cast<float>(error * scale / batch);
        for (std::size_t i = 0; i < inputs; ++i) {
          grads[0][o * inputs + i] += e * x[i];
        }
        grads[1][o] += e;
      }
    }
    return loss;
  }

private:
  std::vector<float> w_ = std::vector<float>(outputs * inputs), b_ = std::vector<float>(outputs);
  std::mt19937 rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

//! Hands every layer's gradient to the pipeline, last layer first, as backward hooks would.
template <class Pipeline>
void report_gradients(Pipeline& pipe, const std::vector<std::vector<float>>& grads) {
  for (std::size_t l = grads.size(); l-- > 0;) {
    pipe.gradient_ready(l, grads[l]);
  }
}

//! Plain SGD on the pipeline's averages: w -= learning_rate x factor x average.
template <class Pipeline>
void sgd_step(toy_model& m, const Pipeline& pipe, double learning_rate, double factor = 1.0) {
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const std::span<const float> average = pipe.averaged(l);
    for (std::size_t i = 0; i < average.size(); ++i) {
      m.layers[l][i] -= static_cast<float>(learning_rate * factor * average[i]);
    }
  }
}

//! The run's verdict: the loss fell (mean of the last 5 iterations below `ratio` x the first
//! 5's) and the parameters are finite and bit-identical on every rank.
bool trained(const toy_model& m, const std::vector<double>& losses, double ratio = 0.8) {
  double first = 0.0, last = 0.0;
  for (std::size_t i = 0; i < 5; ++i) {
    first += losses[i];
    last += losses[losses.size() - 1 - i];
  }
  bool ok = last < ratio * first;
  for (const std::vector<float>& layer : m.layers) {
    std::vector<float> zero = layer;
    MPI_Bcast(zero.data(), static_cast<int>(zero.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    ok = ok && zero == layer &&
         std::all_of(layer.begin(), layer.end(), [](float v) { return std::isfinite(v); });
  }
  return ok;
}

//! 1. Density warm-up (25 % down to 0.1 % over 4 epochs of 5 iterations) and local clipping.
bool density_warmup_and_clipping(const gradcomp::mpi::communicator& comm) {
  gradcomp::mpi::sparse_exchange exchange(comm);
  gradcomp::pipeline pipe(numel, gradcomp::pipeline_policy::fixed_grouping{}, // one group per layer
                          gradcomp::exact_top_k(0.25), exchange);
  toy_problem problem(comm.rank());
  toy_model model;
  const std::uint64_t iterations = 40, iterations_per_epoch = 5;
  const double global_max_norm = 4.0; // C, the clipping threshold of the averaged gradient
  const auto workers = static_cast<std::size_t>(comm.size());
  std::vector<double> losses;
  std::vector<std::size_t> sent;
  std::size_t clipped = 0;
  gradcomp::density_warmup w{.initial_density = 0.25,
                             .final_density = 0.001,
                             .warmup_epochs = 4};  // stepped = true: one density per epoch
  for (std::uint64_t i = 0; i < iterations; ++i) { // every iteration (a step boundary)
    pipe.set_density(w.at_iteration(i, iterations_per_epoch));
    // then backward, gradient_ready and finish (here with local clipping first)
    std::vector<std::vector<float>> g;
    losses.push_back(problem.gradients(model, 1.0, g));
    const double local = gradcomp::local_clip_threshold(global_max_norm, workers); // C / sqrt(N)
    std::vector<std::span<float>> grads = {g[0], g[1]}; // this worker's gradient, every layer
    gradcomp::clip_result r = gradcomp::clip_by_global_norm(grads, local);
    // then error_feedback::compress / pipeline::gradient_ready for each layer
    clipped += r.clipped ? 1 : 0; // r.norm: the norm before, r.scale: the factor applied
    report_gradients(pipe, g);
    pipe.finish();
    sgd_step(model, pipe, 0.1);
    sent.push_back(pipe.last_stats().selected);
  }
  // 25 % of each layer (64 + 2 of 264 elements) on the first iteration, 1 per layer at the
  // end; the first gradients are clipped
  return trained(model, losses) && sent.front() == 66 && sent.back() == 2 && clipped > 0;
}

//! 2. Dynamic loss scaling: the first step overflows fp16 at the initial scale 2^16 and is
//! skipped by every rank; the scale halves until the gradients fit.
bool loss_scaling(const gradcomp::mpi::communicator& comm,
                  const gradcomp::mpi::communicator& agree_comm) {
  gradcomp::mpi::sparse_exchange exchange(comm);
  gradcomp::pipeline pipeline(numel, gradcomp::pipeline_policy::fixed_grouping{},
                              gradcomp::exact_top_k(0.1), exchange);
  toy_problem problem(comm.rank());
  toy_model model;
  std::vector<double> losses;
  std::size_t skipped = 0;
  std::vector<std::vector<float>> grads;
  gradcomp::loss_scale scale; // dynamic: 2^16, x0.5 on overflow,
                              // x2 after 2000 clean steps, within [1, 2^24]
  for (int iteration = 0; iteration < 40; ++iteration) {
    // per step, on every rank: every gradient arrives multiplied by the scale
    losses.push_back(problem.gradients(model, scale.scale(), grads));
    bool overflow = false;
    for (const std::vector<float>& g : grads) {
      overflow |= gradcomp::has_overflow(g, gradcomp::value_type::fp16);
    }
    overflow = gradcomp::mpi::any_rank(overflow, agree_comm); // 4 bytes: all ranks agree
    const double used = scale.scale();
    const gradcomp::loss_scale_step step = scale.update(overflow);
    if (step.apply) {
      report_gradients(pipeline, grads); // the exchange: any compressor, any transport
      pipeline.finish();
      sgd_step(model, pipeline, 0.1, 1.0 / used); // on the averages x 1 / used, fp32 weights
    }
    pipeline.rescale_state(static_cast<float>(step.factor)); // residuals follow the scale
    skipped += step.apply ? 0 : 1;
  }
  return trained(model, losses) && skipped >= 1 && scale.scale() < 65536.0;
}

//! 3. LARS, one call per layer on the averaged gradient, with the linear warm-up and polynomial
//! decay of the learning rate; no weight decay on the bias.
bool lars(const gradcomp::mpi::communicator& comm) {
  gradcomp::mpi::sparse_exchange exchange(comm);
  gradcomp::pipeline pipe(numel, gradcomp::pipeline_policy::fixed_grouping{},
                          gradcomp::exact_top_k(0.1), exchange);
  toy_problem problem(comm.rank());
  toy_model model;
  std::vector<std::vector<float>> velocity = {std::vector<float>(numel[0], 0.0f),
                                              std::vector<float>(numel[1], 0.0f)};
  const auto is_bias = [](std::size_t l) { return l == 1; };
  std::vector<double> losses;
  const gradcomp::warmup_poly_schedule lr{.base = 3.2, .warmup_steps = 5, .total_steps = 100};
  const gradcomp::lars_options o{.momentum = 0.9, .weight_decay = 5e-4, .trust_coefficient = 1e-2};
  for (std::size_t step = 0; step < 40; ++step) {
    std::vector<std::vector<float>> grads;
    losses.push_back(problem.gradients(model, 1.0, grads));
    report_gradients(pipe, grads);
    pipe.finish();
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
      gradcomp::lars_step(model.layers[l], pipe.averaged(l), velocity[l], lr.at(step), o,
                          {.weight_decay = !is_bias(l)}); // S4's rule
    }
  }
  return trained(model, losses, 0.9);
}

//! 4. skip_step: rank 1's gradient holds a NaN at iteration 3; the compressor drops it and counts
//! it, every rank agrees to skip the step and gives back what it sent.
bool skip_nonfinite_step(const gradcomp::mpi::communicator& comm,
                         const gradcomp::mpi::communicator& agree_comm) {
  gradcomp::mpi::sparse_exchange exchange(comm);
  gradcomp::pipeline pipe(
      numel, gradcomp::pipeline_policy::fixed_grouping{},
      gradcomp::exact_top_k({.density = 0.1, .nonfinite = gradcomp::nonfinite_policy::skip_step}),
      exchange);
  toy_problem problem(comm.rank());
  toy_model model;
  std::vector<double> losses;
  const double learning_rate = 0.1;
  std::size_t skipped = 0;
  for (int iteration = 0; iteration < 40; ++iteration) {
    std::vector<std::vector<float>> grads;
    losses.push_back(problem.gradients(model, 1.0, grads));
    if (iteration == 3 && comm.rank() == std::min(1, comm.size() - 1)) {
      grads[0][5] = std::numeric_limits<float>::quiet_NaN();
    }
    report_gradients(pipe, grads);
    pipe.finish();
    if (gradcomp::mpi::any_rank(pipe.last_stats().nonfinite > 0, agree_comm)) { // every rank
      pipe.return_sent(); // the values this step sent go back to the residuals, exactly
      ++skipped;
    } else {
      sgd_step(model, pipe, learning_rate); // the optimizer step
    }
  }
  return trained(model, losses) && skipped == 1;
}

//! 5. Online re-planning: the merge groups planned again, once, from the backward times the
//! pipeline measured over its first 20 iterations; rank 0's plan agreed by every rank.
bool online_replanning(const gradcomp::mpi::communicator& comm,
                       const gradcomp::mpi::communicator& agree_comm) {
  const double alpha = 50e-6, beta = 8e-9; // 50 us per message, 1 Gbit/s
  gradcomp::exact_top_k compressor(0.1);
  gradcomp::mpi::sparse_exchange exchange(comm);
  toy_problem problem(comm.rank());
  toy_model model;
  std::vector<double> losses;
  gradcomp::pipeline_policy::planned_grouping planner;
  planner.strategy = gradcomp::schedule::strategy::optimal;
  planner.model = gradcomp::schedule::cost_model::affine(alpha, beta);
  planner.replan_after = 20; // W: re-plan after 20 iterations
  gradcomp::mpi::agreed_grouping<gradcomp::pipeline_policy::planned_grouping> policy{&agree_comm,
                                                                                     planner};
  gradcomp::pipeline pipe(numel, policy, compressor, exchange);

  bool replanned = false;
  for (int iteration = 0; iteration < 30; ++iteration) { // every iteration:
    std::vector<std::vector<float>> grads;
    pipe.begin_backward(); // optional, right before backward
    losses.push_back(problem.gradients(model, 1.0, grads));
    report_gradients(pipe, grads); // a model's hooks call pipe.gradient_ready(l, g)
    pipe.finish();                 // the 20th also re-plans
    if (pipe.replanned()) { // from the 20th on: pipe.groups(), pipe.measured_backward_seconds()
      replanned = pipe.measured_backward_seconds().size() == numel.size();
    }
    sgd_step(model, pipe, 0.1);
  }
  return trained(model, losses) && replanned;
}

} // namespace

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  const gradcomp::mpi::communicator comm(MPI_COMM_WORLD);       // the exchanges'
  const gradcomp::mpi::communicator agree_comm(MPI_COMM_WORLD); // the training thread's own
  bool ok = true;
  const auto check = [&](std::string_view what, bool passed) {
    int all = passed ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (comm.rank() == 0) {
      std::printf("%s: %.*s\n", all ? "ok" : "FAILED", static_cast<int>(what.size()), what.data());
    }
    ok = ok && all == 1;
  };
  check("density warm-up and local clipping", density_warmup_and_clipping(comm));
  check("loss scaling, fp16 overflow skipped on every rank", loss_scaling(comm, agree_comm));
  check("LARS", lars(comm));
  check("a NaN on one rank: the step skipped on every rank", skip_nonfinite_step(comm, agree_comm));
  check("online re-planning", online_replanning(comm, agree_comm));
  if (comm.rank() == 0) {
    std::printf(ok ? "ok: %d ranks\n" : "FAILED: %d ranks\n", comm.size());
  }
  return ok ? 0 : 1;
}
