// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::basic_device_message (cuda/device_message.cuh) on host_backend: empty at first;
// after a compression its pairs, dense length and value type in backend memory, and copy_to()
// replaces whatever the host message held with a sparse message of the same content.
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/device_message.cuh>
#include <gradcomp/cuda/exact_top_k.cuh>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstdint>
#include <vector>

#include "../common/catch.hpp"

namespace cuda_device_message_test {

using namespace gradcomp;
using message = gradcomp::cuda::basic_device_message<gradcomp::cuda::host_backend>;

TEST_CASE("cuda device_message: the selection in backend memory and its host copy",
          "[cuda][device_message]") {
  message dm;
  CHECK(dm.nnz() == 0);
  CHECK(dm.dense_length_elements() == 0);
  CHECK(dm.values_type() == value_type::fp32);
  // exact top-k at density 0.25 of 8 values: k = 2, the magnitudes 4 and 3
  const std::vector<float> x{0.5f, -4.0f, 1.0f, 3.0f, -0.25f, 2.0f, 0.0f, -1.5f};
  gradcomp::cuda::basic_exact_top_k<gradcomp::cuda::host_backend> c(0.25);
  c.compress(x.data(), x.size(), dm);
  REQUIRE(dm.nnz() == 2);
  CHECK(dm.dense_length_elements() == 8);
  CHECK(dm.values_type() == value_type::fp32);
  // host_backend memory is host memory: the pairs can be read in place
  CHECK(std::vector<std::uint32_t>(dm.indices(), dm.indices() + 2) ==
        std::vector<std::uint32_t>{1, 3});
  CHECK(std::vector<float>(dm.values(), dm.values() + 2) == std::vector<float>{-4.0f, 3.0f});
  sparse_message m;
  m.clear(99);
  m.dense = true;
  m.values = {9.0f, 9.0f, 9.0f};
  dm.copy_to(m);
  CHECK_NOTHROW(m.validate());
  CHECK_FALSE(m.dense);
  CHECK(m.dense_length_elements == 8);
  CHECK(m.indices == std::vector<std::uint32_t>{1, 3});
  CHECK(m.values == std::vector<float>{-4.0f, 3.0f});
  CHECK(m.values_type == value_type::fp32);
  // the value type travels with the pairs
  gradcomp::cuda::basic_exact_top_k<gradcomp::cuda::host_backend> half(
      {.density = 0.25, .values = value_type::fp16});
  half.compress(x.data(), x.size(), dm);
  CHECK(dm.values_type() == value_type::fp16);
  dm.copy_to(m);
  CHECK(m.values_type == value_type::fp16);
  CHECK(m.values == std::vector<float>{-4.0f, 3.0f}); // exactly representable in fp16
}

} // namespace cuda_device_message_test
