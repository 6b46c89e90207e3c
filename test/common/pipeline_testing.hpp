// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the pipeline tests share: the order in which a test's backward hooks report the
//! layers, the five layers and their gradients, a steady clock the test advances by hand (for exact
//! measured times), and the text of a misuse error.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "generators.hpp"

namespace gradcomp::test {

//! The layers 0 .. layers-1 in hook order: mode 0 forward, 1 backward (as autograd delivers),
//! 2 shuffled by a generator seeded with iteration x seed_multiplier + seed_offset.
inline std::vector<std::size_t> hook_order(
    std::size_t layers, int iteration, int mode, unsigned seed_multiplier, unsigned seed_offset) {
  std::vector<std::size_t> order(layers);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (mode == 1) {
    std::reverse(order.begin(), order.end());
  } else if (mode == 2) {
    std::mt19937 rng(static_cast<unsigned>(iteration) * seed_multiplier + seed_offset);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

//! The five layers of the pipeline tests, elements per layer in forward order: a mid-sized, a
//! small, the largest, a one-element and a power-of-two layer.
inline const std::vector<std::size_t> five_layer_sizes{300, 17, 1000, 1, 64};

//! Layer `layer`'s gradient (five_layer_sizes) in `iteration`: normal values seeded
//! seed_stride x iteration + layer, so that every layer and iteration differs.
inline std::vector<float>
five_layer_gradient(std::size_t layer, int iteration, std::uint64_t seed_stride) {
  return make_values(distribution::normal, five_layer_sizes.at(layer),
                     seed_stride * static_cast<std::uint64_t>(iteration) + layer);
}

//! The per-layer backward times a pipeline measures from one iteration's ready times (seconds
//! of backward until each layer's report, by forward index), as the planner sums them in
//! backward order (forward index descending): the latest ready time among a layer and the
//! layers before it in backward order, minus that of the layers before it. Written as that
//! formula, apart from the pipeline's running maximum, to be the tests' reference.
inline std::vector<double> backward_seconds_from_ready(const std::vector<double>& ready) {
  const auto latest_from = [&](std::size_t first) {
    double m = 0.0;
    for (std::size_t j = first; j < ready.size(); ++j) {
      m = std::max(m, ready[j]);
    }
    return m;
  };
  std::vector<double> out(ready.size());
  for (std::size_t l = 0; l < ready.size(); ++l) {
    out[l] = latest_from(l) - latest_from(l + 1);
  }
  return out;
}

//! A steady clock the test advances by hand: measured times are exactly what the test says.
//! Atomic: a pipeline's communication thread reads it too.
struct manual_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point(duration(ticks.load())); }
  static void advance(duration d) noexcept { ticks.fetch_add(d.count()); }
  static inline std::atomic<rep> ticks{0};
};

//! Every layer's averages of pipeline `p` after its last finish(), concatenated in forward order.
template <class Pipeline>
std::vector<float> all_averages(const Pipeline& p) {
  std::vector<float> out;
  for (std::size_t l = 0; l < p.layers(); ++l) {
    const auto a = p.averaged(l);
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

//! Iterations `first` .. `first + iterations - 1` of pipeline `p`: every layer reported last layer
//! first with `gradient_of(layer, iteration)`, then finish(); the averages of every iteration
//! (all_averages), concatenated.
template <class Pipeline, class Gradient>
std::vector<float> run_iterations(Pipeline& p, int first, int iterations, Gradient&& gradient_of) {
  std::vector<float> out;
  for (int it = first; it < first + iterations; ++it) {
    for (std::size_t l = p.layers(); l-- > 0;) {
      p.gradient_ready(l, gradient_of(l, it));
    }
    p.finish();
    const std::vector<float> a = all_averages(p);
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

//! The message of the std::invalid_argument `f()` throws, or "no exception".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

} // namespace gradcomp::test
