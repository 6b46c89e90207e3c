// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The two kernels of the device threshold filter (nvcc only): per-tile counts of the
//! elements whose magnitude key is at least a key, and the scatter of those elements' (index,
//! value) pairs to their tiles' offsets, ascending by index. Between them the caller scans the
//! counts into offsets (gradcomp::cuda::detail::select_at_least, select.cuh).
//!
//! A tile is filter_tile_elements = 4096 consecutive elements, one block of 256 threads; thread
//! t of warp w reads elements row x 256 + 32 w + t of its tile (rows 0..15: every load of a
//! warp is one coalesced 128-byte line). Order within a tile is row-major, so an element's rank
//! is the selected elements of the earlier rows, of the earlier warps in its row and of the
//! lower lanes of its warp (one ballot per row and warp). Each kernel reads 4n bytes; the
//! scatter writes 8 bytes per selected pair. Replaces a Thrust copy_if over zipped (index,
//! value) iterators, which ran at about a fifth of the copy bandwidth on an H200 (docs/cuda.md).
#pragma once

#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/detail/filter_tiles.cuh>
#include <gradcomp/cuda/error.cuh>

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace gradcomp::cuda::detail {

inline constexpr unsigned filter_warps = filter_threads / 32;

//! Loads this thread's element of each row into v, and one ballot per row of its warp: bit
//! `lane` of ballot[r] says whether element r x 256 + 32 w + lane of the tile has key >= `key`
//! (elements past n never do).
__device__ inline void filter_ballots(const float* __restrict__ x,
                                      std::size_t n,
                                      std::uint32_t key,
                                      float (&v)[filter_rows],
                                      std::uint32_t (&ballot)[filter_rows]) {
  const std::size_t base =
      static_cast<std::size_t>(blockIdx.x) * filter_tile_elements + threadIdx.x;
#pragma unroll
  for (unsigned r = 0; r < filter_rows; ++r) {
    const std::size_t i = base + std::size_t{r} * filter_threads;
    v[r] = i < n ? x[i] : 0.0f;
  }
#pragma unroll
  for (unsigned r = 0; r < filter_rows; ++r) {
    const std::size_t i = base + std::size_t{r} * filter_threads;
    const bool keep = i < n && gradcomp::detail::magnitude_key(v[r]) >= key;
    ballot[r] = __ballot_sync(0xffffffffu, keep);
  }
}

//! counts[tile] = elements of the tile with key >= `key`. One block per tile.
//! A template (one parameter, defaulted and unused) so that the copies of this kernel in several
//! translation units are one definition: a plain __global__ function defined in a header
//! breaks the link of a program with two .cu files that include it.
template <int = 0>
__global__ void __launch_bounds__(filter_threads)
    filter_count_kernel(const float* __restrict__ x,
                        std::size_t n,
                        std::uint32_t key,
                        std::uint64_t* __restrict__ counts) {
  __shared__ unsigned warp_counts[filter_warps];
  float v[filter_rows];
  std::uint32_t ballot[filter_rows];
  filter_ballots(x, n, key, v, ballot);
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane == 0) {
    unsigned c = 0;
#pragma unroll
    for (unsigned r = 0; r < filter_rows; ++r) {
      c += static_cast<unsigned>(__popc(ballot[r]));
    }
    warp_counts[warp] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t c = 0;
    for (unsigned w = 0; w < filter_warps; ++w) {
      c += warp_counts[w];
    }
    counts[blockIdx.x] = c;
  }
}

//! Writes the tile's selected (index, value) pairs, ascending by index, to positions
//! offsets[tile], offsets[tile] + 1, ...; a position p >= cap writes slot cap instead (the
//! overflow slot; indices and values have room for cap + 1). One block per tile.
//! A template (one parameter, defaulted and unused) so that the copies of this kernel in several
//! translation units are one definition: a plain __global__ function defined in a header
//! breaks the link of a program with two .cu files that include it.
template <int = 0>
__global__ void __launch_bounds__(filter_threads)
    filter_scatter_kernel(const float* __restrict__ x,
                          std::size_t n,
                          std::uint32_t key,
                          const std::uint64_t* __restrict__ offsets,
                          std::size_t cap,
                          std::uint32_t* __restrict__ indices,
                          float* __restrict__ values) {
  // before[r][w]: selected elements of the tile ahead of row r's warp-w segment
  __shared__ unsigned before[filter_rows][filter_warps];
  float v[filter_rows];
  std::uint32_t ballot[filter_rows];
  filter_ballots(x, n, key, v, ballot);
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane < filter_rows) {
    unsigned c = 0;
#pragma unroll
    for (unsigned r = 0; r < filter_rows; ++r) {
      c = r == lane ? static_cast<unsigned>(__popc(ballot[r])) : c;
    }
    before[lane][warp] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned running = 0;
    for (unsigned r = 0; r < filter_rows; ++r) {
      for (unsigned w = 0; w < filter_warps; ++w) {
        const unsigned c = before[r][w];
        before[r][w] = running;
        running += c;
      }
    }
  }
  __syncthreads();
  const std::uint64_t tile_offset = offsets[blockIdx.x];
  const std::uint32_t lower_lanes = (1u << lane) - 1u;
  const std::size_t base =
      static_cast<std::size_t>(blockIdx.x) * filter_tile_elements + threadIdx.x;
#pragma unroll
  for (unsigned r = 0; r < filter_rows; ++r) {
    if ((ballot[r] >> lane) & 1u) {
      const std::size_t i = base + std::size_t{r} * filter_threads;
      const std::uint64_t p =
          tile_offset + before[r][warp] + static_cast<unsigned>(__popc(ballot[r] & lower_lanes));
      const std::size_t slot = p < cap ? static_cast<std::size_t>(p) : cap;
      indices[slot] = static_cast<std::uint32_t>(i);
      values[slot] = v[r];
    }
  }
}

//! Launches filter_count_kernel on `stream` (nothing for n = 0). @throws cuda_error.
inline void launch_filter_count(
    const float* x, std::size_t n, std::uint32_t key, std::uint64_t* counts, cudaStream_t stream) {
  if (n == 0) {
    return;
  }
  filter_count_kernel<<<static_cast<unsigned>(filter_tiles(n)), filter_threads, 0, stream>>>(
      x, n, key, counts);
  check(cudaGetLastError(), "filter_count_kernel launch");
}

//! Launches filter_scatter_kernel on `stream` (nothing for n = 0). @throws cuda_error.
inline void launch_filter_scatter(const float* x,
                                  std::size_t n,
                                  std::uint32_t key,
                                  const std::uint64_t* offsets,
                                  std::size_t cap,
                                  std::uint32_t* indices,
                                  float* values,
                                  cudaStream_t stream) {
  if (n == 0) {
    return;
  }
  filter_scatter_kernel<<<static_cast<unsigned>(filter_tiles(n)), filter_threads, 0, stream>>>(
      x, n, key, offsets, cap, indices, values);
  check(cudaGetLastError(), "filter_scatter_kernel launch");
}

} // namespace gradcomp::cuda::detail
