// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What gradcomp-train's synchronous and asynchronous training share: the options, MPI
//! helpers that wait through gradcomp's wait policy, the model, the replicas' hash and the
//! test-set evaluation.
#pragma once

#include <gradcomp/mpi.hpp>

#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "../common/sample_order.hpp"
#include "../common/staged_evaluation.hpp"
#include "../common/tool_support.hpp"
#include "exchange.hpp"
#include "fidelity.hpp"
#include "large_batch.hpp"

namespace gradcomp_train {

namespace gx = gradcomp_apps;

//! Exit statuses besides 0 (success) and 1 (an exception, a report that cannot be written).
inline constexpr int exit_bad_input = 2;
inline constexpr int exit_replicas_differ = 3;
inline constexpr int exit_accuracy_low = 4;
inline constexpr int exit_diverged = 5; //!< the training loss became NaN or infinite

//! What to try when the training diverged (a NaN or infinite loss, a NaN refused by the wire).
inline constexpr const char* divergence_hint =
    "--nonfinite raise names the first layer whose gradient is not finite; a lower --lr or "
    "--clip-norm C (DGC's local clipping) usually helps, and --factor-masking false without "
    "--density-warmup-epochs can diverge (docs/fidelity.md)";

//! A refusal every rank reaches together (the ranks agreed on it, e.g. no checkpoint iteration
//! that every rank holds, or a training loss that is no longer finite): main() prints it once
//! and ends every rank with exit_status() (exit_bad_input unless given) through MPI_Finalize
//! instead of MPI_Abort, so no rank's output is cut off.
class agreed_refusal : public std::runtime_error {
public:
  //! A refusal with message `what` (printed once, by rank 0) that ends every rank with
  //! `exit_status`.
  explicit agreed_refusal(const std::string& what, int exit_status = exit_bad_input)
      : std::runtime_error(what), exit_status_(exit_status) {}
  //! The status every rank ends with.
  [[nodiscard]] int exit_status() const noexcept { return exit_status_; }

private:
  int exit_status_;
};

using clock_type = std::chrono::steady_clock;

//! The median of `v` (the upper one of an even count). @pre !v.empty(). O(n).
inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

//! Seconds from `t0` to now.
inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

//! The command line (docs/train.md lists every option).
struct train_options {
  method_settings method;
  transport_settings transport;
  std::string merge = "size_threshold";
  std::string model = "cnn";
  int epochs = 2;
  int batch_size = 32;
  std::int64_t train_limit = 0;
  std::int64_t test_limit = 0; //!< evaluate on the first N test samples (0: all 10,000)
  double lr = 0.04;
  double momentum = 0.9;
  std::uint64_t seed = 1;
  std::string data = gx::debian_fashion_mnist_dir;
  std::string report;
  std::string label;
  std::string ring_trace; //!< --ring-trace: per-rank CSV prefix of the ring's timeline.
  int threads = 1;
  int evals_per_epoch = 4;
  //! --eval-stages: an evaluation between epoch ends, with --target-accuracy, runs in this many
  //! parts of the test set and stops after one whose accuracy is surely below the target
  //! (apps/common/staged_evaluation.hpp); 1: always the whole test set.
  int eval_stages = 4;
  int profile_iterations = 5;
  //! Re-plan the merge once after this many iterations from the backward times the pipeline
  //! measured (0: never).
  int replan_after = 0;
  //! With replan_after > 0: "replan" adopts the new plan; "keep" keeps the initial one and
  //! only predicts the iteration from the measured times (--replan-mode).
  std::string replan_mode = "replan";
  //! Calibrate the planner's network model while forward and backward passes load the cores.
  bool calibrate_under_load = true;
  double bucket_mib = 25.0;
  double require_accuracy = 0.0;
  //! --target-accuracy: training stops at the first evaluation whose test accuracy reaches it
  //! (a fraction; 0: train every --epochs, which is then the cap).
  double target_accuracy = 0.0;
  bool momentum_correction = true;
  bool factor_masking = true; // --factor-masking: DGC zeroes the velocity of sent elements
  //! "sync" (every transport) or "async" (ASGD through mpi::async_parameter_server: the last
  //! --servers ranks serve, the others train without a barrier; --transport ps only).
  std::string sync = "sync";
  //! async: the SSP staleness bound (0: pure ASGD).
  int staleness_bound = 0;
  //! precision, loss scaling, optimizer and warm-up (large_batch.hpp; sync only).
  large_batch_settings large_batch;
  //! density warm-up, local clipping, adaptive density (fidelity.hpp; sync only).
  fidelity_settings fidelity;
  //! --parallel data|hybrid and --mp-layers (hybrid.hpp; sync only).
  std::string parallel = "data";
  std::string mp_layers = "auto";
  //! --checkpoint DIR, --checkpoint-every N, --resume DIR, --stop-after-iterations N
  //! (checkpoint.hpp, docs/checkpoint.md; sync data-parallel training only).
  std::string checkpoint;
  std::int64_t checkpoint_every = 0;
  std::string resume;
  std::int64_t stop_after_iterations = 0;
};

// ---- MPI helpers (nonblocking + gradcomp's wait policy: no busy-polling blocking call) ------

template <class T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
inline MPI_Datatype mpi_type<std::uint64_t>() {
  return MPI_UINT64_T;
}

//! MPI_Iallreduce in place, waited for. Collective.
template <class T>
void allreduce(const gradcomp::mpi::communicator& comm, std::span<T> values, MPI_Op op) {
  MPI_Request r = MPI_REQUEST_NULL;
  gradcomp::mpi::check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                      mpi_type<T>(), op, comm.native(), &r),
                       "MPI_Iallreduce");
  gradcomp::mpi::wait(r);
}

//! Every rank's `mine`, in rank order. Collective.
template <class T>
std::vector<T> allgather(const gradcomp::mpi::communicator& comm, T mine) {
  std::vector<T> all(static_cast<std::size_t>(comm.size()));
  MPI_Request r = MPI_REQUEST_NULL;
  gradcomp::mpi::check(
      MPI_Iallgather(&mine, 1, mpi_type<T>(), all.data(), 1, mpi_type<T>(), comm.native(), &r),
      "MPI_Iallgather");
  gradcomp::mpi::wait(r);
  return all;
}

//! MPI_Ibarrier, waited for. Collective.
inline void barrier(const gradcomp::mpi::communicator& comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  gradcomp::mpi::check(MPI_Ibarrier(comm.native(), &r), "MPI_Ibarrier");
  gradcomp::mpi::wait(r);
}

// ---- the model ---------------------------------------------------------------------------------

//! A network of apps/common/fashion_mnist.hpp, type-erased.
struct network {
  torch::nn::AnyModule module;
  std::shared_ptr<torch::nn::Module> base;
  gx::fc_overrides* fc = nullptr; //!< the model's FC-layer replacements (hybrid parallelism).
};

//! --model: "cnn", "vgg" or "mlp".
inline network make_network(const std::string& name) {
  if (name == "vgg") {
    gx::vgg m;
    return {torch::nn::AnyModule(m), m.ptr(), &m->fc};
  }
  if (name == "mlp") {
    gx::mlp m;
    return {torch::nn::AnyModule(m), m.ptr(), &m->fc};
  }
  gx::cnn m;
  return {torch::nn::AnyModule(m), m.ptr(), &m->fc};
}

//! FNV-1a over the bit patterns of every parameter, in order.
inline std::uint64_t parameter_hash(const std::vector<torch::Tensor>& params) {
  std::uint64_t h = 1469598103934665603ull;
  for (const torch::Tensor& p : params) {
    const torch::Tensor c = p.detach().contiguous();
    const float* v = c.data_ptr<float>();
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      h = (h ^ std::bit_cast<std::uint32_t>(v[i])) * 1099511628211ull;
    }
  }
  return h;
}

//! Rank 0's parameters to every rank (PyTorch DDP does the same at construction). Collective.
inline void broadcast_parameters(const gradcomp::mpi::communicator& comm,
                                 const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : params) {
    MPI_Request r = MPI_REQUEST_NULL;
    gradcomp::mpi::check(MPI_Ibcast(p.data_ptr<float>(), static_cast<int>(p.numel()), MPI_FLOAT, 0,
                                    comm.native(), &r),
                         "MPI_Ibcast");
    gradcomp::mpi::wait(r);
  }
}

//! Which BLAS library this process mapped (Debian's LibTorch calls libblas.so.3 through the
//! alternatives system: OpenBLAS if installed, else the slow reference BLAS).
inline std::string blas_in_use() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    const std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos && path.find(".so") != std::string::npos) {
      std::error_code ec;
      const std::string real = std::filesystem::canonical(path, ec).string();
      found = ec ? path : real;
      if (found.find("openblas") != std::string::npos) {
        break;
      }
    }
  }
  if (found.empty()) {
    return "unknown (no BLAS library mapped)";
  }
  return found +
         (found.find("openblas") != std::string::npos ? " (OpenBLAS)" : " (reference BLAS: slow)");
}

// ---- evaluation ------------------------------------------------------------------------------

//! Test-set accuracy (fraction), mean cross-entropy loss, and what the evaluation cost.
struct evaluation {
  double accuracy = 0;
  double loss = 0;
  double seconds = 0; //!< this rank's wall time of the evaluation (forward passes + allreduce)
  //! test images evaluated over all ranks: the whole test set, or fewer when a staged
  //! evaluation stopped early (accuracy and loss are then those of this random sample)
  std::int64_t samples = 0;
};

//! Test images per forward pass of an evaluation. Batches of 100 keep the CNN's activations
//! near the caches (1000 images make 100 MB after conv1): in one process, LibTorch's CPU
//! forward of a batch of 1000 cost 2.4x as much per image as batches of 100. With 4 ranks on
//! 2 cores an evaluation costs 1.0-1.2x its forward passes at training speed
//! (benchmark/run_eval_cost.sh).
inline constexpr std::int64_t evaluation_batch = 100;

//! Test accuracy and mean loss over the test set, each rank of `comm` evaluating 1/P of it
//! with its own replica in batches of evaluation_batch. With stages > 1 and target > 0 the
//! evaluation runs in `stages` parts and stops after a part whose accuracy so far is surely
//! below `target` (apps/common/staged_evaluation.hpp; the test set must be in test_order).
//! Collective over `comm` (one allreduce of 3 doubles per stage run).
inline evaluation evaluate(const gradcomp::mpi::communicator& comm,
                           network& net,
                           const gx::dataset& test,
                           int stages = 1,
                           double target = 0) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  net.base->eval();
  const std::int64_t n = test.size();
  const std::int64_t begin = n * comm.rank() / comm.size();
  const std::int64_t end = n * (comm.rank() + 1) / comm.size();
  const int parts = target > 0 ? std::max(1, stages) : 1;
  double total[3] = {0, 0, 0}; // correct, loss sum, count: over all ranks, the stages so far
  for (int s = 0; s < parts; ++s) {
    const auto [first, last] = gx::stage_range(begin, end, s, parts);
    double sums[3] = {0, 0, static_cast<double>(last - first)};
    for (std::int64_t b = first; b < last; b += evaluation_batch) {
      const std::int64_t len = std::min<std::int64_t>(evaluation_batch, last - b);
      const torch::Tensor logits = net.module.forward(test.images.narrow(0, b, len));
      const torch::Tensor labels = test.labels.narrow(0, b, len);
      sums[0] += static_cast<double>(logits.argmax(1).eq(labels).sum().item<std::int64_t>());
      sums[1] += torch::nn::functional::cross_entropy(
                     logits, labels,
                     torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    }
    allreduce(comm, std::span<double>(sums), MPI_SUM);
    for (int k = 0; k < 3; ++k) {
      total[k] += sums[k];
    }
    // integer counts, exact in doubles and the same on every rank: all stop together
    if (gx::can_stop_early(static_cast<std::int64_t>(total[0]), static_cast<std::int64_t>(total[2]),
                           n, target)) {
      break;
    }
  }
  net.base->train();
  return {total[0] / total[2], total[1] / total[2],
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          static_cast<std::int64_t>(total[2])};
}

//! `test` in the fixed order of staged evaluations (epoch_order(n, test_order_seed, 0)), so
//! that every prefix of it is a random sample. Accuracy over the whole set does not change.
inline void put_in_test_order(gx::dataset& test) {
  std::vector<std::int64_t> order = gx::epoch_order(test.size(), gx::test_order_seed, 0);
  const torch::Tensor index =
      torch::from_blob(order.data(), {static_cast<std::int64_t>(order.size())}, torch::kInt64)
          .clone();
  test.images = test.images.index_select(0, index);
  test.labels = test.labels.index_select(0, index);
}

//! @brief Loads the Fashion-MNIST training set (its first o.train_limit samples; 0: all) and the
//! test set (its first o.test_limit samples; 0: all, put in test order) from o.data into
//! `train_set` and `test_set`.
//! Returns "" or the problem: files missing, unreadable data, or fewer training samples than
//! `consumers` (the ranks or workers that each need one, called `consumer_name` in the message).
inline std::string load_data(const train_options& o,
                             int consumers,
                             const char* consumer_name,
                             gx::dataset& train_set,
                             gx::dataset& test_set) {
  const auto missing = gx::missing_idx_files(o.data);
  if (!missing.empty()) {
    return "the Fashion-MNIST files are not in '" + o.data + "' (missing " + missing.front() +
           "[.gz]); install Debian's dataset-fashion-mnist or pass --data DIR";
  }
  try {
    train_set = gx::load_fashion_mnist(o.data, true, o.train_limit);
    test_set = gx::load_fashion_mnist(o.data, false, o.test_limit);
    put_in_test_order(test_set);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (train_set.size() < consumers) {
    return gradcomp_tools::format("%d %s but only %lld training samples: each needs at least one",
                                  consumers, consumer_name,
                                  static_cast<long long>(train_set.size()));
  }
  return {};
}

//! @brief Whether any rank found a problem with the input (collective over `comm`: every rank
//! must call it). A rank with a problem prints it to stderr, naming its rank.
inline bool any_rank_has_problem(const gradcomp::mpi::communicator& comm,
                                 const std::string& problem) {
  double flag[1] = {problem.empty() ? 0.0 : 1.0};
  allreduce(comm, std::span<double>(flag), MPI_MAX);
  if (!problem.empty()) {
    std::fprintf(stderr, "gradcomp-train: error (rank %d): %s\n", comm.rank(), problem.c_str());
  }
  return flag[0] != 0.0;
}

//! The batch of up to `batch_size` samples of `shard_indices` (a rank's or worker's shard of
//! `shard_size` sample indices into `set`) from position `begin`: (images, labels).
inline std::pair<torch::Tensor, torch::Tensor>
shard_batch(const gx::dataset& set,
            const std::vector<std::int64_t>& shard_indices,
            std::int64_t shard_size,
            std::int64_t begin,
            int batch_size) {
  const std::int64_t len = std::min<std::int64_t>(batch_size, shard_size - begin);
  const torch::Tensor index = torch::tensor(
      std::vector<std::int64_t>(shard_indices.begin() + begin, shard_indices.begin() + begin + len),
      torch::kInt64);
  return {set.images.index_select(0, index), set.labels.index_select(0, index)};
}

//! Sets every parameter's gradient to "none" before a backward: autograd then hands over its
//! gradient tensors instead of adding them into zeroed ones, and .grad can later point at an
//! exchange's averages without a copy (what PyTorch's zero_grad(set_to_none=True) does).
inline void clear_gradients(std::vector<torch::Tensor>& params) {
  for (torch::Tensor& p : params) {
    p.mutable_grad() = torch::Tensor();
  }
}

} // namespace gradcomp_train
