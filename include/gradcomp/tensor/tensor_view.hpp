// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::tensor_view: a non-owning pointer + length tagged with its memory space.
#pragma once

#include <gradcomp/tensor/memory_space.hpp>

#include <cstddef>
#include <span>

namespace gradcomp {

//! @brief A contiguous run of `size()` elements of type `T` at `data()` in memory space `Space`.
//!
//! This is the adapter for raw pointer + length, and the type the easy customization tier
//! (`as_tensor_view`, see tensor.hpp) returns. It does not own its elements; copying it copies
//! the pointer. Constant time for every member.
//! @tparam T      element type (`float` for gradients; `const float` for read-only views).
//! @tparam Space  gradcomp::host_space or gradcomp::cuda_device_space.
template <class T, class Space = host_space>
class tensor_view {
  static_assert(is_memory_space_v<Space>,
                "gradcomp::tensor_view: Space must be gradcomp::host_space or "
                "gradcomp::cuda_device_space");

public:
  //! The element type, const included (`const float` for a read-only view).
  using element_type = T;
  //! Where the elements live: gradcomp::host_space or gradcomp::cuda_device_space.
  using memory_space = Space;

  constexpr tensor_view() noexcept = default;
  //! @param data  first element (may be null only when `size == 0`).
  //! @param size  number of elements, not bytes.
  constexpr tensor_view(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  //! A host span converts implicitly into a host view.
  template <class U, std::size_t Extent>
  requires std::is_same_v<Space, host_space> && std::is_convertible_v<U (*)[], T (*)[]>
  constexpr tensor_view(std::span<U, Extent> s) noexcept : data_(s.data()), size_(s.size()) {}

  //! The first element (null for a default-constructed view); in device memory when Space is
  //! cuda_device_space, where host code must not dereference it.
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  //! Number of elements, not bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

//! @brief A view of host memory (what a raw `float*` + length means).
template <class T>
using host_view = tensor_view<T, host_space>;

//! @brief A view of CUDA device memory (a raw device pointer + length).
template <class T>
using device_view = tensor_view<T, cuda_device_space>;

} // namespace gradcomp
