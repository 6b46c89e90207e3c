// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief LARS, layer-wise adaptive rate scaling ([YOU17] Algorithm 1, docs/references.md; S4
//! trains at batch 64K with it), and the warm-up + polynomial-decay learning rate it is used
//! with, on any float spans (one call per layer), in fp32 storage with double norms.
//!
//! Per layer, with global learning rate gamma, trust coefficient eta, weight decay beta and
//! momentum m (the schedules it is used with: lr_schedule.hpp):
//!
//!   lambda = eta ||w|| / (||g|| + beta ||w||)      (1 when ||w|| = 0 or the denominator is 0)
//!   v      = m v + gamma lambda (g + beta w)
//!   w      = w - v
//!
//! S4's rule (also [GOYAL17]): no weight decay on biases and batch-norm parameters:
//! lars_layer{.weight_decay = false} (beta = 0 in both lines for that layer); `adapt = false`
//! keeps lambda = 1 (plain momentum SGD) for layers one prefers not to adapt.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/optimizer/lr_schedule.hpp>

#include <cmath>
#include <cstddef>
#include <span>

namespace gradcomp {

//! @brief Options of lars_step shared by every layer.
struct lars_options {
  //! Momentum m, in [0, 1).
  double momentum = 0.9;
  //! Weight decay beta (L2), >= 0; applied only to layers whose lars_layer says so.
  double weight_decay = 0.0005;
  //! Trust coefficient eta, > 0 (You et al. use 0.001).
  double trust_coefficient = 0.001;
};

//! @brief How one layer is treated: S4 turns weight decay off for biases and batch-norm
//! parameters (lars_layer{.weight_decay = false}).
struct lars_layer {
  bool weight_decay = true; //!< apply the weight decay (in the ratio and the update)
  bool adapt = true;        //!< scale by the trust ratio (false: lambda = 1)
};

//! @brief The trust ratio eta ||w|| / (||g|| + beta ||w||), norms in double (sequential sums,
//! deterministic); 1 when ||w|| = 0 (a fresh zero-initialised layer) or the denominator is 0. O(n).
//! @throws std::invalid_argument if the spans' lengths differ.
[[nodiscard]] inline double lars_trust_ratio(std::span<const float> weights,
                                             std::span<const float> grad,
                                             double trust_coefficient,
                                             double weight_decay) {
  detail::require(weights.size() == grad.size(), "lars_trust_ratio: weights have ", weights.size(),
                  " elements, the gradient ", grad.size());
  double ww = 0.0;
  double gg = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    ww += static_cast<double>(weights[i]) * weights[i];
    gg += static_cast<double>(grad[i]) * grad[i];
  }
  const double w_norm = std::sqrt(ww);
  const double g_norm = std::sqrt(gg);
  const double denominator = g_norm + weight_decay * w_norm;
  if (w_norm == 0.0 || denominator == 0.0) {
    return 1.0;
  }
  return trust_coefficient * w_norm / denominator;
}

//! @brief One LARS step on one layer, in place (formulas in the file comment): velocity and
//! weights are updated in float, element by element (deterministic). Returns the trust ratio
//! used. O(n), no allocation.
//! @param weights   the layer's fp32 (master) weights, n elements.
//! @param grad      its gradient (already averaged across ranks and unscaled), n elements.
//! @param velocity  its momentum buffer, n elements (zeros at the start).
//! @param learning_rate  gamma for this step (e.g. from warmup_poly_schedule), >= 0, finite.
//! @param o         momentum m, weight decay beta and trust coefficient eta (every layer's).
//! @param layer     this layer's treatment: weight decay on or off, trust ratio or 1.
//! @throws std::invalid_argument naming the value and limit for different lengths, a negative or
//! non-finite learning rate, momentum outside [0, 1), negative weight decay or a non-positive
//! trust coefficient.
inline double lars_step(std::span<float> weights,
                        std::span<const float> grad,
                        std::span<float> velocity,
                        double learning_rate,
                        const lars_options& o,
                        lars_layer layer = {}) {
  detail::require(grad.size() == weights.size(), "lars_step: gradient has ", grad.size(),
                  " elements, the weights ", weights.size());
  detail::require(velocity.size() == weights.size(), "lars_step: velocity has ", velocity.size(),
                  " elements, the weights ", weights.size());
  detail::require(std::isfinite(learning_rate) && learning_rate >= 0.0, "lars_step: learning rate ",
                  learning_rate, " must be finite and >= 0");
  detail::require(o.momentum >= 0.0 && o.momentum < 1.0, "lars_step: momentum ", o.momentum,
                  " is outside [0, 1)");
  detail::require(o.weight_decay >= 0.0, "lars_step: weight decay ", o.weight_decay,
                  " is negative");
  detail::require(o.trust_coefficient > 0.0, "lars_step: trust coefficient ", o.trust_coefficient,
                  " must be > 0");
  const double beta = layer.weight_decay ? o.weight_decay : 0.0;
  const double ratio =
      layer.adapt ? lars_trust_ratio(weights, grad, o.trust_coefficient, beta) : 1.0;
  const auto step = static_cast<float>(learning_rate * ratio);
  const auto decay = static_cast<float>(beta);
  const auto m = static_cast<float>(o.momentum);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    velocity[i] = m * velocity[i] + step * (grad[i] + decay * weights[i]);
    weights[i] -= velocity[i];
  }
  return ratio;
}

} // namespace gradcomp
