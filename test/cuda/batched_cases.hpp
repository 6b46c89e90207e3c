// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the cases of the batched CUDA compressors share (batched_top_k_cases.hpp for
//! gradcomp::cuda::basic_batched_exact_top_k, batched_reused_threshold_cases.hpp), over the
//! harness of compressor_cases.hpp (included first: the harness, backend and distributions).
//! The reference is the host gradcomp::exact_top_k with gradcomp::error_feedback run layer by
//! layer (one object per layer, as a model without batching would), and sort-and-truncate.
#pragma once

#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cuda/batched_top_k.cuh>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../common/catch.hpp"
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

} // namespace gradcomp::test::cuda_cases
