// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Tests of the batched CUDA compressor (gradcomp::cuda::basic_batched_exact_top_k),
//! written once over the harness of compressor_cases.hpp (included first: the harness, backend
//! and distributions) and compiled with it for both backends.
//! The reference is the host gradcomp::exact_top_k with gradcomp::error_feedback run layer by
//! layer (one object per layer, as a model without batching would), and sort-and-truncate.
#pragma once

#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/batched_top_k.cuh>

#include "../common/catch.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "../common/generators.hpp"
#include "../common/same_bits.hpp"
#include "compressor_cases.hpp"

namespace gradcomp::test::cuda_cases {

using batched_top_k = gradcomp::cuda::basic_batched_exact_top_k<backend>;
using batched_message = gradcomp::cuda::basic_batched_device_message<backend>;

//! L + 1 offsets of layers of the given sizes, packed from 0.
inline std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> offsets{0};
  for (const std::size_t s : sizes) {
    offsets.push_back(offsets.back() + s);
  }
  return offsets;
}

//! A flat gradient of `n` elements whose layer l has distribution l + call (mod 5).
inline std::vector<float> batch_gradient(const std::vector<std::size_t>& offsets,
                                         std::size_t n,
                                         std::uint64_t call,
                                         float scale = 1.0f) {
  std::vector<float> g = make_values(distribution::normal, n, 1000 + call, scale);
  for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
    const distribution d = all_distributions()[(l + call) % all_distributions().size()];
    const std::vector<float> v =
        make_values(d, offsets[l + 1] - offsets[l], 31 * l + 7 * call + 1, scale);
    std::copy(v.begin(), v.end(), g.begin() + static_cast<std::ptrdiff_t>(offsets[l]));
  }
  return g;
}

//! Layer l of a flat host vector.
inline std::span<const float>
layer_of(const std::vector<float>& v, const std::vector<std::size_t>& offsets, std::size_t l) {
  return std::span<const float>(v).subspan(offsets[l], offsets[l + 1] - offsets[l]);
}

//! Checks a batched layer's message and stats against the host compressor's, bit for bit.
inline void require_layer_equal(const sparse_message& got,
                                const selection_stats& got_stats,
                                const sparse_message& want,
                                const selection_stats& want_stats) {
  CHECK_NOTHROW(got.validate());
  REQUIRE(got.dense_length_elements == want.dense_length_elements);
  REQUIRE(got.indices == want.indices);
  REQUIRE(same_bits(got.values, want.values));
  REQUIRE(got.values_type == want.values_type);
  CHECK(got_stats.numel == want_stats.numel);
  CHECK(got_stats.k_target == want_stats.k_target);
  CHECK(got_stats.k_selected == want_stats.k_selected);
  CHECK(got_stats.exact == want_stats.exact);
  CHECK(std::bit_cast<std::uint32_t>(got_stats.threshold) ==
        std::bit_cast<std::uint32_t>(want_stats.threshold));
}

//! One host error_feedback per layer of `sizes` (momentum correction when momentum > 0), each
//! with its own copy of compressor `c`: the reference a model without batching would use.
template <class Compressor>
std::vector<error_feedback<Compressor>>
host_layers(const std::vector<std::size_t>& sizes, const Compressor& c, double momentum) {
  std::vector<error_feedback<Compressor>> host;
  for (const std::size_t s : sizes) {
    host.emplace_back(s, c, momentum_correction{momentum});
  }
  return host;
}

//! A batched error-feedback run over a buffer of n elements: the residual and velocity in
//! backend memory (zeros at first), the message and its host copy.
struct batch_feedback_run {
  typename harness::vector residual;
  typename harness::vector velocity;
  batched_message dm;
  std::vector<sparse_message> got;
  std::vector<selection_stats> got_stats;

  explicit batch_feedback_run(std::size_t n)
      : residual(harness::upload(std::vector<float>(n, 0.0f))),
        velocity(harness::upload(std::vector<float>(n, 0.0f))) {}

  //! One call of batched compressor `d` on gradient g (momentum correction when momentum > 0),
  //! the message copied into got / got_stats (one per layer).
  template <class Batched>
  selection_stats step(Batched& d,
                       const std::vector<float>& g,
                       const std::vector<std::size_t>& offsets,
                       double momentum) {
    const auto dg = harness::upload(g);
    const selection_stats total =
        momentum > 0.0
            ? d.compress_accumulate_momentum(harness::pointer(residual), harness::pointer(velocity),
                                             harness::pointer(dg), g.size(), offsets,
                                             static_cast<float>(momentum), dm)
            : d.compress_accumulate(harness::pointer(residual), harness::pointer(dg), g.size(),
                                    offsets, dm);
    dm.copy_to(got, got_stats);
    REQUIRE(dm.layer_count() == offsets.size() - 1);
    REQUIRE(got.size() == offsets.size() - 1);
    REQUIRE(got_stats.size() == offsets.size() - 1);
    return total;
  }

  //! Every layer's residual (and velocity, with momentum) bit for bit equal to its host
  //! error_feedback's; the elements past the last layer never accumulated.
  template <class Host>
  void require_state_equal(const std::vector<std::size_t>& offsets,
                           std::size_t n,
                           const std::vector<Host>& host,
                           double momentum) const {
    const std::vector<float> r = harness::download(residual, n);
    const std::vector<float> v = harness::download(velocity, n);
    for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
      CAPTURE(l);
      REQUIRE(same_bits(layer_of(r, offsets, l), host[l].residual()));
      if (momentum > 0.0) {
        REQUIRE(same_bits(layer_of(v, offsets, l), host[l].velocity()));
      }
    }
    for (std::size_t i = offsets.back(); i < n; ++i) {
      REQUIRE(r[i] == 0.0f); // past the last layer: never accumulated
    }
  }
};

//! `calls` batched calls with error feedback (momentum correction when momentum > 0) on layers
//! of `sizes` in a buffer with `padding` trailing elements, against one host error_feedback per
//! layer: every layer's message and stats, the residual and the velocity bit for bit, the
//! indices against sort-and-truncate of the accumulation, the padding untouched.
inline void require_batch_same_as_host(const std::vector<std::size_t>& sizes,
                                       const exact_top_k_options& o,
                                       double momentum = 0.0,
                                       int calls = 3,
                                       std::size_t padding = 5,
                                       float scale = 1.0f) {
  const std::vector<std::size_t> offsets = offsets_of(sizes);
  const std::size_t layers = sizes.size();
  const std::size_t n = offsets.back() + padding;
  batched_top_k d(o);
  auto host = host_layers(sizes, gradcomp::exact_top_k(o), momentum);
  batch_feedback_run run(n);
  for (int call = 0; call < calls; ++call) {
    CAPTURE(call);
    const std::vector<float> g =
        batch_gradient(offsets, n, static_cast<std::uint64_t>(call), scale);
    const selection_stats total = run.step(d, g, offsets, momentum);
    std::size_t k_sum = 0;
    for (std::size_t l = 0; l < layers; ++l) {
      CAPTURE(l, sizes[l]);
      const std::span<const float> gl = layer_of(g, offsets, l);
      std::vector<float> acc(host[l].residual().begin(), host[l].residual().end());
      for (std::size_t i = 0; i < acc.size(); ++i) {
        acc[i] = acc[i] + gl[i];
      }
      sparse_message want;
      const selection_stats want_stats = host[l].compress(gl, want);
      require_layer_equal(run.got[l], run.got_stats[l], want, want_stats);
      if (momentum == 0.0) {
        REQUIRE(run.got[l].indices == reference_top_k(acc, want_stats.k_target));
      }
      CHECK(run.dm.nnz(l) == want.nnz());
      k_sum += want.nnz();
    }
    CHECK(total.numel == offsets.back());
    CHECK(total.k_selected == k_sum);
    CHECK(run.dm.nnz() == k_sum);
    run.require_state_equal(offsets, n, host, momentum);
  }
}

//! Layer sizes: mixed, with empty layers, single elements, and the host's sample-guided size.
inline const std::vector<std::vector<std::size_t>>& batch_shapes() {
  static const std::vector<std::vector<std::size_t>> shapes = [] {
    std::vector<std::vector<std::size_t>> s = {
        {1}, {0}, {0, 0, 0}, {1, 0, 2, 7, 100, 0, 1000, 4099, 3, 1}, {70000, 5, 65536, 12}};
    std::vector<std::size_t> many; // 150 small layers, 1 .. 600 elements
    for (std::size_t l = 0; l < 150; ++l) {
      many.push_back(1 + (l * 7919) % 600);
    }
    s.push_back(many);
    return s;
  }();
  return shapes;
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched top-k equals the host compressor layer by layer"),
          "[cuda][batched]") {
  for (const auto& sizes : batch_shapes()) {
    for (const double density : {0.001, 0.01, 0.1, 0.5, 1.0}) {
      CAPTURE(sizes.size(), density);
      require_batch_same_as_host(sizes, {.density = density});
    }
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched top-k takes a layer of the size limit"), "[cuda][batched]") {
  require_batch_same_as_host({3, gradcomp::cuda::max_batched_layer_elements, 9}, {.density = 0.01},
                             0.0, 2);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched fp16 and bf16 values: rounded as on the host"),
          "[cuda][batched]") {
  for (const value_type t : {value_type::fp16, value_type::bf16}) {
    CAPTURE(static_cast<int>(t));
    require_batch_same_as_host({20000, 1, 333, 0, 4096}, {.density = 0.05, .values = t}, 0.0, 3, 5,
                               3e4f);
  }
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched momentum correction equals the host's"), "[cuda][batched]") {
  require_batch_same_as_host({9000, 1, 0, 517, 30000}, {.density = 0.01}, 0.9, 3);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched read-only compression, NaN and a changing layout"),
          "[cuda][batched]") {
  std::vector<float> x = make_values(distribution::normal, 6000, 77);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[2500] = -std::numeric_limits<float>::infinity();
  const auto dx = harness::upload(x);
  batched_top_k d(0.002);
  gradcomp::exact_top_k h(0.002);
  batched_message dm;
  std::vector<sparse_message> got;
  std::vector<selection_stats> got_stats;
  // the same buffer cut three ways, back and forth (the device layout is re-uploaded)
  const std::vector<std::vector<std::size_t>> layouts = {
      {0, 100, 2600, 6000}, {0, 3000, 3000, 5999}, {0, 100, 2600, 6000}};
  for (const auto& offsets : layouts) {
    CAPTURE(offsets);
    d.compress(harness::pointer(dx), x.size(), offsets, dm);
    dm.copy_to(got, got_stats);
    REQUIRE(got.size() == offsets.size() - 1);
    for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
      CAPTURE(l);
      sparse_message want;
      const selection_stats want_stats = h.compress(layer_of(x, offsets, l), want);
      require_layer_equal(got[l], got_stats[l], want, want_stats);
    }
  }
  REQUIRE(same_bits(harness::download(dx, x.size()), x)); // read only
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched steady-state calls allocate nothing"),
          "[cuda][batched][workspace]") {
  const std::vector<std::size_t> offsets = offsets_of({5000, 1, 300, 12000, 0, 64});
  const std::size_t n = offsets.back();
  batched_top_k d(0.01);
  const auto g = harness::upload(make_values(distribution::normal, n, 5));
  auto r = harness::upload(std::vector<float>(n, 0.0f));
  batched_message dm;
  std::vector<sparse_message> got;
  for (int warm = 0; warm < 3; ++warm) {
    d.compress_accumulate(harness::pointer(r), harness::pointer(g), n, offsets, dm);
    dm.copy_to(got);
  }
  const std::size_t before = backend::allocation_count();
  for (int call = 0; call < 6; ++call) {
    d.compress_accumulate(harness::pointer(r), harness::pointer(g), n, offsets, dm);
    dm.copy_to(got);
  }
  CHECK(backend::allocation_count() == before);
  CHECK(before > 0);
}

TEST_CASE(GRADCOMP_CUDA_CASE("batched bad input is rejected with the value and limit named"),
          "[cuda][batched][errors]") {
  batched_top_k d(0.01);
  batched_message m;
  std::vector<float> x(20, 1.0f);
  auto dx = harness::upload(x);
  float* p = harness::pointer(dx);
  using offsets = std::vector<std::size_t>;
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{}, m), Catch::Contains("layer offsets are empty"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{2, 10}, m),
                    Catch::Contains("layer offset 0 is 2, not 0"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{0, 10, 4}, m),
                    Catch::Contains("layer offset 2 is 4, below offset 1 (10)"));
  CHECK_THROWS_WITH(d.compress(p, 20, offsets{0, 10, 21}, m),
                    Catch::Contains("layer offset 2 is 21, beyond the buffer of 20 elements"));
  const std::size_t big = gradcomp::cuda::max_batched_layer_elements + 1;
  CHECK_THROWS_WITH(
      d.compress(p, big + 1, offsets{0, 1, big + 1}, m),
      Catch::Contains("layer 1 has 262145 elements, above the batch limit of 262144"));
  CHECK_THROWS_WITH(d.compress(nullptr, 20, offsets{0, 20}, m),
                    Catch::Contains("gradient is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate(nullptr, p, 20, offsets{0, 20}, m),
                    Catch::Contains("residual is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(p, nullptr, p, 20, offsets{0, 20}, 0.5f, m),
                    Catch::Contains("velocity is a null pointer with 20"));
  CHECK_THROWS_WITH(d.compress_accumulate_momentum(p, p, p, 20, offsets{0, 20}, 1.5f, m),
                    Catch::Contains("momentum 1.5 is outside [0, 1)"));
  CHECK_THROWS_WITH(d.compress(p, std::size_t{1} << 33, offsets{0, 20}, m),
                    Catch::Contains("32-bit index limit"));
  CHECK_THROWS_AS(batched_top_k(0.0), std::invalid_argument);
  CHECK_THROWS_AS(batched_top_k(1.5), std::invalid_argument);
  CHECK_THROWS_WITH(batched_top_k(exact_top_k_options{.nonfinite = nonfinite_policy::raise}),
                    Catch::Contains("nonfinite policy raise is not supported"));
  // a rejected call leaves the object usable, and an empty batch is an empty message
  d.compress(p, 20, offsets{0}, m);
  CHECK(m.layer_count() == 0);
  CHECK(m.nnz() == 0);
  d.compress(p, 20, offsets{0, 20}, m);
  CHECK(m.nnz() == 1);
}

} // namespace gradcomp::test::cuda_cases
