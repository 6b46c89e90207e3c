// SPDX-License-Identifier: Apache-2.0
// gradcomp/cuda/tensor.cuh (nvcc only): thrust::device_vector is a float tensor in
// cuda_device_space, not a host tensor; data() is its raw device pointer and size() its length.
// (The compressors taking it: device_backend_test.cu.)
#include <gradcomp/cuda/tensor.cuh>
#include <gradcomp/tensor/memory_space.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <concepts>
#include <thrust/device_vector.h>

#include "../common/catch.hpp"

namespace cuda_tensor_test {

using vector = thrust::device_vector<float>;

TEST_CASE("device_vector is a device tensor: its raw pointer and length", "[cuda][tensor]") {
  STATIC_REQUIRE(gradcomp::tensor<vector>);
  STATIC_REQUIRE(std::same_as<gradcomp::tensor_value_t<vector>, float>);
  STATIC_REQUIRE(
      std::same_as<gradcomp::tensor_memory_space_t<vector>, gradcomp::cuda_device_space>);
  STATIC_REQUIRE_FALSE(gradcomp::host_tensor<vector>); // host compressors refuse it
  vector v(37, 1.0f);
  const vector& cv = v;
  CHECK(gradcomp::tensor_data(v) == thrust::raw_pointer_cast(v.data()));
  CHECK(gradcomp::tensor_data(cv) == thrust::raw_pointer_cast(cv.data()));
  CHECK(gradcomp::tensor_size(v) == 37);
  vector empty;
  CHECK(gradcomp::tensor_size(empty) == 0);
}

} // namespace cuda_tensor_test
