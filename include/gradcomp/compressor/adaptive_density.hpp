// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::adaptive_densities: per-layer densities from each layer's share of the
//! gradient norm, sending the same total number of elements as one uniform density.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief Per-layer densities d_i that share a budget of K = density x sum_i n_i elements in
//! proportion to the layers' weights w_i (e.g. the L2 norm of each layer's gradient, or of its
//! residual + gradient: its share of the norm), each clamped to [min_density, 1]:
//!
//!   k_i = d_i n_i = clamp(lambda w_i, min_density n_i, n_i),   with lambda >= 0 such that
//!   sum_i k_i = K,
//!
//! i.e. the elements sent by a layer are proportional to its weight, except that no layer
//! sends more than all of its elements or fewer than min_density of them; what a clamped layer
//! cannot take is redistributed over the others in proportion to their weights (water-filling).
//! The same total as the uniform density (sum_i d_i n_i == density x sum_i n_i up to floating
//! rounding, relative error ~1e-15), so the same bytes on the wire for a top-k compressor; the
//! compressors round each layer's k up (k_for_density), which adds less than one element per
//! layer. The uniform density is the special case of weights proportional to n_i.
//!
//! This is the allocation rule of gradcomp's adaptive density (docs/fidelity.md). It is in the
//! spirit of layer-wise budgets of the sparsification literature (a layer holding a larger share
//! of the gradient's norm is given a larger share of the elements) but it is not taken from one
//! paper; DGC (Lin et al. 2018) and S1 use one density for every layer.
//!
//! Special cases: a layer of 0 elements gets `density` (it sends nothing either way). Layers of
//! weight 0 get min_density; if all weights are 0 every layer gets `density`. If the layers of
//! positive weight cannot absorb the budget even when sent whole, they get 1 and the layers of
//! weight 0 share the rest uniformly.
//!
//! Apply the result at a step boundary, one density per layer: `pipe.set_layer_densities(d)`
//! (gradcomp::pipeline, per-layer scope) or each layer's
//! `error_feedback::compressor().set_density(d[i])`; error feedback's conservation stays exact.
//! Deterministic (the same inputs give the same bits). O(L log L) for L layers.
//! @param numel       elements per layer (L layers, L >= 1, sum > 0).
//! @param weights     one weight per layer, finite and >= 0.
//! @param density     the uniform density whose total is kept, in (0, 1].
//! @param min_density the smallest density of a layer, in (0, density].
//! @returns L densities, each in [min_density, 1].
//! @throws std::invalid_argument naming the value and its limit if the spans' lengths differ,
//! there are no layers or no elements, a weight is negative or not finite, density is outside
//! (0, 1], or min_density is outside (0, density].
[[nodiscard]] inline std::vector<double> adaptive_densities(std::span<const std::size_t> numel,
                                                            std::span<const double> weights,
                                                            double density,
                                                            double min_density) {
  detail::require(!numel.empty(), "adaptive_densities: no layers");
  detail::require(weights.size() == numel.size(), "adaptive_densities: ", weights.size(),
                  " weights for ", numel.size(), " layers");
  check_density(density);
  detail::require(min_density > 0.0 && min_density <= density, "adaptive_densities: min_density ",
                  min_density, " is outside (0, density] = (0, ", density, "]");
  double total = 0.0;
  for (std::size_t i = 0; i < numel.size(); ++i) {
    detail::require(std::isfinite(weights[i]) && weights[i] >= 0.0, "adaptive_densities: weight ",
                    weights[i], " of layer ", i, " must be finite and >= 0");
    total += static_cast<double>(numel[i]);
  }
  detail::require(total > 0.0, "adaptive_densities: the layers have no elements");
  const double budget = density * total;
  const std::size_t layers = numel.size();
  std::vector<double> result(layers, density);

  // lower and upper element counts of each non-empty layer, and the counts at lambda = 0
  double at_zero = 0.0;   // sum of the lower bounds: every layer at min_density
  double positive = 0.0;  // elements of the layers of positive weight
  double zero_rest = 0.0; // elements of the non-empty layers of weight 0
  for (std::size_t i = 0; i < layers; ++i) {
    const auto n = static_cast<double>(numel[i]);
    at_zero += min_density * n;
    if (numel[i] > 0) {
      (weights[i] > 0.0 ? positive : zero_rest) += n;
    }
  }
  if (positive == 0.0) {
    return result; // all weights 0: uniform
  }
  if (positive + min_density * zero_rest <= budget) {
    // the weighted layers, sent whole, cannot take the budget: they are dense, the rest shares
    const double rest = zero_rest > 0.0 ? (budget - positive) / zero_rest : density;
    for (std::size_t i = 0; i < layers; ++i) {
      if (numel[i] > 0) {
        result[i] = weights[i] > 0.0 ? 1.0 : std::clamp(rest, min_density, 1.0);
      }
    }
    return result;
  }

  // f(lambda) = sum_i clamp(lambda w_i, l_i, u_i) is continuous, non-decreasing and piecewise
  // linear; walk its breakpoints (l_i / w_i: layer i starts rising; u_i / w_i: it saturates) in
  // increasing order to the segment where f reaches the budget, then solve that segment.
  struct breakpoint {
    double lambda;
    double slope_change; // +w_i when layer i starts rising, -w_i when it saturates
    double level_change; // the constant part: -l_i when it starts rising, +u_i when it saturates
  };
  std::vector<breakpoint> points;
  points.reserve(2 * layers);
  for (std::size_t i = 0; i < layers; ++i) {
    if (numel[i] == 0 || weights[i] == 0.0) {
      continue;
    }
    const auto n = static_cast<double>(numel[i]);
    points.push_back({min_density * n / weights[i], weights[i], -min_density * n});
    points.push_back({n / weights[i], -weights[i], n});
  }
  std::sort(points.begin(), points.end(),
            [](const breakpoint& a, const breakpoint& b) { return a.lambda < b.lambda; });
  // on a segment, f(lambda) = level + slope x lambda
  double level = at_zero;
  double slope = 0.0;
  double lambda = 0.0;
  for (std::size_t j = 0; j < points.size();) {
    const double next = points[j].lambda;
    if (slope > 0.0 && level + slope * next >= budget) {
      break; // the budget is reached inside [lambda, next]
    }
    lambda = next;
    for (; j < points.size() && points[j].lambda == next; ++j) {
      slope += points[j].slope_change;
      level += points[j].level_change;
    }
    if (j == points.size()) {
      slope = 0.0; // past the last breakpoint every weighted layer is whole (handled above)
    }
  }
  if (slope > 0.0) {
    lambda = std::max(lambda, (budget - level) / slope);
  }
  for (std::size_t i = 0; i < layers; ++i) {
    if (numel[i] == 0) {
      continue;
    }
    const auto n = static_cast<double>(numel[i]);
    const double k = std::clamp(lambda * weights[i], min_density * n, n);
    result[i] = std::clamp(k / n, min_density, 1.0);
  }
  return result;
}

} // namespace gradcomp
