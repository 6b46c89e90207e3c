// SPDX-License-Identifier: Apache-2.0
// The tensor concept: the built-in adapters, both customization tiers, and memory spaces.
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <array>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace user {
// easy tier: an ADL as_tensor_view
struct grad_buffer {
  std::vector<float> storage;
};
inline gradcomp::host_view<const float> as_tensor_view(const grad_buffer& b) {
  return {b.storage.data(), b.storage.size()};
}
inline gradcomp::host_view<float> as_tensor_view(grad_buffer& b) {
  return {b.storage.data(), b.storage.size()};
}
// full tier: a traits specialization
struct device_buffer {
  float* device_pointer;
  std::size_t n;
};
struct host_matrix {
  float* p;
  std::size_t rows, cols;
};
} // namespace user

template <>
struct gradcomp::tensor_traits<user::device_buffer> {
  using value_type = float;
  using memory_space = gradcomp::cuda_device_space;
  static float* data(const user::device_buffer& b) { return b.device_pointer; }
  static std::size_t size(const user::device_buffer& b) { return b.n; }
};
template <>
struct gradcomp::tensor_traits<user::host_matrix> {
  using value_type = float;
  using memory_space = gradcomp::host_space;
  static float* data(const user::host_matrix& m) { return m.p; }
  static std::size_t size(const user::host_matrix& m) { return m.rows * m.cols; }
};

namespace tensor_tensor_test {

using namespace gradcomp;

// positive and negative concept checks, including const and reference cases
static_assert(host_float_tensor<std::vector<float>>);
static_assert(host_float_tensor<const std::vector<float>>);
static_assert(host_float_tensor<std::span<float>>);
static_assert(host_float_tensor<std::span<const float>>);
static_assert(host_float_tensor<std::array<float, 4>>);
static_assert(host_float_tensor<host_view<float>>);
static_assert(host_float_tensor<user::grad_buffer>);
static_assert(host_float_tensor<user::host_matrix>);
static_assert(tensor<user::device_buffer>);
static_assert(!host_tensor<user::device_buffer>);
static_assert(!host_tensor<device_view<float>>);
static_assert(std::same_as<tensor_memory_space_t<device_view<float>>, cuda_device_space>);
static_assert(tensor<std::vector<double>> && !host_float_tensor<std::vector<double>>);
static_assert(!tensor<int>);
static_assert(!tensor<float*>);
static_assert(!tensor<std::vector<float>*>);

TEST_CASE("tensor_data and tensor_size read every adapter", "[tensor]") {
  std::vector<float> v{1, 2, 3};
  CHECK(tensor_data(v) == v.data());
  CHECK(tensor_size(v) == 3);
  const std::vector<float>& cv = v;
  CHECK(tensor_data(cv) == v.data());
  std::span<float> s(v);
  CHECK(host_span(s).data() == v.data());
  user::grad_buffer b{{4, 5}};
  CHECK(tensor_size(b) == 2);
  CHECK(host_span(b)[1] == 5.0f);
  host_span(b)[0] = 7.0f; // write access through the non-const overload
  CHECK(b.storage[0] == 7.0f);
  float raw[6] = {};
  user::host_matrix m{raw, 2, 3};
  CHECK(tensor_size(m) == 6);
  host_view<float> view(raw, 6);
  CHECK(host_span(view).size() == 6);
}

TEST_CASE("a compressor accepts every host adapter and gives the same result", "[tensor]") {
  std::vector<float> v{0.5f, -3.0f, 2.0f, 0.1f, -0.2f, 4.0f};
  exact_top_k c(0.5);
  sparse_message a, b, d, e;
  c.compress(v, a);
  c.compress(std::span<const float>(v), b);
  c.compress(user::grad_buffer{v}, d);
  c.compress(host_view<const float>(v.data(), v.size()), e);
  CHECK(a.indices == std::vector<std::uint32_t>{1, 2, 5});
  CHECK(b.indices == a.indices);
  CHECK(d.indices == a.indices);
  CHECK(e.indices == a.indices);
}

} // namespace tensor_tensor_test
