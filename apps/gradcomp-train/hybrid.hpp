// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --parallel hybrid (S2): the model's chosen fully connected layers run
//! model parallel through gradcomp::mpi::column_parallel_linear (a LibTorch autograd function
//! around it, GEMMs by LibTorch), the rest stays data parallel through the pipeline.
//! docs/hybrid.md.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/hybrid/plan.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/calibrate_column_parallel.hpp>
#include <gradcomp/tensor/torch.hpp>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "training_support.hpp"

namespace gradcomp_train {

//! A gradcomp::gemm_backend computed by LibTorch (torch::addmm_out on views of the buffers), so
//! that the model-parallel layers use the same BLAS and threads as the rest of the model.
struct torch_gemm {
  void operator()(const gradcomp::gemm_call& c) const {
    gradcomp::check_gemm_call(c);
    if (c.m == 0 || c.n == 0) {
      return;
    }
    const auto options = torch::TensorOptions().dtype(torch::kFloat32);
    const auto matrix = [&](const float* p, std::size_t rows, std::size_t cols, std::size_t ld) {
      return torch::from_blob(const_cast<float*>(p),
                              {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)},
                              {static_cast<std::int64_t>(ld), 1}, options);
    };
    torch::Tensor out = matrix(c.c, c.m, c.n, c.ldc);
    if (c.k == 0) { // C = beta C; beta == 0 writes zeros without reading C (BLAS's rule)
      if (c.beta == 0.0f) {
        out.zero_();
      } else {
        out.mul_(c.beta);
      }
      return;
    }
    const bool ta = c.trans_a == gradcomp::transpose::yes;
    const bool tb = c.trans_b == gradcomp::transpose::yes;
    const torch::Tensor a = ta ? matrix(c.a, c.k, c.m, c.lda).t() : matrix(c.a, c.m, c.k, c.lda);
    const torch::Tensor b = tb ? matrix(c.b, c.n, c.k, c.ldb).t() : matrix(c.b, c.k, c.n, c.ldb);
    torch::addmm_out(out, out, a, b, c.beta, c.alpha);
  }
};

//! "" or why --mp-layers is not "auto" or a list of the model's fully connected layer names
//! (cnn: fc1, fc2; vgg and mlp: fc1, fc2, fc3). Checked before MPI starts.
inline std::string mp_layers_problem(const std::string& mp_layers, const std::string& model) {
  if (mp_layers == "auto") {
    return {};
  }
  const std::vector<std::string> names = model == "cnn"
                                             ? std::vector<std::string>{"fc1", "fc2"}
                                             : std::vector<std::string>{"fc1", "fc2", "fc3"};
  std::stringstream list(mp_layers);
  std::size_t count = 0;
  for (std::string item; std::getline(list, item, ',');) {
    ++count;
    if (std::find(names.begin(), names.end(), item) == names.end()) {
      return "'" + item + "' is not a fully connected layer of model " + model + " (fc1" +
             (model == "cnn" ? ", fc2" : ", fc2, fc3") + ")";
    }
  }
  return count == 0 ? std::string("the list is empty") : std::string();
}

namespace hybrid_detail {

using layer_type = gradcomp::mpi::column_parallel_linear<torch_gemm>;

// The layer's buffers: views of CPU, contiguous float32 tensors (gradcomp::torch_host_view
// checks that).
inline std::span<const float> in(const torch::Tensor& t) {
  const gradcomp::host_view<float> v = gradcomp::torch_host_view(t);
  return {v.data(), v.size()};
}
inline std::span<float> out(torch::Tensor& t) {
  const gradcomp::host_view<float> v = gradcomp::torch_host_view(t);
  return {v.data(), v.size()};
}

//! The autograd function: forward and backward are the layer's collective passes.
struct model_parallel_function : torch::autograd::Function<model_parallel_function> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               torch::Tensor x,
                               torch::Tensor weight,
                               torch::Tensor bias,
                               std::int64_t layer_address) {
    auto* layer = reinterpret_cast<layer_type*>(layer_address);
    x = x.contiguous();
    torch::Tensor y = torch::empty({x.size(0), static_cast<std::int64_t>(layer->outputs())});
    layer->forward(in(x), in(weight), in(bias), out(y));
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["layer"] = layer_address;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_outputs) {
    auto* layer = reinterpret_cast<layer_type*>(ctx->saved_data["layer"].toInt());
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor dy = grad_outputs[0].contiguous();
    torch::Tensor dx = torch::empty_like(saved[0]);
    torch::Tensor dw = torch::empty_like(saved[1]);
    torch::Tensor db = torch::empty_like(saved[2]);
    layer->backward(in(dy), in(saved[0]), in(saved[1]), out(dw), out(db), out(dx));
    return {dx, dw, db, torch::Tensor()};
  }
};

} // namespace hybrid_detail

//! @brief One fully connected layer run model parallel: this rank's slice of the weight rows
//! and bias (trainable tensors), the column_parallel_linear that computes with them, and the
//! model's full nn::Linear, which holds the gathered weights for evaluation.
class model_parallel_fc {
public:
  model_parallel_fc(const gradcomp::mpi::communicator& comm,
                    std::string name,
                    torch::nn::Linear full)
      : comm_(&comm), name_(std::move(name)), full_(std::move(full)),
        layer_(std::make_unique<hybrid_detail::layer_type>(
            comm,
            static_cast<std::size_t>(full_->weight.size(1)),
            static_cast<std::size_t>(full_->weight.size(0)))) {
    const gradcomp::column_slice s = layer_->slice();
    torch::NoGradGuard no_grad;
    const auto offset = static_cast<std::int64_t>(s.offset);
    const auto rows = static_cast<std::int64_t>(s.rows);
    weight_ = full_->weight.narrow(0, offset, rows).clone().set_requires_grad(true);
    bias_ = full_->bias.narrow(0, offset, rows).clone().set_requires_grad(true);
  }

  //! y = x W^T + b over the ranks (collective: every rank calls it with the same batch size).
  torch::Tensor forward(const torch::Tensor& x) {
    return hybrid_detail::model_parallel_function::apply(
        x, weight_, bias_, reinterpret_cast<std::int64_t>(layer_.get()));
  }

  //! Every rank's slices into the full nn::Linear on every rank (two MPI_Iallgatherv; collective).
  void gather_into_full() {
    torch::NoGradGuard no_grad;
    const auto k = static_cast<std::size_t>(full_->weight.size(1));
    gather(weight_, full_->weight, k);
    gather(bias_, full_->bias, 1);
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::vector<torch::Tensor> parameters() const { return {weight_, bias_}; }
  [[nodiscard]] const hybrid_detail::layer_type& layer() const noexcept { return *layer_; }

private:
  void gather(const torch::Tensor& slice, torch::Tensor& full, std::size_t row_length) {
    const int p = comm_->size();
    std::vector<int> counts(static_cast<std::size_t>(p));
    std::vector<int> displs(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      const gradcomp::column_slice s = layer_->slice_of(r);
      counts[static_cast<std::size_t>(r)] = static_cast<int>(s.rows * row_length);
      displs[static_cast<std::size_t>(r)] = static_cast<int>(s.offset * row_length);
    }
    const torch::Tensor mine = slice.detach().contiguous();
    MPI_Request request = MPI_REQUEST_NULL;
    gradcomp::mpi::check(MPI_Iallgatherv(mine.data_ptr<float>(),
                                         counts[static_cast<std::size_t>(comm_->rank())], MPI_FLOAT,
                                         full.data_ptr<float>(), counts.data(), displs.data(),
                                         MPI_FLOAT, comm_->native(), &request),
                         "MPI_Iallgatherv");
    gradcomp::mpi::wait(request);
  }

  const gradcomp::mpi::communicator* comm_;
  std::string name_;
  torch::nn::Linear full_;
  std::unique_ptr<hybrid_detail::layer_type> layer_;
  torch::Tensor weight_;
  torch::Tensor bias_;
};

//! The model's fully connected layers, forward order, with their names ("fc1", ...).
inline std::vector<std::pair<std::string, torch::nn::Linear>> fully_connected_layers(network& net) {
  std::vector<std::pair<std::string, torch::nn::Linear>> fcs;
  for (const auto& child : net.base->named_children()) {
    if (auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(child.value())) {
      fcs.emplace_back(child.key(), torch::nn::Linear(linear));
    }
  }
  return fcs;
}

//! Which FC layers run model parallel and why: one report entry per FC layer.
struct hybrid_decision {
  std::vector<std::string> model_parallel;         //!< layer names, forward order
  nlohmann::json layers = nlohmann::json::array(); //!< the report's "hybrid_layers"
  nlohmann::json plan = nlohmann::json::object();  //!< the report's "hybrid_plan" (auto)
};

//! @brief Each FC layer's shape and gradcomp::hybrid::choose at the run's batch and rank count
//! on `net_model` (with `cost_options`), and the layers that run model parallel: those of a
//! --mp-layers list, or with auto, the ones choose() prices cheaper model parallel in isolation
//! (the fallback when no profile is taken; plan_hybrid replaces it by the whole-iteration
//! choice). Auto never splits a layer with fewer outputs than ranks.
//! @throws std::invalid_argument for an unknown layer name or a listed layer with N < P (the
//! same on every rank: every rank parses the same options).
inline hybrid_decision decide_per_layer(network& net,
                                        const train_options& o,
                                        int ranks,
                                        const gradcomp::cost::network& net_model,
                                        const gradcomp::cost::fc_cost_options& cost_options = {}) {
  hybrid_decision d;
  if (o.parallel != "hybrid") {
    return d;
  }
  const auto fcs = fully_connected_layers(net);
  std::vector<std::string> wanted;
  if (o.mp_layers != "auto") {
    std::stringstream list(o.mp_layers);
    for (std::string item; std::getline(list, item, ',');) {
      const bool known =
          std::any_of(fcs.begin(), fcs.end(), [&](const auto& f) { return f.first == item; });
      if (!known) {
        throw std::invalid_argument("--mp-layers: '" + item +
                                    "' is not a fully connected layer of model " + o.model);
      }
      wanted.push_back(item);
    }
  }
  for (const auto& [name, linear] : fcs) {
    const gradcomp::hybrid::fc_layer shape{name, static_cast<std::size_t>(linear->weight.size(1)),
                                           static_cast<std::size_t>(linear->weight.size(0))};
    const gradcomp::hybrid::fc_choice c = gradcomp::hybrid::choose(
        shape, static_cast<std::size_t>(o.batch_size), ranks, net_model, cost_options);
    const bool listed = std::find(wanted.begin(), wanted.end(), name) != wanted.end();
    const bool splittable = shape.outputs_n >= static_cast<std::size_t>(ranks);
    const bool model = o.mp_layers == "auto"
                           ? c.by_cost == gradcomp::hybrid::parallelism::model && splittable
                           : listed;
    if (model && !splittable) {
      throw std::invalid_argument("--mp-layers: layer " + name + " has " +
                                  std::to_string(shape.outputs_n) + " outputs, fewer than the " +
                                  std::to_string(ranks) + " ranks it would be split over");
    }
    d.layers.push_back({{"layer", name},
                        {"inputs_k", shape.inputs_k},
                        {"outputs_n", shape.outputs_n},
                        {"parallelism", model ? "model" : "data"},
                        {"by_cost", gradcomp::hybrid::name(c.by_cost)},
                        {"by_volume", gradcomp::hybrid::name(c.by_volume)},
                        {"data_parallel_predicted_seconds", c.data_seconds},
                        {"model_parallel_predicted_seconds", c.model_seconds}});
    if (model) {
      d.model_parallel.push_back(name);
    }
  }
  return d;
}

//! @brief The hybrid set-up of one model: the model_parallel_fc objects of the layers a
//! hybrid_decision names, installed as the model's fc_overrides.
class hybrid_parallelism {
public:
  //! Splits each layer of `d.model_parallel` (an FC layer of `net` with N >= ranks: as
  //! decide_per_layer or plan_hybrid returns it) over the ranks of `comm`. Collective.
  hybrid_parallelism(const gradcomp::mpi::communicator& comm, network& net, hybrid_decision d)
      : net_(&net), decisions_(std::move(d.layers)), plan_(std::move(d.plan)) {
    for (auto& [name, linear] : fully_connected_layers(net)) {
      if (std::find(d.model_parallel.begin(), d.model_parallel.end(), name) !=
          d.model_parallel.end()) {
        layers_.push_back(std::make_unique<model_parallel_fc>(comm, name, linear));
      }
    }
    for (auto& layer : layers_) {
      model_parallel_fc* l = layer.get();
      net.fc->by_name[l->name()] = [l](const torch::Tensor& x) { return l->forward(x); };
    }
  }

  //! Whether any layer runs model parallel.
  [[nodiscard]] bool active() const noexcept { return !layers_.empty(); }

  //! Whether parameter `name` (e.g. "fc1.weight") belongs to a model-parallel layer, whose
  //! full tensor then stays out of the data-parallel exchange and the optimizer.
  [[nodiscard]] bool owns(const std::string& parameter_name) const {
    return std::any_of(layers_.begin(), layers_.end(), [&](const auto& l) {
      return parameter_name.rfind(l->name() + ".", 0) == 0;
    });
  }

  //! The slices' trainable tensors (their gradients come complete from the layer: no exchange).
  [[nodiscard]] std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> all;
    for (const auto& l : layers_) {
      for (const torch::Tensor& t : l->parameters()) {
        all.push_back(t);
      }
    }
    return all;
  }

  //! Gathers every slice into the full layers and runs the model without replacements (for
  //! evaluation; collective); end_full_model() switches them back on.
  void begin_full_model() {
    for (auto& l : layers_) {
      l->gather_into_full();
    }
    net_->fc->enabled = false;
  }
  void end_full_model() { net_->fc->enabled = true; }

  //! The largest difference, over every rank, between the hybrid model's output for `x` and
  //! the output of the model with the gathered full layers (the end-of-run check of the
  //! slices). Collective; every rank passes a batch of the same size.
  [[nodiscard]] double max_difference_to_gathered(const gradcomp::mpi::communicator& comm,
                                                  const torch::Tensor& x) {
    torch::NoGradGuard no_grad;
    net_->base->eval();
    const torch::Tensor hybrid_out = net_->module.forward(x);
    begin_full_model();
    const torch::Tensor full_out = net_->module.forward(x);
    end_full_model();
    net_->base->train();
    double d[1] = {(hybrid_out - full_out).abs().max().item<double>()};
    allreduce(comm, std::span<double>(d), MPI_MAX);
    return d[0];
  }

  //! Values moved by the model-parallel layers so far, bytes sent by this rank (ring / direct
  //! collectives; column_parallel_linear's fc_traffic).
  [[nodiscard]] double sent_bytes() const {
    double total = 0;
    for (const auto& l : layers_) {
      total += 4.0 * static_cast<double>(l->layer().traffic().sent_values);
    }
    return total;
  }

  //! The per-layer decisions for the report.
  [[nodiscard]] const nlohmann::json& decisions() const noexcept { return decisions_; }
  //! --mp-layers auto: the whole-iteration plan (plan_hybrid); else an empty object.
  [[nodiscard]] const nlohmann::json& plan() const noexcept { return plan_; }

private:
  network* net_;
  std::vector<std::unique_ptr<model_parallel_fc>> layers_;
  nlohmann::json decisions_ = nlohmann::json::array();
  nlohmann::json plan_ = nlohmann::json::object();
};

} // namespace gradcomp_train
