// SPDX-License-Identifier: Apache-2.0
// LibTorch training with gradcomp in the loop, in one process. A small MLP learns a synthetic
// 4-class problem; a backward hook hands each parameter's gradient to a gradcomp::pipeline as
// soon as autograd produces it, the pipeline keeps 5 % of it (reused_threshold, error feedback
// per layer) and averages it through the one-process transport (loopback_exchange: the average
// over one worker is its own message), and the optimizer steps on what came back instead of
// the dense gradient. Over MPI only the transport changes (gradcomp::mpi::sparse_exchange, see
// examples/03_mpi_vector and docs/pipeline.md). Exits 1 unless held-out accuracy reaches 90 %.
// Needs gradcomp::core and LibTorch. Run: build/examples/gradcomp_example_torch_pipeline
#include <gradcomp/gradcomp.hpp> // the compressors
#include <gradcomp/pipeline.hpp>
#include <gradcomp/tensor/torch.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <span>
#include <vector>

namespace {

constexpr std::int64_t input_features = 32;
constexpr std::int64_t classes = 4;
constexpr double required_test_accuracy = 0.90;

//! Labelled samples: inputs x (samples x input_features) and class labels y (samples).
struct dataset {
  torch::Tensor x, y;
};

//! Linearly separable data: x ~ N(0, I), label = argmax(x teacher) for a fixed random teacher.
dataset make_dataset(std::int64_t samples, const torch::Tensor& teacher) {
  torch::Tensor x = torch::randn({samples, input_features});
  return {x, x.matmul(teacher).argmax(1)};
}

//! Fraction of `data` that `model` classifies correctly.
double accuracy(torch::nn::Sequential& model, const dataset& data) {
  torch::NoGradGuard no_grad;
  return model->forward(data.x).argmax(1).eq(data.y).to(torch::kFloat).mean().item<double>();
}

} // namespace

int main() {
  torch::manual_seed(1);
  const torch::Tensor teacher = torch::randn({input_features, classes});
  const dataset train = make_dataset(4096, teacher);
  const dataset test = make_dataset(1024, teacher);
  torch::nn::Sequential model(torch::nn::Linear(input_features, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, classes));
  std::vector<torch::Tensor> params = model->parameters(); // forward order: w1, b1, w2, b2

  // One gradcomp "layer" per parameter tensor; fixed_grouping{} sends each layer on its own.
  std::vector<std::size_t> layer_numel;
  for (const torch::Tensor& p : params) {
    layer_numel.push_back(static_cast<std::size_t>(p.numel()));
  }
  gradcomp::loopback_exchange exchange; // one worker; must outlive the pipeline
  gradcomp::pipeline pipe(layer_numel, gradcomp::pipeline_policy::fixed_grouping{},
                          gradcomp::reused_threshold({.density = 0.05, .interval = 10}), exchange);

  // The hook runs during backward: the layer is compressed (and, with MPI, sent) right away.
  for (std::size_t layer = 0; layer < params.size(); ++layer) {
    params[layer].register_hook([&pipe, layer](const torch::Tensor& grad) {
      pipe.gradient_ready(layer, gradcomp::torch_host_view(grad.contiguous()));
    });
  }

  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(0.1));
  constexpr std::int64_t batch_size = 64;
  double applied_fraction = 1.0; // nonzero share of the gradients the optimizer stepped on
  for (int epoch = 0; epoch < 8; ++epoch) {
    double applied = 0, total = 0;
    for (std::int64_t begin = 0; begin < train.x.size(0); begin += batch_size) {
      optimizer.zero_grad();
      const torch::Tensor x = train.x.narrow(0, begin, batch_size);
      const torch::Tensor y = train.y.narrow(0, begin, batch_size);
      torch::nn::functional::cross_entropy(model->forward(x), y).backward(); // runs the hooks
      // Wait for the exchange and write the averaged gradients into .grad for the optimizer.
      std::vector<std::span<float>> grads;
      for (const torch::Tensor& p : params) {
        grads.emplace_back(p.grad().data_ptr<float>(), static_cast<std::size_t>(p.numel()));
      }
      pipe.finish(grads);
      optimizer.step();
      for (const torch::Tensor& p : params) {
        applied += p.grad().count_nonzero().item<double>();
        total += static_cast<double>(p.numel());
      }
    }
    applied_fraction = applied / total;
    std::printf("epoch %d: held-out accuracy %.3f, stepped on %.1f %% of the gradient elements\n",
                epoch, accuracy(model, test), 100.0 * applied_fraction);
  }

  // It must learn, and from the sparse gradients (about 5 %), not from dense ones.
  const double final_accuracy = accuracy(model, test);
  const bool ok = final_accuracy >= required_test_accuracy && applied_fraction <= 0.10;
  std::printf("%s: held-out accuracy %.3f (required %.2f), %.1f %% of the gradient applied "
              "(at most 10 %%)\n",
              ok ? "ok" : "FAILED", final_accuracy, required_test_accuracy,
              100.0 * applied_fraction);
  return ok ? 0 : 1;
}
