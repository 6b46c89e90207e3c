// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Execution backends of the CUDA compressors: where their buffers live, how they are
//! allocated and copied, which Thrust system runs the algorithms, and the one kernel Thrust has
//! no primitive for (the digit histogram of the radix select).
//!
//! * gradcomp::cuda::device_backend (nvcc only): CUDA device memory, every operation on the
//!   cudaStream_t the caller passes, Thrust's CUDA system (CUB underneath);
//! * gradcomp::cuda::host_backend: host memory and Thrust's sequential CPP system. It runs the
//!   very same algorithm code on the CPU, which is how CI (no GPU) tests the backend's logic
//!   bit for bit against the host compressors; users get no speed from it.
//!
//! Sorting, like the digit histogram, is a backend operation: Thrust's radix sorts on the
//! device, std::sort with the same order on the host.
//!
//! Every backend allocation is counted (allocation_count()), so tests can check that
//! steady-state compression allocates nothing.
#pragma once

#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/detail/filter_tiles.cuh>
#include <gradcomp/cuda/detail/thrust_config.cuh>
#include <gradcomp/tensor/memory_space.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thrust/system/cpp/execution_policy.h>

#if defined(__CUDACC__)
#include <gradcomp/cuda/detail/filter_kernels.cuh>
#include <gradcomp/cuda/detail/histogram_kernel.cuh>
#include <gradcomp/cuda/error.cuh>

#include <cuda_runtime_api.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>
#endif

namespace gradcomp::cuda {

namespace detail {
//! Shared allocation counter of one backend type.
template <class Backend>
std::atomic<std::size_t>& allocation_counter() noexcept {
  static std::atomic<std::size_t> count{0};
  return count;
}
} // namespace detail

//! @brief Host memory + Thrust's sequential CPP system: the CUDA compressors' algorithms run on
//! the CPU (for tests without a GPU). Calls take a `stream_type` that is ignored. Not
//! thread-safe per object; distinct objects may be used concurrently.
struct host_backend {
  //! Buffers live in host memory.
  using memory_space = host_space;
  //! No streams on the host: an empty tag, accepted and ignored.
  struct stream_type {};
  //! Ignored (kept so that code written for device_backend compiles unchanged).
  stream_type stream{};

  //! Allocates `bytes` (>= 1) of host memory. @throws std::bad_alloc.
  static void* allocate(std::size_t bytes) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) {
      throw std::bad_alloc();
    }
    ++detail::allocation_counter<host_backend>();
    return p;
  }
  //! Frees memory from allocate() (std::free; null is a no-op).
  static void deallocate(void* p) noexcept { std::free(p); }
  //! Allocations made so far by every host_backend in the process.
  [[nodiscard]] static std::size_t allocation_count() noexcept {
    return detail::allocation_counter<host_backend>().load();
  }

  //! Copies `bytes` from backend memory to host memory (synchronous).
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const noexcept {
    if (bytes != 0) {
      std::memcpy(dst, src, bytes);
    }
  }
  //! Copies `bytes` from host memory to backend memory (synchronous).
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const noexcept {
    if (bytes != 0) {
      std::memcpy(dst, src, bytes);
    }
  }
  //! Zeroes `bytes` of backend memory.
  void fill_zero(void* p, std::size_t bytes) const noexcept {
    if (bytes != 0) {
      std::memset(p, 0, bytes);
    }
  }
  //! The Thrust execution policy, temporary storage from `alloc`.
  template <class Allocator>
  [[nodiscard]] auto policy(Allocator& alloc) const {
    return thrust::cpp::par(alloc);
  }
  //! Adds the digit histogram (gradcomp::detail::digit_histogram) of values[0, n) to h.
  void digit_histogram(const float* values,
                       std::size_t n,
                       unsigned shift,
                       unsigned bits,
                       std::uint32_t prefix,
                       std::uint32_t* h) const noexcept {
    gradcomp::detail::digit_histogram(values, n, shift, bits, prefix, h);
  }
  //! counts[t] = elements of filter tile t of x[0, n) (detail::filter_tiles) whose magnitude
  //! key is at least `key`, for t < filter_tiles(n). O(n).
  void filter_count(const float* x,
                    std::size_t n,
                    std::uint32_t key,
                    std::uint64_t* counts) const noexcept {
    for (std::size_t t = 0; t < detail::filter_tiles(n); ++t) {
      const std::size_t end = std::min(n, (t + 1) * detail::filter_tile_elements);
      std::uint64_t c = 0;
      for (std::size_t i = t * detail::filter_tile_elements; i < end; ++i) {
        c += gradcomp::detail::magnitude_key(x[i]) >= key ? 1 : 0;
      }
      counts[t] = c;
    }
  }
  //! Writes the (i, x[i]) with key >= `key` of each filter tile t, ascending by i, to positions
  //! offsets[t], offsets[t] + 1, ...; a position p >= cap writes slot cap instead (indices and
  //! values have room for cap + 1). O(n).
  void filter_scatter(const float* x,
                      std::size_t n,
                      std::uint32_t key,
                      const std::uint64_t* offsets,
                      std::size_t cap,
                      std::uint32_t* indices,
                      float* values) const noexcept {
    for (std::size_t t = 0; t < detail::filter_tiles(n); ++t) {
      const std::size_t end = std::min(n, (t + 1) * detail::filter_tile_elements);
      std::uint64_t p = offsets[t];
      for (std::size_t i = t * detail::filter_tile_elements; i < end; ++i) {
        if (gradcomp::detail::magnitude_key(x[i]) >= key) {
          const std::size_t slot = p < cap ? static_cast<std::size_t>(p) : cap;
          indices[slot] = static_cast<std::uint32_t>(i);
          values[slot] = x[i];
          ++p;
        }
      }
    }
  }
  //! Orders positions[0, n), which hold 0 .. n-1 on entry, by (keys[p], p) ascending: what a
  //! stable sort by key gives (keys may be left in any order). std::sort, O(n log n), no
  //! allocation. (Thrust's sequential sorts bind references through null system pointers, which
  //! UndefinedBehaviorSanitizer rejects, so the host backend sorts with the standard library.)
  template <class Allocator>
  void sort_positions_by_key(Allocator&,
                             std::uint64_t* keys,
                             std::uint32_t* positions,
                             std::size_t n) const {
    std::sort(positions, positions + n, [keys](std::uint32_t a, std::uint32_t b) {
      return keys[a] < keys[b] || (keys[a] == keys[b] && a < b);
    });
  }
  //! Sorts values[0, n) ascending. std::sort, O(n log n), no allocation.
  template <class Allocator>
  void sort_ascending(Allocator&, std::uint32_t* values, std::size_t n) const {
    std::sort(values, values + n);
  }
};

#if defined(__CUDACC__)
//! @brief CUDA device memory, operations ordered on one cudaStream_t (the one each call
//! passes; 0 = the legacy default stream). Thrust's CUDA system runs the algorithms, without
//! synchronising except where a result must reach the host (counts, histograms, a key).
//! Errors throw gradcomp::cuda::cuda_error (or thrust::system_error from Thrust).
struct device_backend {
  //! Buffers live in CUDA device memory.
  using memory_space = cuda_device_space;
  //! A CUDA stream.
  using stream_type = cudaStream_t;
  //! The stream every operation is ordered on (nullptr: the legacy default stream).
  stream_type stream = nullptr;

  //! cudaMalloc of `bytes` (>= 1). @throws cuda_error.
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    ++detail::allocation_counter<device_backend>();
    return p;
  }
  //! cudaFree of memory from allocate() (null is a no-op); its status is ignored (a destructor
  //! path must not throw).
  static void deallocate(void* p) noexcept { static_cast<void>(cudaFree(p)); }
  //! Allocations made so far by every device_backend in the process.
  [[nodiscard]] static std::size_t allocation_count() noexcept {
    return detail::allocation_counter<device_backend>().load();
  }

  //! Copies device to host on the stream, then waits for the stream. @throws cuda_error.
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0) {
      return;
    }
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  //! Copies host to device, ordered on the stream. From pageable host memory CUDA stages `src`
  //! before the call returns (and may wait for the stream first), so `src` may be reused at
  //! once. @throws cuda_error.
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const {
    if (bytes != 0) {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    }
  }
  //! Zeroes device memory, ordered on the stream. @throws cuda_error.
  void fill_zero(void* p, std::size_t bytes) const {
    if (bytes != 0) {
      check(cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync");
    }
  }
  //! The Thrust execution policy: the CUDA system without implicit synchronisation
  //! (par_nosync), on `stream`, temporary storage from `alloc`.
  template <class Allocator>
  [[nodiscard]] auto policy(Allocator& alloc) const {
    return thrust::cuda::par_nosync(alloc).on(stream);
  }
  //! The digit histogram of values[0, n) added to h (device memory), by a kernel with one
  //! shared-memory histogram per block. @throws cuda_error on a launch failure.
  void digit_histogram(const float* values,
                       std::size_t n,
                       unsigned shift,
                       unsigned bits,
                       std::uint32_t prefix,
                       std::uint32_t* h) const {
    detail::launch_digit_histogram(values, n, shift, bits, prefix, h, stream);
  }
  //! counts[t] = elements of filter tile t of x[0, n) with key >= `key` (device memory): one
  //! block per tile (detail::filter_count_kernel), 4n bytes read. @throws cuda_error.
  void filter_count(const float* x, std::size_t n, std::uint32_t key, std::uint64_t* counts) const {
    detail::launch_filter_count(x, n, key, counts, stream);
  }
  //! The host backend's filter_scatter on the device (detail::filter_scatter_kernel): one block
  //! per tile, 4n bytes read, 8 per written pair. @throws cuda_error.
  void filter_scatter(const float* x,
                      std::size_t n,
                      std::uint32_t key,
                      const std::uint64_t* offsets,
                      std::size_t cap,
                      std::uint32_t* indices,
                      float* values) const {
    detail::launch_filter_scatter(x, n, key, offsets, cap, indices, values, stream);
  }
  //! Orders positions[0, n), which hold 0 .. n-1 on entry, by (keys[p], p) ascending: a stable
  //! radix sort by key (Thrust, CUB underneath), keys sorted with them; temporary storage from
  //! `alloc`. No host round trip. @throws thrust::system_error on a CUDA failure.
  template <class Allocator>
  void sort_positions_by_key(Allocator& alloc,
                             std::uint64_t* keys,
                             std::uint32_t* positions,
                             std::size_t n) const {
    thrust::stable_sort_by_key(policy(alloc), keys, keys + n, positions);
  }
  //! Sorts values[0, n) ascending (radix sort; temporary storage from `alloc`). No host round
  //! trip. @throws thrust::system_error on a CUDA failure.
  template <class Allocator>
  void sort_ascending(Allocator& alloc, std::uint32_t* values, std::size_t n) const {
    thrust::sort(policy(alloc), values, values + n);
  }
};
#endif

} // namespace gradcomp::cuda
