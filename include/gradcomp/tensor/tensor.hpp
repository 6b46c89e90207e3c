// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The tensor concept: how gradcomp reads any contiguous tensor type.
//!
//! Two ways to make a type `T` usable (two tiers, as in {fmt}'s format_as / formatter):
//!
//! * **Easy tier.** Provide a free function `as_tensor_view(const T&)` (and optionally
//!   `as_tensor_view(T&)` for write access), found by argument-dependent lookup, that returns a
//!   gradcomp::tensor_view of the elements:
//!   @code
//!   namespace mylib {
//!   struct grad_buffer { float* ptr; std::size_t n; };
//!   inline gradcomp::host_view<float> as_tensor_view(const grad_buffer& b) { return {b.ptr, b.n};
//!   }
//!   }
//!   @endcode
//! * **Full tier.** Specialize gradcomp::tensor_traits<T> with `value_type`, `memory_space`,
//!   `static auto* data(T&)` / `data(const T&)` and `static std::size_t size(const T&)`.
//!
//! A type that provides both is rejected with a compile-time error. std::vector, std::span,
//! std::array and gradcomp::tensor_view adapt out of the box (host memory).
#pragma once

#include <gradcomp/tensor/memory_space.hpp>
#include <gradcomp/tensor/tensor_view.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

namespace gradcomp {

//! @brief Full customization tier. The primary template is empty: a type is not a tensor until
//! it is specialized (or provides `as_tensor_view`). A specialization for T provides
//! `value_type` (the element type, without const), `memory_space` (host_space or a device
//! space), `static value_type* data(T&)` (and a const overload where T can be const) pointing
//! at `size(t)` contiguous elements, and `static std::size_t size(const T&)`; all O(1) and
//! noexcept. The specializations below are the library's own, for the standard containers and
//! tensor_view.
template <class T>
struct tensor_traits {};

//! @brief std::vector<V>: contiguous host memory.
template <class V, class Alloc>
struct tensor_traits<std::vector<V, Alloc>> {
  using value_type = V;            //!< the element type.
  using memory_space = host_space; //!< host memory.
  //! The first element (t.data()). O(1).
  static V* data(std::vector<V, Alloc>& t) noexcept { return t.data(); }
  //! The first element of a const vector. O(1).
  static const V* data(const std::vector<V, Alloc>& t) noexcept { return t.data(); }
  //! Elements (t.size()). O(1).
  static std::size_t size(const std::vector<V, Alloc>& t) noexcept { return t.size(); }
};

//! @brief std::span<V>: a view of contiguous host memory (V may be const: read-only).
template <class V, std::size_t Extent>
struct tensor_traits<std::span<V, Extent>> {
  using value_type = std::remove_const_t<V>; //!< the element type without const.
  using memory_space = host_space;           //!< host memory.
  //! The first element (t.data()). O(1).
  static V* data(const std::span<V, Extent>& t) noexcept { return t.data(); }
  //! Elements (t.size()). O(1).
  static std::size_t size(const std::span<V, Extent>& t) noexcept { return t.size(); }
};

//! @brief std::array<V, N>: N contiguous host elements.
template <class V, std::size_t N>
struct tensor_traits<std::array<V, N>> {
  using value_type = V;            //!< the element type.
  using memory_space = host_space; //!< host memory.
  //! The first element (t.data()). O(1).
  static V* data(std::array<V, N>& t) noexcept { return t.data(); }
  //! The first element of a const array. O(1).
  static const V* data(const std::array<V, N>& t) noexcept { return t.data(); }
  //! N. O(1).
  static std::size_t size(const std::array<V, N>&) noexcept { return N; }
};

//! @brief gradcomp::tensor_view: the view's own memory space (host or a device).
template <class V, class Space>
struct tensor_traits<tensor_view<V, Space>> {
  using value_type = std::remove_const_t<V>; //!< the element type without const.
  using memory_space = Space;                //!< the view's memory space.
  //! The first element (t.data()). O(1).
  static V* data(const tensor_view<V, Space>& t) noexcept { return t.data(); }
  //! Elements (t.size()). O(1).
  static std::size_t size(const tensor_view<V, Space>& t) noexcept { return t.size(); }
};

namespace detail {

template <class T>
concept has_tensor_traits = requires(T& t) {
  typename tensor_traits<std::remove_cvref_t<T>>::value_type;
  typename tensor_traits<std::remove_cvref_t<T>>::memory_space;
  {tensor_traits<std::remove_cvref_t<T>>::data(t)};
  { tensor_traits<std::remove_cvref_t<T>>::size(t) } -> std::convertible_to<std::size_t>;
};

template <class View>
struct is_tensor_view : std::false_type {};
template <class V, class S>
struct is_tensor_view<tensor_view<V, S>> : std::true_type {};

// Finds the user's as_tensor_view by ADL only (no gradcomp overload competes).
template <class T>
concept has_as_tensor_view = requires(T& t) {
  {as_tensor_view(t)};
  requires is_tensor_view<std::remove_cvref_t<decltype(as_tensor_view(t))>>::value;
};

// Which customization tier T uses: exactly one (each named, so that the specializations below
// constrain with one concept: clang-format 14 mangles a requires-clause with && and !).
template <class T>
concept traits_tier_only = has_tensor_traits<T> && !has_as_tensor_view<T>;
template <class T>
concept view_tier_only = has_as_tensor_view<T> && !has_tensor_traits<T>;
template <class T>
concept both_tiers = has_as_tensor_view<T> && has_tensor_traits<T>;

template <class T>
struct tensor_access;

template <traits_tier_only T>
struct tensor_access<T> {
  using traits = tensor_traits<std::remove_cvref_t<T>>;
  using value_type = typename traits::value_type;
  using memory_space = typename traits::memory_space;
  static auto* data(T& t) noexcept { return traits::data(t); }
  static std::size_t size(T& t) noexcept { return static_cast<std::size_t>(traits::size(t)); }
};

template <view_tier_only T>
struct tensor_access<T> {
  using view = std::remove_cvref_t<decltype(as_tensor_view(std::declval<T&>()))>;
  using value_type = std::remove_const_t<typename view::element_type>;
  using memory_space = typename view::memory_space;
  static auto* data(T& t) { return as_tensor_view(t).data(); }
  static std::size_t size(T& t) { return as_tensor_view(t).size(); }
};

template <both_tiers T>
struct tensor_access<T> {
  static_assert(!has_as_tensor_view<T>,
                "gradcomp: this type provides both as_tensor_view() and a tensor_traits "
                "specialization; provide exactly one of them");
};

} // namespace detail

//! @brief A contiguous tensor gradcomp can read: std::vector, std::span, std::array,
//! gradcomp::tensor_view, or any type adapted by one of the two customization tiers.
template <class T>
concept tensor = requires(T& t) {
  typename detail::tensor_access<T>::value_type;
  typename detail::tensor_access<T>::memory_space;
  {detail::tensor_access<T>::data(t)};
  { detail::tensor_access<T>::size(t) } -> std::same_as<std::size_t>;
};

//! @brief The element type of tensor `T` (without const).
template <tensor T>
using tensor_value_t = typename detail::tensor_access<T>::value_type;

//! @brief The memory space of tensor `T` (gradcomp::host_space or gradcomp::cuda_device_space).
template <tensor T>
using tensor_memory_space_t = typename detail::tensor_access<T>::memory_space;

//! @brief A tensor whose elements live in host memory.
template <class T>
concept host_tensor = tensor<T> && std::same_as<tensor_memory_space_t<T>, host_space>;

//! @brief A host tensor of `float` (the gradients every host compressor takes).
template <class T>
concept host_float_tensor = host_tensor<T> && std::same_as < tensor_value_t<T>,
float > ;

//! @brief Pointer to the first element of `t` (const-qualified when `t` is). O(1).
template <tensor T>
[[nodiscard]] auto* tensor_data(T& t) {
  return detail::tensor_access<T>::data(t);
}

//! @brief Number of elements of `t` (not bytes). O(1).
template <tensor T>
[[nodiscard]] std::size_t tensor_size(T& t) {
  return detail::tensor_access<T>::size(t);
}

//! @brief The elements of host tensor `t` as a std::span (read-write if `t` allows it). O(1).
template <host_tensor T>
[[nodiscard]] auto host_span(T& t) {
  auto* p = tensor_data(t);
  return std::span<std::remove_reference_t<decltype(*p)>>(p, tensor_size(t));
}

} // namespace gradcomp
