// SPDX-License-Identifier: Apache-2.0
// Memory-space tags (tensor/memory_space.hpp): the two tags gradcomp knows, distinct, and
// is_memory_space_v true for exactly them; a tag chosen at compile time decides what code runs.
#include <gradcomp/tensor/memory_space.hpp>

#include <string_view>
#include <type_traits>

#include "../common/catch.hpp"

namespace tensor_memory_space_test {

using namespace gradcomp;

namespace {

struct user_space {};

static_assert(is_memory_space_v<host_space>);
static_assert(is_memory_space_v<cuda_device_space>);
static_assert(!is_memory_space_v<user_space>);
static_assert(!is_memory_space_v<int>);
static_assert(!is_memory_space_v<const host_space>); // the exact tag, not a cv-qualified one
static_assert(!is_memory_space_v<host_space*>);
static_assert(!std::is_same_v<host_space, cuda_device_space>);
static_assert(std::is_empty_v<host_space> && std::is_empty_v<cuda_device_space>);

template <class Space>
constexpr std::string_view where() {
  if constexpr (std::is_same_v<Space, host_space>) {
    return "host";
  } else if constexpr (std::is_same_v<Space, cuda_device_space>) {
    return "device";
  } else {
    return "unknown";
  }
}

} // namespace

TEST_CASE("memory_space: the tags select what runs", "[tensor][memory_space]") {
  CHECK(where<host_space>() == "host");
  CHECK(where<cuda_device_space>() == "device");
  CHECK(where<user_space>() == "unknown");
  CHECK(is_memory_space_v<host_space> == true);
  CHECK(is_memory_space_v<user_space> == false);
}

} // namespace tensor_memory_space_test
