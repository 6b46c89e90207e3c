// SPDX-License-Identifier: Apache-2.0
// The CUDA compressors' algorithms on host_backend (Thrust's CPP system, host memory): built by
// the host compiler and run in CI, where there is no GPU.
#include <gradcomp/cuda/backend.cuh>

#include <cstddef>
#include <vector>

namespace gradcomp::test::cuda_cases {
struct harness {
  using backend = gradcomp::cuda::host_backend;
  using vector = std::vector<float>;
  static vector upload(const std::vector<float>& v) { return v; }
  static std::vector<float> download(const vector& v, std::size_t n) {
    return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  static float* pointer(vector& v) { return v.data(); }
  static const float* pointer(const vector& v) { return v.data(); }
};
} // namespace gradcomp::test::cuda_cases

#define GRADCOMP_CUDA_CASE(name) "host_backend: " name
#include "batched_cases.hpp"
#include "batched_threshold_cases.hpp"
#include "compressor_cases.hpp"
