// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's gradient hooks (wait-free backward propagation, WFBP): a tensor hook on
//! every exchanged parameter hands its gradient over as backward produces it (to the profile's
//! scratch compressors, then to the pipeline) and records when it was ready.
#pragma once

#include <gradcomp/mpi/ring_trace.hpp>
#include <gradcomp/tensor/torch.hpp>

#include <torch/torch.h>

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "training_support.hpp"

namespace gradcomp_train {

//! The hooks on the exchanged parameters and what they record. Not copyable: each hook refers
//! to it.
class gradient_hooks {
public:
  gradient_hooks() = default;
  gradient_hooks(const gradient_hooks&) = delete;
  gradient_hooks& operator=(const gradient_hooks&) = delete;

  //! Registers a hook on each of `params`: parameter i's gradient goes to on_gradient(i, grad).
  //! `trace` (--ring-trace): record when each hook was entered and left, in layer_trace.
  void attach(std::vector<torch::Tensor>& params, bool trace) {
    detach();
    ready_at.assign(params.size(), 0.0);
    for (std::size_t i = 0; i < params.size(); ++i) {
      attached_.emplace_back(params[i], 0U);
      attached_.back().second = params[i].register_hook([this, i, trace](torch::Tensor grad) {
        ready_at[i] = seconds_since(backward_start);
        const double t_in = trace ? gradcomp::mpi::ring_trace::now_seconds() : 0.0;
        on_gradient(i, grad);
        if (trace) {
          layer_trace.push_back(
              {static_cast<double>(i), t_in, gradcomp::mpi::ring_trace::now_seconds()});
        }
      });
    }
  }

  //! Removes the hooks attach() registered (attach() does so first: the parameters may change,
  //! as when --parallel hybrid's planner moves layers out of the exchange).
  void detach() {
    for (const auto& [tensor, handle] : attached_) {
      tensor.remove_hook(handle);
    }
    attached_.clear();
  }

  //! Where each gradient goes: the parameter's index and its gradient.
  std::function<void(std::size_t, const torch::Tensor&)> on_gradient;
  //! Set before each backward: the hooks' ready times count from it.
  clock_type::time_point backward_start;
  std::vector<double> ready_at;                   //!< seconds since backward_start, per parameter
  std::vector<std::array<double, 3>> layer_trace; //!< --ring-trace: parameter, entered, left

private:
  std::vector<std::pair<torch::Tensor, unsigned>> attached_; //!< each hook's tensor and handle
};

//! The float32 values of gradient `g`, through `keep` (a contiguous copy if `g` is not).
//! gradcomp::torch_host_view checks that it is a float32 CPU tensor.
inline std::span<const float> grad_span(const torch::Tensor& g, torch::Tensor& keep) {
  keep = g.is_contiguous() ? g : g.contiguous();
  const gradcomp::host_view<float> v = gradcomp::torch_host_view(keep);
  return std::span<const float>(v.data(), v.size());
}

} // namespace gradcomp_train
