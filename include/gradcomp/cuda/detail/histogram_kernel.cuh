// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The digit-histogram kernel of the device radix select (nvcc only): each block counts
//! into a shared-memory histogram of up to 2048 bins, then adds its nonzero bins to the global
//! one. Counts equal gradcomp::detail::digit_histogram's on the same values.
#pragma once

#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/error.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace gradcomp::cuda::detail {

inline constexpr unsigned histogram_threads = 256;
inline constexpr unsigned histogram_max_bins = 2048;

//! A template (one parameter, defaulted and unused) so that the copies of this kernel in several
//! translation units are one definition: a plain __global__ function defined in a header
//! breaks the link of a program with two .cu files that include it.
template <int = 0>
__global__ void __launch_bounds__(histogram_threads)
    digit_histogram_kernel(const float* __restrict__ values,
                           std::size_t n,
                           unsigned shift,
                           unsigned bits,
                           std::uint32_t prefix,
                           std::uint32_t* __restrict__ h) {
  __shared__ std::uint32_t bins[histogram_max_bins];
  const unsigned buckets = 1u << bits;
  for (unsigned d = threadIdx.x; d < buckets; d += blockDim.x) {
    bins[d] = 0;
  }
  __syncthreads();
  const unsigned high_shift = shift + bits;
  const std::uint32_t high = prefix >> high_shift;
  const std::uint32_t mask = buckets - 1u;
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    const std::uint32_t key = gradcomp::detail::magnitude_key(values[i]);
    if ((key >> high_shift) == high) {
      atomicAdd(&bins[(key >> shift) & mask], 1u);
    }
  }
  __syncthreads();
  for (unsigned d = threadIdx.x; d < buckets; d += blockDim.x) {
    if (bins[d] != 0) {
      atomicAdd(&h[d], bins[d]);
    }
  }
}

//! Launches digit_histogram_kernel on `stream`: enough blocks to fill the GPU (grid-stride).
inline void launch_digit_histogram(const float* values,
                                   std::size_t n,
                                   unsigned shift,
                                   unsigned bits,
                                   std::uint32_t prefix,
                                   std::uint32_t* h,
                                   cudaStream_t stream) {
  if (n == 0) {
    return;
  }
  const std::size_t wanted = (n + histogram_threads * 8 - 1) / (histogram_threads * 8);
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>(wanted, 1024));
  digit_histogram_kernel<<<blocks, histogram_threads, 0, stream>>>(values, n, shift, bits, prefix,
                                                                   h);
  check(cudaGetLastError(), "digit_histogram_kernel launch");
}

} // namespace gradcomp::cuda::detail
