// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's --method powersgd: gradcomp::mpi::powersgd_allreduce over every
//! parameter tensor as one bucket (as PyTorch's PowerSGD hook on one DDP bucket), behind the
//! gradient_exchange interface the training loop uses.
#pragma once

#include <gradcomp/mpi/powersgd_allreduce.hpp>

#include <chrono>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exchange.hpp"
#include "hybrid.hpp"

namespace gradcomp_train {

//! @brief PowerSGD of rank `--rank` over all layers at once: gradient_ready() copies each
//! layer's gradient, finish() runs the two ring allreduces (no overlap with backward: the
//! exchange needs every layer's P), averaged() returns the approximations (uncompressed layers:
//! the plain mean). Layer l is viewed as shape[0] x (numel / shape[0]). Error feedback and warm
//! start per layer; no checkpoint state, no loss scaling, no densities (the options refuse
//! them).
class powersgd_exchange final : public gradient_exchange {
public:
  //! @param shapes each parameter tensor's matrix view (forward order).
  powersgd_exchange(const gradcomp::mpi::communicator& comm,
                    const std::vector<gradcomp::mpi::powersgd_shape>& shapes,
                    const gradcomp::powersgd_options& o,
                    gradcomp::mpi::ring_allreduce_options ring)
      : allreduce_(comm, shapes, o, ring) {
    for (const auto& s : shapes) {
      gradients_.emplace_back(s.rows * s.cols, 0.0f);
      averages_.emplace_back(s.rows * s.cols, 0.0f);
      stats_.numel += s.rows * s.cols;
    }
    stats_.bytes_reported = true;
    stats_.selected = allreduce_.first_elements() + allreduce_.second_elements();
  }

  [[nodiscard]] std::size_t parts() const override { return 1; }
  void begin_backward() override {}
  void gradient_ready(std::size_t, std::size_t layer, std::span<const float> grad) override {
    std::copy(grad.begin(), grad.end(), gradients_.at(layer).begin());
  }
  void finish() override {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::span<const float>> g(gradients_.begin(), gradients_.end());
    std::vector<std::span<float>> a(averages_.begin(), averages_.end());
    allreduce_(g, a);
    for (auto& grad : gradients_) { // a layer whose gradient does not come next time sends zeros
      std::fill(grad.begin(), grad.end(), 0.0f);
    }
    stats_.finish_wait_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.communicate_seconds = stats_.finish_wait_seconds;
    stats_.bytes_sent = stats_.bytes_received = allreduce_.bytes_sent();
  }
  [[nodiscard]] std::span<const float> averaged(std::size_t layer) const override {
    return averages_.at(layer);
  }
  [[nodiscard]] const gradcomp::pipeline_iteration_stats& last_stats() const override {
    return stats_;
  }
  void rescale_state(float) override { refuse("loss scaling"); }
  std::size_t return_sent() override { refuse("skipped steps"); }
  std::size_t drop_non_finite_state() override { refuse("skipped steps"); }
  void set_density(double) override { refuse("densities"); }
  void set_layer_densities(std::span<const double>) override { refuse("densities"); }
  void set_factor_masking(bool) override { refuse("momentum correction"); }
  void save_state(gradcomp::state_writer&) const override { refuse("checkpoints"); }
  void load_state(gradcomp::state_reader&) override { refuse("checkpoints"); }
  [[nodiscard]] std::span<const float> residual(std::size_t layer) const override {
    const auto* l = allreduce_.layer(layer);
    return l != nullptr ? l->residual() : std::span<const float>();
  }

private:
  [[noreturn]] static void refuse(const char* what) {
    throw std::logic_error(std::string("--method powersgd does not support ") + what);
  }

  gradcomp::mpi::powersgd_allreduce<torch_gemm> allreduce_;
  std::vector<std::vector<float>> gradients_;
  std::vector<std::vector<float>> averages_;
  gradcomp::pipeline_iteration_stats stats_;
};

//! The PowerSGD exchange of --rank over the parameter tensors `params` (forward order; a tensor
//! of shape (d0, d1, ...) viewed as d0 x (d1 ...), a scalar as 1 x 1), its ring allreduces with
//! --transport ring's options. Collective (the constructor checks the ranks agree).
inline std::unique_ptr<gradient_exchange>
make_powersgd_exchange(const gradcomp::mpi::communicator& comm,
                       const method_settings& method,
                       const transport_settings& transport,
                       const std::vector<torch::Tensor>& params) {
  std::vector<gradcomp::mpi::powersgd_shape> shapes;
  for (const torch::Tensor& p : params) {
    // a scalar, or an empty tensor (which the exchange then rejects, naming it), is 1 row
    const auto rows = static_cast<std::size_t>(p.dim() > 0 && p.size(0) > 0 ? p.size(0) : 1);
    shapes.push_back({rows, static_cast<std::size_t>(p.numel()) / rows});
  }
  return std::make_unique<powersgd_exchange>(
      comm, shapes, gradcomp::powersgd_options{.rank = method.rank, .seed = method.compressor.seed},
      ring_options(transport));
}

} // namespace gradcomp_train
