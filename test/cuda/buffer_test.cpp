// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::buffer and caching_allocator (cuda/buffer.cuh) on host_backend: a buffer
// allocates only to grow, to max(n, 2 x capacity), and a move leaves the source empty; the
// allocator hands back its smallest free block that fits and allocates only when none does.
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/buffer.cuh>

#include <cstddef>
#include <utility>

#include "../common/catch.hpp"

namespace cuda_buffer_test {

using gradcomp::cuda::host_backend;

TEST_CASE("cuda buffer: grows only, to max(n, 2 x capacity); moves leave it empty",
          "[cuda][buffer]") {
  const auto allocations = [] { return host_backend::allocation_count(); };
  gradcomp::cuda::buffer<float, host_backend> b;
  CHECK(b.capacity() == 0);
  CHECK(b.data() == nullptr);
  const std::size_t start = allocations();
  float* p = b.reserve(10);
  CHECK(p == b.data());
  CHECK(b.capacity() == 10);
  CHECK(allocations() == start + 1);
  p[9] = 1.0f; // the storage is host memory of 10 floats
  CHECK(b.reserve(4) == p);
  CHECK(b.reserve(10) == p);
  CHECK(b.capacity() == 10);
  CHECK(allocations() == start + 1);
  b.reserve(11); // doubles: 20
  CHECK(b.capacity() == 20);
  b.reserve(50); // more than double: 50
  CHECK(b.capacity() == 50);
  CHECK(allocations() == start + 3);

  gradcomp::cuda::buffer<float, host_backend> moved(std::move(b));
  CHECK(moved.capacity() == 50);
  CHECK(b.capacity() == 0); // NOLINT(bugprone-use-after-move): tested
  CHECK(b.data() == nullptr);
  gradcomp::cuda::buffer<float, host_backend> assigned;
  assigned.reserve(3);
  assigned = std::move(moved);
  CHECK(assigned.capacity() == 50);
  CHECK(moved.capacity() == 0); // NOLINT(bugprone-use-after-move): tested
  CHECK(allocations() == start + 4);
}

TEST_CASE("cuda caching_allocator: the smallest free block that fits, else a new one",
          "[cuda][buffer]") {
  gradcomp::cuda::caching_allocator<host_backend> alloc;
  const std::size_t start = host_backend::allocation_count();
  char* large = alloc.allocate(300);
  char* small = alloc.allocate(100);
  CHECK(host_backend::allocation_count() == start + 2);
  alloc.deallocate(large, 300);
  alloc.deallocate(small, 100);
  // both free: 90 bytes take the 100-byte block, 150 the 300-byte one, nothing new allocated
  CHECK(alloc.allocate(90) == small);
  CHECK(alloc.allocate(150) == large);
  CHECK(host_backend::allocation_count() == start + 2);
  // both in use: a new block
  char* third = alloc.allocate(10);
  CHECK(third != small);
  CHECK(third != large);
  CHECK(host_backend::allocation_count() == start + 3);
}

} // namespace cuda_buffer_test
