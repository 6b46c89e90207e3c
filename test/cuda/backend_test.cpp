// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::host_backend (cuda/backend.cuh): counted allocations, copies and zeroing; the
// tile filter's counts and scatter against |x| >= t per 4096-element tile; the position sort
// against a stable sort by key.
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/detail/filter_tiles.cuh>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace cuda_backend_test {

using gradcomp::cuda::host_backend;

TEST_CASE("host_backend: allocations are counted; copies and zeroing in host memory",
          "[cuda][backend]") {
  const std::size_t before = host_backend::allocation_count();
  void* a = host_backend::allocate(16);
  void* empty = host_backend::allocate(0); // at least one byte, not null
  CHECK(a != nullptr);
  CHECK(empty != nullptr);
  CHECK(host_backend::allocation_count() == before + 2);
  const host_backend b{};
  const std::vector<float> src{1.5f, -2.0f, 3.25f, 4.0f};
  b.copy_from_host(a, src.data(), 16);
  std::vector<float> back(4, 0.0f);
  b.copy_to_host(back.data(), a, 16);
  CHECK(back == src);
  b.fill_zero(a, 8);
  b.copy_to_host(back.data(), a, 16);
  CHECK(back == std::vector<float>{0.0f, 0.0f, 3.25f, 4.0f});
  host_backend::deallocate(a);
  host_backend::deallocate(empty);
  host_backend::deallocate(nullptr);                     // a no-op
  CHECK(host_backend::allocation_count() == before + 2); // frees are not counted
}

TEST_CASE("host_backend: filter counts and scatters |x| >= t tile by tile", "[cuda][backend]") {
  namespace cd = gradcomp::cuda::detail;
  const std::size_t n = 2 * cd::filter_tile_elements + 1000; // three tiles, the last partial
  const std::vector<float> x =
      gradcomp::test::make_values(gradcomp::test::distribution::normal, n, 21);
  const float t = 1.5f;
  const std::uint32_t key = gradcomp::detail::key_at_least(t);
  const host_backend b{};
  REQUIRE(cd::filter_tiles(n) == 3);
  std::vector<std::uint64_t> counts(3);
  b.filter_count(x.data(), n, key, counts.data());
  std::vector<std::uint32_t> expected; // every i with |x[i]| >= t, ascending
  for (std::size_t tile = 0; tile < 3; ++tile) {
    const std::size_t end = std::min(n, (tile + 1) * cd::filter_tile_elements);
    std::uint64_t c = 0;
    for (std::size_t i = tile * cd::filter_tile_elements; i < end; ++i) {
      if (std::fabs(x[i]) >= t) {
        expected.push_back(static_cast<std::uint32_t>(i));
        ++c;
      }
    }
    CHECK(counts[tile] == c);
  }
  // the exclusive scan of the counts places each tile's pairs
  std::vector<std::uint64_t> offsets{0, counts[0], counts[0] + counts[1]};
  const std::size_t total = expected.size();
  std::vector<std::uint32_t> indices(total + 1);
  std::vector<float> values(total + 1);
  b.filter_scatter(x.data(), n, key, offsets.data(), total, indices.data(), values.data());
  indices.pop_back();
  values.pop_back();
  CHECK(indices == expected);
  for (std::size_t j = 0; j < total; ++j) {
    REQUIRE(values[j] == x[indices[j]]);
  }
  // a cap below the count: the pairs past it all land in slot cap, the first cap are in place
  const std::size_t cap = total / 2;
  std::vector<std::uint32_t> capped(cap + 1);
  std::vector<float> capped_values(cap + 1);
  b.filter_scatter(x.data(), n, key, offsets.data(), cap, capped.data(), capped_values.data());
  CHECK(std::equal(capped.begin(), capped.begin() + static_cast<std::ptrdiff_t>(cap),
                   expected.begin()));
  CHECK(capped[cap] == expected.back()); // the last write to the overflow slot
}

TEST_CASE("host_backend: positions sorted by key, ties by position", "[cuda][backend]") {
  std::vector<std::uint64_t> keys{5, 1, 5, 0, 1, 9, 5};
  std::vector<std::uint32_t> positions(keys.size());
  std::iota(positions.begin(), positions.end(), 0u);
  std::vector<std::uint32_t> expected = positions;
  std::stable_sort(expected.begin(), expected.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  REQUIRE(expected == std::vector<std::uint32_t>{3, 1, 4, 0, 2, 6, 5});
  const host_backend b{};
  int unused_allocator = 0;
  b.sort_positions_by_key(unused_allocator, keys.data(), positions.data(), positions.size());
  CHECK(positions == expected);
  std::vector<std::uint32_t> values{7, 3, 9, 3, 0};
  b.sort_ascending(unused_allocator, values.data(), values.size());
  CHECK(values == std::vector<std::uint32_t>{0, 3, 3, 7, 9});
}

} // namespace cuda_backend_test
