// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Random merge-scheduler instances (a layer profile and an affine cost model) for the
//! tests that compare a strategy against its rule re-run with the public simulator.
#pragma once

#include <gradcomp/schedule/cost_model.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

namespace gradcomp::test {

//! A profile and the model it is planned under.
struct schedule_instance {
  schedule::layer_profile profile;
  schedule::cost_model model;
};

//! A random instance of `layers` layers in `placement`: half of them small integers (which makes
//! ties common), compute- or communication-bound, with or without a compression step, dense or
//! at a density.
inline schedule_instance random_schedule_instance(std::mt19937_64& rng,
                                                  std::size_t layers,
                                                  schedule::compression_placement placement) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 6);
  const bool integers = unit(rng) < 0.5;
  const auto value = [&](double scale) {
    return integers ? static_cast<double>(small(rng)) * scale : unit(rng) * 6.0 * scale;
  };
  schedule_instance x;
  x.profile.forward_seconds = value(0.5);
  for (std::size_t i = 0; i < layers; ++i) {
    schedule::layer l;
    l.name = "l";
    l.name += std::to_string(i);
    l.numel = integers ? static_cast<std::uint64_t>(small(rng)) + 1
                       : static_cast<std::uint64_t>(std::exp(unit(rng) * std::log(2e4))) + 1;
    l.backward_seconds = unit(rng) < 0.15 ? 0.0 : value(1.0);
    x.profile.layers.push_back(l);
  }
  const double alpha = value(1.0);
  const double beta = integers ? value(0.25) : value(1.0) * 2e-4;
  std::optional<schedule::affine_cost> compression;
  if (unit(rng) < 0.6) {
    compression = schedule::affine_cost{value(0.5), integers ? value(0.1) : value(1.0) * 1e-4};
  }
  std::optional<double> density;
  if (unit(rng) < 0.3) {
    density = 0.01 + 0.5 * unit(rng);
  }
  x.model = schedule::cost_model::affine(alpha, beta, compression, density, placement);
  return x;
}

//! Calls check(instance, layers, trial) on the instances the strategy tests sweep: for both
//! compression placements, 1 to 9 layers, 40 trials each, drawn in that order from one
//! generator seeded `seed` (each test its own seed, so the instances differ between tests).
template <class Check>
void for_each_random_schedule_instance(std::uint64_t seed, Check check) {
  std::mt19937_64 rng(seed);
  for (const auto placement : {schedule::compression_placement::off_compute_stream,
                               schedule::compression_placement::on_compute_stream}) {
    for (std::size_t layers = 1; layers <= 9; ++layers) {
      for (int trial = 0; trial < 40; ++trial) {
        check(random_schedule_instance(rng, layers, placement), layers, trial);
      }
    }
  }
}

} // namespace gradcomp::test
