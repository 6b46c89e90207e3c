// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief thrust::device_vector as a gradcomp tensor in cuda_device_space (nvcc only), so the
//! CUDA compressors take it directly. Raw device pointers go through
//! gradcomp::tensor_view<float, cuda_device_space>{ptr, n}; a CUDA torch::Tensor t through
//! tensor_view<float, cuda_device_space>{t.data_ptr<float>(), size_t(t.numel())} (contiguous,
//! float32).
#pragma once

#include <gradcomp/tensor/tensor.hpp>

#include <cstddef>
#include <thrust/device_vector.h>

namespace gradcomp {

//! @brief thrust::device_vector<V>: V elements in device memory. O(1) access to pointer and
//! size; host code must not dereference data().
template <class V, class Alloc>
struct tensor_traits<thrust::device_vector<V, Alloc>> {
  //! The element type.
  using value_type = V;
  //! Device memory.
  using memory_space = cuda_device_space;
  //! The raw device pointer to the first element (host code must not dereference it).
  static V* data(thrust::device_vector<V, Alloc>& t) noexcept {
    return thrust::raw_pointer_cast(t.data());
  }
  //! The raw device pointer to the first element, read only.
  static const V* data(const thrust::device_vector<V, Alloc>& t) noexcept {
    return thrust::raw_pointer_cast(t.data());
  }
  //! Number of elements.
  static std::size_t size(const thrust::device_vector<V, Alloc>& t) noexcept { return t.size(); }
};

} // namespace gradcomp
