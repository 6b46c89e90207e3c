// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::basic_batched_device_message (cuda/batched_message.cuh) on host_backend: the
// layout of a batch (lengths, pairs per layer, pair offsets, layer-local indices) and its copy
// into one sparse message and one selection_stats per layer, an empty layer's all zero.
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/batched_message.cuh>
#include <gradcomp/cuda/batched_top_k.cuh>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"

namespace cuda_batched_message_test {

using namespace gradcomp;
using backend = gradcomp::cuda::host_backend;

TEST_CASE("cuda batched_device_message: the batch's layout and its per-layer copies",
          "[cuda][batched_message]") {
  gradcomp::cuda::basic_batched_device_message<backend> dm;
  CHECK(dm.layer_count() == 0);
  CHECK(dm.nnz() == 0);
  // three layers: {0.5, -4, 1, 3} (k = 2: 4 and 3), empty, {2, -0.25, 5} (k = 2: 5 and 2)
  const std::vector<float> x{0.5f, -4.0f, 1.0f, 3.0f, 2.0f, -0.25f, 5.0f};
  const std::vector<std::size_t> offsets{0, 4, 4, 7};
  gradcomp::cuda::basic_batched_exact_top_k<backend> c(0.5);
  c.compress(x.data(), x.size(), offsets, dm);
  REQUIRE(dm.layer_count() == 3);
  CHECK(dm.dense_length_elements(0) == 4);
  CHECK(dm.dense_length_elements(1) == 0);
  CHECK(dm.dense_length_elements(2) == 3);
  CHECK(dm.nnz(0) == 2);
  CHECK(dm.nnz(1) == 0);
  CHECK(dm.nnz(2) == 2);
  CHECK(dm.nnz() == 4);
  CHECK(dm.pair_offset(0) == 0);
  CHECK(dm.pair_offset(1) == 2);
  CHECK(dm.pair_offset(2) == 2);
  CHECK(dm.pair_offset(3) == 4);
  CHECK(dm.values_type() == value_type::fp32);
  // host_backend memory is host memory: every layer's pairs in place, indices local to it
  CHECK(std::vector<std::uint32_t>(dm.indices(), dm.indices() + 4) ==
        std::vector<std::uint32_t>{1, 3, 0, 2});
  CHECK(std::vector<float>(dm.values(), dm.values() + 4) ==
        std::vector<float>{-4.0f, 3.0f, 2.0f, 5.0f});

  std::vector<sparse_message> layers(5); // resized to the layer count
  std::vector<selection_stats> stats;
  dm.copy_to(layers, stats);
  REQUIRE(layers.size() == 3);
  REQUIRE(stats.size() == 3);
  for (const sparse_message& m : layers) {
    CHECK_NOTHROW(m.validate());
    CHECK_FALSE(m.dense);
    CHECK(m.values_type == value_type::fp32);
  }
  CHECK(layers[0].dense_length_elements == 4);
  CHECK(layers[0].indices == std::vector<std::uint32_t>{1, 3});
  CHECK(layers[0].values == std::vector<float>{-4.0f, 3.0f});
  CHECK(layers[1].dense_length_elements == 0);
  CHECK(layers[1].nnz() == 0);
  CHECK(layers[2].dense_length_elements == 3);
  CHECK(layers[2].indices == std::vector<std::uint32_t>{0, 2});
  CHECK(layers[2].values == std::vector<float>{2.0f, 5.0f});
  // each layer's stats as its own exact top-k: the k-th magnitude is the threshold
  CHECK(stats[0].numel == 4);
  CHECK(stats[0].k_target == 2);
  CHECK(stats[0].k_selected == 2);
  CHECK(stats[0].exact);
  CHECK(stats[0].threshold == 3.0f);
  CHECK(stats[2].threshold == 2.0f);
  CHECK(stats[1].numel + stats[1].k_target + stats[1].k_selected == 0);
  CHECK_FALSE(stats[1].exact);
  CHECK(stats[1].threshold == 0.0f);

  // an empty batch: no layers, nothing to copy
  c.compress(x.data(), x.size(), std::vector<std::size_t>{0}, dm);
  CHECK(dm.layer_count() == 0);
  dm.copy_to(layers);
  CHECK(layers.empty());
}

} // namespace cuda_batched_message_test
