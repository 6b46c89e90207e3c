// SPDX-License-Identifier: Apache-2.0
// gradcomp::tensor_view (tensor/tensor_view.hpp): a pointer and an element count tagged with a
// memory space; the default view is empty; a host span converts implicitly (const added, never
// removed), a device view never from a span; copies share the elements; constexpr throughout.
#include <gradcomp/tensor/tensor_view.hpp>

#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "../common/catch.hpp"

namespace tensor_tensor_view_test {

using namespace gradcomp;

namespace {

static_assert(std::is_same_v<host_view<float>, tensor_view<float, host_space>>);
static_assert(std::is_same_v<device_view<float>, tensor_view<float, cuda_device_space>>);
static_assert(std::is_same_v<tensor_view<float>, host_view<float>>); // host by default
static_assert(std::is_same_v<host_view<const float>::element_type, const float>);
static_assert(std::is_same_v<device_view<float>::memory_space, cuda_device_space>);
// spans convert into host views only, adding const but never removing it
static_assert(std::is_convertible_v<std::span<float>, host_view<float>>);
static_assert(std::is_convertible_v<std::span<float>, host_view<const float>>);
static_assert(std::is_convertible_v<std::span<float, 4>, host_view<float>>);
static_assert(!std::is_constructible_v<host_view<float>, std::span<const float>>);
static_assert(!std::is_constructible_v<device_view<float>, std::span<float>>);
static_assert(!std::is_constructible_v<host_view<float>, std::span<double>>);
static_assert(std::is_trivially_copyable_v<host_view<float>>);

// constexpr: a view of a constant array, read at compile time
constexpr std::array<float, 3> constants{1.0f, 2.0f, 3.0f};
constexpr host_view<const float> constant_view(constants.data(), constants.size());
static_assert(constant_view.size() == 3 && constant_view.data()[2] == 3.0f);
static_assert(host_view<float>{}.data() == nullptr && host_view<float>{}.size() == 0);

} // namespace

TEST_CASE("tensor_view: a pointer and a count, shared by copies", "[tensor][tensor_view]") {
  const host_view<float> empty;
  CHECK(empty.data() == nullptr);
  CHECK(empty.size() == 0);

  std::vector<float> storage{1.0f, 2.0f, 3.0f, 4.0f};
  const host_view<float> v(storage.data() + 1, 2); // elements 1 and 2
  CHECK(v.data() == storage.data() + 1);
  CHECK(v.size() == 2);
  const host_view<float> copy = v;
  copy.data()[0] = 20.0f; // writes through the copy reach the storage and the view
  CHECK(storage[1] == 20.0f);
  CHECK(v.data()[0] == 20.0f);

  // from spans: the same pointer and count
  const host_view<float> from_span = std::span<float>(storage);
  CHECK(from_span.data() == storage.data());
  CHECK(from_span.size() == 4);
  const host_view<const float> read_only = std::span<float>(storage).subspan(2);
  CHECK(read_only.data() == storage.data() + 2);
  CHECK(read_only.size() == 2);
  std::array<float, 5> fixed{};
  const host_view<float> from_fixed = std::span<float, 5>(fixed);
  CHECK(from_fixed.size() == 5);

  // a device view keeps the pointer and count without touching them
  float* const not_dereferenced = storage.data() + 3;
  const device_view<float> device(not_dereferenced, 1000);
  CHECK(device.data() == not_dereferenced);
  CHECK(device.size() == 1000);
}

} // namespace tensor_tensor_view_test
