// SPDX-License-Identifier: Apache-2.0
// A type that provides both as_tensor_view() and a tensor_traits specialization is rejected.
#include <gradcomp/gradcomp.hpp>

namespace user {
struct buffer {
  float* p;
  std::size_t n;
};
inline gradcomp::host_view<float> as_tensor_view(const buffer& b) {
  return {b.p, b.n};
}
} // namespace user

#ifdef GRADCOMP_EXPECT_COMPILE_ERROR
template <>
struct gradcomp::tensor_traits<user::buffer> {
  using value_type = float;
  using memory_space = gradcomp::host_space;
  static float* data(const user::buffer& b) { return b.p; }
  static std::size_t size(const user::buffer& b) { return b.n; }
};
#endif

std::size_t use(const user::buffer& b) {
  return gradcomp::tensor_size(b);
}
