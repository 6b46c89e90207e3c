// SPDX-License-Identifier: Apache-2.0
// gradcomp-demo: every gradcomp compressor on real gradients. Trains the ddp-baseline CNN on
// Fashion-MNIST with LibTorch once per method (same seed, same batches), with per-layer error
// feedback applied to every parameter's gradient before the optimizer step, as one worker of a
// compressed data-parallel run would, and reports accuracy, loss, cost, density and wire bytes.
#include <gradcomp/gradcomp.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "../common/tool_support.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// ---- command line ------------------------------------------------------------------------

struct demo_options {
  std::string data_dir;
  int iterations = 300;
  int train_limit = 0; // 0 = the whole training set
  double density = 0.01;
  std::uint64_t interval = 10;
  std::uint64_t seed = 1;
  int threads = 0; // 0 = LibTorch's default
  std::string report;
  std::vector<std::string> methods;
};

namespace gx = gradcomp_apps;
using gx::cnn;
using gx::dataset;

// ---- compression methods -------------------------------------------------------------------

// One parameter tensor's compressor with its error-feedback residual, behind a virtual call so
// that one training loop serves every compressor type.
class layer_compressor {
public:
  virtual ~layer_compressor() = default;
  virtual gradcomp::selection_stats compress(std::span<const float> grad,
                                             gradcomp::sparse_message& out) = 0;
};

template <gradcomp::compressor C>
class error_feedback_layer final : public layer_compressor {
public:
  error_feedback_layer(std::size_t numel, C c) : layer_(numel, std::move(c)) {}
  gradcomp::selection_stats compress(std::span<const float> grad,
                                     gradcomp::sparse_message& out) override {
    return layer_.compress(grad, out);
  }

private:
  gradcomp::error_feedback<C> layer_;
};

template <gradcomp::compressor C>
std::unique_ptr<layer_compressor> make_layer(std::size_t numel, C c) {
  return std::make_unique<error_feedback_layer<C>>(numel, std::move(c));
}

struct method {
  std::string name;
  bool estimator = false; // selects with an estimated threshold (k_selected may differ from k)
  // Builds layer `index`'s compressor for `numel` elements; empty for the uncompressed run.
  std::function<std::unique_ptr<layer_compressor>(std::size_t numel, std::size_t index)> make;
};

std::vector<method> all_methods(const demo_options& o) {
  const double d = o.density;
  const std::uint64_t seed = o.seed;
  const std::uint64_t interval = o.interval;
  return {
      {"dense", false, {}},
      {"exact_top_k", false,
       [d](std::size_t n, std::size_t) {
         return make_layer(n, gradcomp::exact_top_k({.density = d}));
       }},
      {"sampled_threshold", true,
       [d, seed](std::size_t n, std::size_t index) {
         return make_layer(n, gradcomp::sampled_threshold({.density = d, .seed = seed + index}));
       }},
      {"gaussian_threshold", true,
       [d](std::size_t n, std::size_t) {
         return make_layer(n, gradcomp::gaussian_threshold({.density = d}));
       }},
      {"lognormal_threshold", true,
       [d](std::size_t n, std::size_t) {
         return make_layer(n, gradcomp::lognormal_threshold({.density = d}));
       }},
      {"reused_threshold", true,
       [d, interval](std::size_t n, std::size_t) {
         return make_layer(n, gradcomp::reused_threshold({.density = d, .interval = interval}));
       }},
      {"dense_fp16", false,
       [](std::size_t n, std::size_t) {
         return make_layer(n, gradcomp::dense(gradcomp::value_type::fp16));
       }},
  };
}

// ---- one training run ----------------------------------------------------------------------

struct method_result {
  std::string name;
  bool compressed = false;
  bool estimator = false;
  double test_accuracy = 0;
  double final_loss = 0;
  double compress_ms = 0;  // per iteration, all layers
  double iteration_ms = 0; // forward + backward + compression + optimizer step
  double density = 1;      // sent / total elements
  double bytes_varint = 0; // per iteration, all layers
  double bytes_u32 = 0;
  double dense_bytes = 0; // 4 x parameters
  std::size_t fallbacks = 0;
  std::size_t calls = 0;
  double ratio_mean = 0, ratio_min = 0, ratio_max = 0; // k_selected / k_target
};

double test_accuracy(cnn& model, const dataset& test) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::int64_t correct = 0;
  const std::int64_t n = test.images.size(0);
  for (std::int64_t b = 0; b < n; b += 1000) {
    const std::int64_t len = std::min<std::int64_t>(1000, n - b);
    const torch::Tensor logits = model->forward(test.images.narrow(0, b, len));
    correct += logits.argmax(1).eq(test.labels.narrow(0, b, len)).sum().item<std::int64_t>();
  }
  model->train();
  return static_cast<double>(correct) / static_cast<double>(n);
}

// The shuffled order of training samples for every epoch, from the seed alone, so that every
// method sees the same batches.
class batch_order {
public:
  batch_order(std::int64_t samples, std::uint64_t seed) : order_(samples), rng_(seed) {}

  // The indices of the next batch of `size` samples (a new shuffle at each epoch's start).
  torch::Tensor next(std::int64_t size) {
    std::vector<std::int64_t> batch;
    batch.reserve(static_cast<std::size_t>(size));
    while (static_cast<std::int64_t>(batch.size()) < size) {
      if (position_ == order_.size()) {
        std::iota(order_.begin(), order_.end(), std::int64_t{0});
        std::shuffle(order_.begin(), order_.end(), rng_);
        position_ = 0;
      }
      batch.push_back(order_[position_++]);
    }
    return torch::tensor(batch, torch::kInt64);
  }

private:
  std::vector<std::int64_t> order_;
  std::size_t position_ = order_.size();
  std::mt19937_64 rng_;
};

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

method_result
train(const method& m, const demo_options& o, const dataset& train_set, const dataset& test_set) {
  constexpr std::int64_t batch_size = 32;
  constexpr int loss_window = 50;
  torch::manual_seed(o.seed);
  cnn model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const std::vector<torch::Tensor> params = model->parameters();

  method_result r;
  r.name = m.name;
  r.compressed = static_cast<bool>(m.make);
  r.estimator = m.estimator;
  std::size_t total_params = 0;
  std::vector<std::unique_ptr<layer_compressor>> layers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto n = static_cast<std::size_t>(params[i].numel());
    total_params += n;
    if (r.compressed) {
      layers.push_back(m.make(n, i));
    }
  }
  r.dense_bytes = 4.0 * static_cast<double>(total_params);
  std::vector<gradcomp::sparse_message> messages(params.size());

  batch_order order(train_set.images.size(0), o.seed);
  std::vector<double> losses;
  double compress_ms = 0;
  double iteration_ms = 0;
  double sent = 0;
  double bytes_varint = 0;
  double bytes_u32 = 0;
  double ratio_sum = 0;
  r.ratio_min = std::numeric_limits<double>::infinity();
  r.ratio_max = 0;
  for (int it = 0; it < o.iterations; ++it) {
    const torch::Tensor index = order.next(batch_size);
    const torch::Tensor x = train_set.images.index_select(0, index);
    const torch::Tensor y = train_set.labels.index_select(0, index);
    const auto t0 = clock_type::now();
    optimizer.zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    if (r.compressed) {
      // Each gradient is replaced by what error feedback sends for it (its decompressed
      // message): the update a worker would apply with compression on a single worker.
      double layers_ms = 0;
      for (std::size_t i = 0; i < params.size(); ++i) {
        torch::Tensor g = params[i].grad();
        if (!g.is_contiguous() || g.scalar_type() != torch::kFloat32 || !g.is_cpu()) {
          throw std::runtime_error("gradient of parameter " + std::to_string(i) +
                                   " is not a contiguous CPU float tensor");
        }
        const std::span<float> grad(g.data_ptr<float>(), static_cast<std::size_t>(g.numel()));
        const auto c0 = clock_type::now();
        const gradcomp::selection_stats s = layers[i]->compress(grad, messages[i]);
        layers_ms += ms_since(c0);
        gradcomp::decompress(messages[i], grad);

        sent += static_cast<double>(s.k_selected);
        bytes_varint += static_cast<double>(
            gradcomp::encoded_size_bytes(messages[i], gradcomp::index_encoding::delta_varint));
        bytes_u32 += static_cast<double>(
            gradcomp::encoded_size_bytes(messages[i], gradcomp::index_encoding::u32));
        r.fallbacks += s.fallback ? 1 : 0;
        ++r.calls;
        const double ratio =
            s.k_target == 0 ? 1.0
                            : static_cast<double>(s.k_selected) / static_cast<double>(s.k_target);
        ratio_sum += ratio;
        r.ratio_min = std::min(r.ratio_min, ratio);
        r.ratio_max = std::max(r.ratio_max, ratio);
      }
      compress_ms += layers_ms;
    }
    optimizer.step();
    iteration_ms += ms_since(t0);
    losses.push_back(loss.item<double>());
    if ((it + 1) % 100 == 0) {
      std::fprintf(stderr, "  %s: iteration %d, loss %.4f\n", m.name.c_str(), it + 1,
                   losses.back());
    }
  }

  const auto iterations = static_cast<double>(std::max(1, o.iterations));
  const std::size_t window = std::min<std::size_t>(loss_window, losses.size());
  r.final_loss = window == 0 ? 0.0
                             : std::accumulate(losses.end() - static_cast<std::ptrdiff_t>(window),
                                               losses.end(), 0.0) /
                                   static_cast<double>(window);
  r.iteration_ms = iteration_ms / iterations;
  if (r.compressed) {
    r.compress_ms = compress_ms / iterations;
    r.density = sent / (iterations * static_cast<double>(total_params));
    r.bytes_varint = bytes_varint / iterations;
    r.bytes_u32 = bytes_u32 / iterations;
    r.ratio_mean = r.calls == 0 ? 0.0 : ratio_sum / static_cast<double>(r.calls);
    if (r.calls == 0) {
      r.ratio_min = 0;
    }
  } else {
    r.bytes_varint = r.bytes_u32 = r.dense_bytes;
    r.ratio_min = r.ratio_max = 0;
  }
  r.test_accuracy = test_accuracy(model, test_set);
  return r;
}

// ---- report --------------------------------------------------------------------------------

using gradcomp_tools::format;

std::string markdown_table(const std::vector<method_result>& results) {
  std::string t = "| method | test acc. | final loss | compress ms/iter | ms/iter | density | "
                  "bytes/iter (varint) | bytes/iter (u32) | vs dense | guard fallbacks | "
                  "k_selected/k_target mean [min, max] |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const method_result& r : results) {
    t +=
        format("| %s | %.2f %% | %.4f | %.2f | %.1f | %.4f | %.0f | %.0f | %.4f | ", r.name.c_str(),
               100.0 * r.test_accuracy, r.final_loss, r.compress_ms, r.iteration_ms, r.density,
               r.bytes_varint, r.bytes_u32, r.bytes_varint / r.dense_bytes);
    t += r.compressed ? format("%zu / %zu", r.fallbacks, r.calls) : std::string("-");
    t += " | ";
    t += r.estimator ? format("%.3f [%.3f, %.3f]", r.ratio_mean, r.ratio_min, r.ratio_max)
                     : std::string("-");
    t += " |\n";
  }
  return t;
}

nlohmann::json to_json(const demo_options& o,
                       std::size_t params,
                       const std::vector<method_result>& results,
                       const std::string& table) {
  nlohmann::json methods = nlohmann::json::array();
  for (const method_result& r : results) {
    nlohmann::json j = {{"method", r.name},
                        {"compressed", r.compressed},
                        {"test_accuracy", r.test_accuracy},
                        {"final_loss", r.final_loss},
                        {"compress_ms_per_iteration", r.compress_ms},
                        {"ms_per_iteration", r.iteration_ms},
                        {"density", r.density},
                        {"bytes_per_iteration_delta_varint", r.bytes_varint},
                        {"bytes_per_iteration_u32", r.bytes_u32},
                        {"dense_bytes_per_iteration", r.dense_bytes},
                        {"ratio_to_dense", r.bytes_varint / r.dense_bytes}};
    if (r.compressed) {
      j["guard_fallbacks"] = r.fallbacks;
      j["compress_calls"] = r.calls;
    }
    if (r.estimator) {
      j["k_selected_over_k_target"] = {
          {"mean", r.ratio_mean}, {"min", r.ratio_min}, {"max", r.ratio_max}};
    }
    methods.push_back(std::move(j));
  }
  return {{"config",
           {{"data", o.data_dir},
            {"iterations", o.iterations},
            {"train_limit", o.train_limit},
            {"density", o.density},
            {"interval", o.interval},
            {"seed", o.seed},
            {"batch_size", 32},
            {"torch_threads", torch::get_num_threads()},
            {"parameters", params}}},
          {"methods", methods},
          {"markdown", table}};
}

int run(const demo_options& o) {
  if (!gx::missing_idx_files(o.data_dir).empty()) {
    std::fprintf(stderr,
                 "gradcomp-demo: the Fashion-MNIST IDX files (.gz or not) are not in '%s'.\n"
                 "Install Debian's dataset-fashion-mnist or pass --data DIR.\n",
                 o.data_dir.c_str());
    return 2;
  }
  gradcomp::check_density(o.density); // (0, 1]: CLI11's range check lets 0 through
  if (o.threads > 0) {
    torch::set_num_threads(o.threads);
  }
  std::vector<method> methods = all_methods(o);
  if (!o.methods.empty()) {
    std::vector<method> chosen;
    for (const std::string& name : o.methods) {
      const auto it = std::find_if(methods.begin(), methods.end(),
                                   [&](const method& m) { return m.name == name; });
      if (it == methods.end()) {
        std::fprintf(stderr, "gradcomp-demo: unknown method '%s'\n", name.c_str());
        return 2;
      }
      chosen.push_back(*it);
    }
    methods = std::move(chosen);
  }

  const dataset train_set = gx::load_fashion_mnist(o.data_dir, true, o.train_limit);
  const dataset test_set = gx::load_fashion_mnist(o.data_dir, false);
  std::size_t params = 0;
  for (const torch::Tensor& p : cnn()->parameters()) {
    params += static_cast<std::size_t>(p.numel());
  }
  std::fprintf(stderr,
               "gradcomp-demo: %lld training / %lld test samples from %s, %zu parameters, "
               "%d iterations of batch 32, density %g, interval %llu, seed %llu, %d torch "
               "threads\n",
               static_cast<long long>(train_set.images.size(0)),
               static_cast<long long>(test_set.images.size(0)), o.data_dir.c_str(), params,
               o.iterations, o.density, static_cast<unsigned long long>(o.interval),
               static_cast<unsigned long long>(o.seed), torch::get_num_threads());

  std::vector<method_result> results;
  for (const method& m : methods) {
    const auto t0 = clock_type::now();
    results.push_back(train(m, o, train_set, test_set));
    std::fprintf(stderr, "gradcomp-demo: %s done in %.1f s, test accuracy %.2f %%\n",
                 m.name.c_str(), ms_since(t0) / 1000.0, 100.0 * results.back().test_accuracy);
  }

  const std::string table = markdown_table(results);
  std::fputs(table.c_str(), stdout);
  std::fflush(stdout);
  if (!o.report.empty()) {
    std::ofstream out(o.report);
    out << to_json(o, params, results, table).dump(2) << '\n';
    if (!out) {
      std::fprintf(stderr, "gradcomp-demo: cannot write %s\n", o.report.c_str());
      return 1;
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  demo_options o;
  o.data_dir = gx::debian_fashion_mnist_dir;
  CLI::App app{"gradcomp-demo: gradcomp's compressors on the gradients of a CNN training on "
               "Fashion-MNIST (LibTorch, one process)"};
  app.add_option("--data", o.data_dir, "folder with the Fashion-MNIST IDX files (.gz or not)")
      ->capture_default_str();
  app.add_option("--iterations", o.iterations, "training iterations per method")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--train-limit", o.train_limit,
                 "use only the first N training samples (0 = all 60000)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--density", o.density, "fraction of each gradient sent, in (0, 1]")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--interval", o.interval, "reused_threshold: exact top-k every S iterations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the model, the batch order and the samplers")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "LibTorch intra-op threads (0 = LibTorch's default)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--methods", o.methods,
                 "run only these methods (dense, exact_top_k, sampled_threshold, "
                 "gaussian_threshold, lognormal_threshold, reused_threshold, dense_fp16)")
      ->delimiter(',');
  app.add_option("--report", o.report, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradcomp-demo: %s\n", e.what());
    return 1;
  }
}
