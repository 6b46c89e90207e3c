// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Tests of the batched reused threshold (gradcomp::cuda::basic_batched_reused_threshold),
//! over the harness and helpers of compressor_cases.hpp and batched_cases.hpp, compiled for both
//! backends: batched_reused_threshold_test.cpp (host_backend) and device_backend_test.cu. The
//! reference is one host gradcomp::reused_threshold per layer (with gradcomp::error_feedback
//! where the batch carries a residual), call by call.
#pragma once

#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/cuda/batched_reused_threshold.cuh>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "batched_cases.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

using batched_reused = gradcomp::cuda::basic_batched_reused_threshold<backend>;

//! How the (layer, call) selections of a run went, from the host reference's stats.
struct reuse_tally {
  std::size_t refreshes = 0;   //!< exact by the interval
  std::size_t reuses = 0;      //!< remembered threshold accepted by the guard
  std::size_t fallbacks = 0;   //!< remembered threshold rejected: exact instead
  std::size_t mixed_calls = 0; //!< calls with both a fallback and an accepted reuse
};

//! Checks the guard-specific stats a batched layer shares with the host compressor.
inline void require_reuse_stats_equal(const selection_stats& got, const selection_stats& want) {
  CHECK(got.fallback == want.fallback);
  CHECK(got.adjust_rounds == want.adjust_rounds);
}

//! `calls` batched calls with error feedback (momentum correction when momentum > 0) on layers
//! of `sizes` (plus `padding` trailing elements), layer l of call c scaled by
//! layer_scale(c, l), against one host error_feedback<reused_threshold> per layer: every
//! layer's message, stats, residual, velocity and call count bit for bit, the padding untouched,
//! the totals consistent. Returns the tally of what the layers did.
template <class LayerScale>
reuse_tally require_reused_batch_same_as_host(const std::vector<std::size_t>& sizes,
                                              const reused_threshold_options& o,
                                              double momentum,
                                              int calls,
                                              LayerScale layer_scale,
                                              float scale = 1.0f,
                                              std::size_t padding = 5) {
  const std::vector<std::size_t> offsets = offsets_of(sizes);
  const std::size_t layers = sizes.size();
  const std::size_t n = offsets.back() + padding;
  batched_reused d(o);
  auto host = host_layers(sizes, gradcomp::reused_threshold(o), momentum);
  batch_feedback_run run(n);
  reuse_tally tally;
  for (int call = 0; call < calls; ++call) {
    CAPTURE(call);
    std::vector<float> g = batch_gradient(offsets, n, static_cast<std::uint64_t>(call), scale);
    for (std::size_t l = 0; l < layers; ++l) {
      const float f = layer_scale(call, l);
      for (std::size_t i = offsets[l]; i < offsets[l + 1]; ++i) {
        g[i] = g[i] * f;
      }
    }
    const selection_stats total = run.step(d, g, offsets, momentum);
    std::size_t k_sum = 0;
    std::size_t nnz_sum = 0;
    bool any_fallback = false;
    bool any_reuse = false;
    for (std::size_t l = 0; l < layers; ++l) {
      CAPTURE(l, sizes[l]);
      sparse_message want;
      const selection_stats want_stats = host[l].compress(layer_of(g, offsets, l), want);
      require_layer_equal(run.got[l], run.got_stats[l], want, want_stats);
      require_reuse_stats_equal(run.got_stats[l], want_stats);
      CHECK(d.calls(l) == host[l].compressor().calls());
      CHECK(run.dm.nnz(l) == want.nnz());
      k_sum += want_stats.k_target;
      nnz_sum += want.nnz();
      if (sizes[l] == 0) {
        continue;
      }
      if (want_stats.fallback) {
        ++tally.fallbacks;
        any_fallback = true;
      } else if (want_stats.exact) {
        ++tally.refreshes;
      } else {
        ++tally.reuses;
        any_reuse = true;
      }
    }
    tally.mixed_calls += any_fallback && any_reuse ? 1 : 0;
    CHECK(total.numel == offsets.back());
    CHECK(total.k_target == k_sum);
    CHECK(total.k_selected == nnz_sum);
    CHECK(total.fallback == any_fallback);
    CHECK(total.exact == (offsets.back() > 0 && !any_reuse));
    CHECK(run.dm.nnz() == nnz_sum);
    run.require_state_equal(offsets, n, host, momentum);
  }
  return tally;
}

//! Every layer at the same scale on every call.
inline float unit_scale(int, std::size_t) {
  return 1.0f;
}

//! Call 7 scales every third layer up by 40 (too many over the remembered threshold) and call 8
//! every third layer, shifted by one, down by 1/40 (too few): the guard trips on those layers.
inline float guard_tripping_scale(int call, std::size_t l) {
  if (call == 7 && l % 3 == 0) {
    return 40.0f;
  }
  if (call == 8 && l % 3 == 1) {
    return 1.0f / 40.0f;
  }
  return 1.0f;
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold equals the host's layer by layer"),
          "[cuda][batched][reused_threshold]") {
  for (const auto& sizes : batch_shapes()) {
    for (const double density : {0.001, 0.01, 0.1}) {
      CAPTURE(sizes.size(), density);
      const reuse_tally t = require_reused_batch_same_as_host(
          sizes, {.density = density, .interval = 5}, 0.0, 11, guard_tripping_scale);
      CHECK((t.refreshes > 0) == (offsets_of(sizes).back() > 0));
    }
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: the guard trips on some layers only"),
          "[cuda][batched][reused_threshold]") {
  const std::vector<std::size_t> sizes = {5000, 3000, 20000, 1, 0, 777, 12000, 70000, 64};
  const reuse_tally t = require_reused_batch_same_as_host(sizes, {.density = 0.01, .interval = 5},
                                                          0.0, 11, guard_tripping_scale);
  CHECK(t.fallbacks > 0);
  CHECK(t.reuses > 0);
  CHECK(t.mixed_calls > 0); // some layers fell back while others reused, in one call
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: intervals and guard factors"),
          "[cuda][batched][reused_threshold]") {
  const std::vector<std::size_t> sizes = {1, 0, 2, 7, 100, 0, 1000, 4099, 3, 1, 30000};
  for (const reused_threshold_options& o :
       {reused_threshold_options{.density = 0.01, .interval = 1},
        reused_threshold_options{.density = 0.05, .interval = 3, .guard_factor = 1.0},
        reused_threshold_options{.density = 0.02, .interval = 4, .guard_factor = 8.0},
        reused_threshold_options{.density = 1.0, .interval = 2}}) {
    CAPTURE(o.density, o.interval, o.guard_factor);
    require_reused_batch_same_as_host(sizes, o, 0.0, 9, guard_tripping_scale);
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: fp16 and bf16 values"),
          "[cuda][batched][reused_threshold]") {
  for (const value_type t : {value_type::fp16, value_type::bf16}) {
    CAPTURE(static_cast<int>(t));
    require_reused_batch_same_as_host({20000, 1, 333, 0, 4096},
                                      {.density = 0.05, .interval = 5, .values = t}, 0.0, 11,
                                      guard_tripping_scale, 3e4f);
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: momentum correction"),
          "[cuda][batched][reused_threshold]") {
  require_reused_batch_same_as_host({9000, 1, 0, 517, 30000}, {.density = 0.01, .interval = 5}, 0.9,
                                    11, guard_tripping_scale);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: read only, a changing layout"),
          "[cuda][batched][reused_threshold]") {
  // layer l's state follows position l: an empty layer's call does not count, more layers
  // start fresh (the key array regrows and keeps the old keys), fewer drop the tail's state
  const std::vector<std::vector<std::size_t>> layouts = {
      {0, 100, 2600},
      {0, 100, 2600, 2600, 6000},
      {0, 100, 2600, 2700, 6000},
      {0, 0, 2600, 2700, 6000},
      {0, 100, 2600},
      {0, 100, 2600, 2700, 6000, 6000, 6010, 6100, 6500, 7000},
      {0, 100, 2600, 2700, 6000, 6001, 6010, 6100, 6500, 7000},
      {0, 100, 2600, 2700, 6000, 6001, 6010, 6100, 6500, 7000},
      {0, 100, 2600, 2700, 6000, 6001, 6010, 6100, 6500, 7000}};
  const reused_threshold_options o{.density = 0.01, .interval = 3};
  batched_reused d(o);
  std::vector<gradcomp::reused_threshold> host;
  batched_message dm;
  std::vector<sparse_message> got;
  std::vector<selection_stats> got_stats;
  for (std::size_t call = 0; call < layouts.size(); ++call) {
    const std::vector<std::size_t>& offsets = layouts[call];
    CAPTURE(call, offsets);
    std::vector<float> x = make_values(distribution::normal, 7000, 500 + call);
    x[17] = std::numeric_limits<float>::quiet_NaN();
    x[2650] = -std::numeric_limits<float>::infinity();
    const auto dx = harness::upload(x);
    d.compress(harness::pointer(dx), x.size(), offsets, dm);
    dm.copy_to(got, got_stats);
    host.resize(offsets.size() - 1, gradcomp::reused_threshold(o));
    REQUIRE(got.size() == host.size());
    for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
      CAPTURE(l);
      sparse_message want;
      const selection_stats want_stats = host[l].compress(layer_of(x, offsets, l), want);
      require_layer_equal(got[l], got_stats[l], want, want_stats);
      require_reuse_stats_equal(got_stats[l], want_stats);
      CHECK(d.calls(l) == host[l].calls());
    }
    REQUIRE(same_bits(harness::download(dx, x.size()), x)); // read only
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: steady-state calls allocate nothing"),
          "[cuda][batched][reused_threshold][workspace]") {
  const std::vector<std::size_t> offsets = offsets_of({5000, 1, 300, 12000, 0, 64});
  const std::size_t n = offsets.back();
  batched_reused d({.density = 0.01, .interval = 4});
  auto r = harness::upload(std::vector<float>(n, 0.0f));
  batched_message dm;
  std::vector<sparse_message> got;
  std::vector<selection_stats> got_stats;
  const auto run = [&](int call) {
    // the scale jumps of guard_tripping_scale make refreshes, reuses and fallbacks
    std::vector<float> g = make_values(distribution::normal, n, 5 + call);
    for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
      for (std::size_t i = offsets[l]; i < offsets[l + 1]; ++i) {
        g[i] = g[i] * guard_tripping_scale(call % 10, l);
      }
    }
    const auto dg = harness::upload(g);
    const std::size_t before = backend::allocation_count();
    d.compress_accumulate(harness::pointer(r), harness::pointer(dg), n, offsets, dm);
    dm.copy_to(got, got_stats);
    return backend::allocation_count() - before;
  };
  for (int call = 0; call < 10; ++call) {
    run(call);
  }
  std::size_t steady = 0;
  for (int call = 10; call < 20; ++call) {
    steady += run(call);
  }
  CHECK(steady == 0);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched reused threshold: bad input names the value and limit"),
          "[cuda][batched][reused_threshold][errors]") {
  CHECK_THROWS_WITH(batched_reused({.interval = 0}),
                    Catch::Contains("interval 0 is below the minimum 1"));
  CHECK_THROWS_WITH(batched_reused({.guard_factor = 0.5}),
                    Catch::Contains("guard_factor 0.5 is outside [1, 1e6]"));
  CHECK_THROWS_AS(batched_reused({.density = 0.0}), std::invalid_argument);
  batched_reused d({.density = 0.1, .interval = 2});
  batched_message m;
  std::vector<float> x(20, 1.0f);
  auto dx = harness::upload(x);
  float* p = harness::pointer(dx);
  using offsets = std::vector<std::size_t>;
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{0, 10, 21}, m),
                    Catch::Contains("layer offset 2 is 21, beyond the buffer of 20 elements"));
  const std::size_t big = gradcomp::cuda::max_batched_layer_elements + 1;
  CHECK_THROWS_WITH(
      d.compress(p, big + 1, offsets{0, 1, big + 1}, m),
      Catch::Contains("layer 1 has 262145 elements, above the batch limit of 262144"));
  CHECK_THROWS_WITH(d.compress_accumulate(nullptr, p, 20, offsets{0, 20}, m),
                    Catch::Contains("residual is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(p, p, p, 20, offsets{0, 20}, -0.5f, m),
                    Catch::Contains("momentum -0.5 is outside [0, 1)"));
  // rejected calls do not count; an empty batch is an empty message
  CHECK(d.calls(0) == 0);
  d.compress(p, 20, offsets{0}, m);
  CHECK(m.layer_count() == 0);
  d.compress(p, 20, offsets{0, 0, 20}, m);
  CHECK(m.nnz(0) == 0);
  CHECK(m.nnz(1) == 2);
  CHECK(d.calls(0) == 0);
  CHECK(d.calls(1) == 1);
}

} // namespace gradcomp::test::cuda_cases
