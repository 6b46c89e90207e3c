// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Memory-space tags: where a tensor's elements live.
//!
//! The memory space is part of a tensor's type (through gradcomp::tensor_traits), so an
//! algorithm that can only touch host memory rejects device memory at compile time.
#pragma once

#include <type_traits>

namespace gradcomp {

//! @brief Ordinary host memory, dereferenceable by the CPU.
struct host_space {};

//! @brief CUDA device global memory (cudaMalloc, thrust::device_vector, a CUDA torch::Tensor):
//! not dereferenceable by host code. Host compressors refuse it at compile time.
struct cuda_device_space {};

//! @brief True for the memory-space tags gradcomp knows.
template <class Space>
inline constexpr bool is_memory_space_v =
    std::is_same_v<Space, host_space> || std::is_same_v<Space, cuda_device_space>;

} // namespace gradcomp
