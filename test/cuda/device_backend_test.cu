// SPDX-License-Identifier: Apache-2.0
// The CUDA compressors on device_backend (a GPU): the cases of every <header>_cases.hpp, which
// test/cuda/<header>_test.cpp run on host_backend.
#include <gradcomp/cuda/backend.cuh>

#include <cstddef>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <vector>

namespace gradcomp::test::cuda_cases {
struct harness {
  using backend = gradcomp::cuda::device_backend;
  using vector = thrust::device_vector<float>;
  static vector upload(const std::vector<float>& v) { return vector(v.begin(), v.end()); }
  static std::vector<float> download(const vector& v, std::size_t n) {
    std::vector<float> out(n);
    thrust::copy(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), out.begin());
    return out;
  }
  static float* pointer(vector& v) { return thrust::raw_pointer_cast(v.data()); }
  static const float* pointer(const vector& v) { return thrust::raw_pointer_cast(v.data()); }
};
} // namespace gradcomp::test::cuda_cases

#define GRADCOMP_CUDA_CASE(name) "device_backend: " name
#include <gradcomp/cuda/tensor.cuh>

#include "batched_reused_threshold_cases.hpp"
#include "batched_top_k_cases.hpp"
#include "compressors_cases.hpp"
#include "exact_top_k_cases.hpp"
#include "fitted_threshold_cases.hpp"
#include "reused_threshold_cases.hpp"
#include "sampled_threshold_cases.hpp"

TEST_CASE("device_backend: thrust::device_vector and tensor_view are device tensors",
          "[cuda][tensor]") {
  using namespace gradcomp::test;
  const std::vector<float> x = make_values(distribution::normal, 50000, 9);
  thrust::device_vector<float> g(x.begin(), x.end());
  thrust::device_vector<float> r(x.size(), 0.0f);
  gradcomp::cuda::exact_top_k d(0.01);
  gradcomp::cuda::device_message a, b;
  d.compress(g, a);
  const gradcomp::tensor_view<const float, gradcomp::cuda_device_space> view(
      thrust::raw_pointer_cast(g.data()), g.size());
  d.compress(view, b);
  gradcomp::sparse_message ha, hb;
  a.copy_to(ha);
  b.copy_to(hb);
  CHECK(ha.indices == reference_top_k(x, d.target_k(x.size())));
  CHECK(ha.indices == hb.indices);
  d.compress_accumulate(r, g, a);
  CHECK(a.nnz() == d.target_k(x.size()));
}
