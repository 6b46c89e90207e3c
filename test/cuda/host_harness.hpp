// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The harness of the CUDA compressors' cases (compressor_cases.hpp) on host_backend
//! (Thrust's CPP system, host memory): each test/cuda/<header>_test.cpp includes it before the
//! cases of its header, so they are built by the host compiler and run in CI, where there is no
//! GPU. device_backend_test.cu defines the same harness for device_backend.
#pragma once

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
