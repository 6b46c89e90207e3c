// SPDX-License-Identifier: Apache-2.0
// The programs' sample order (apps/common/sample_order.hpp): golden values that
// scripts/ddp_train.py must reproduce too (test/scripts/test_ddp_train.py asserts the same), a
// permutation, and DistributedSampler's layout of the shards.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../../apps/common/sample_order.hpp"
#include "../common/catch.hpp"

namespace gx = gradcomp_apps;

TEST_CASE("sample order: splitmix64 matches the published reference sequence") {
  gx::splitmix64 rng(0); // Steele et al.'s reference generator from state 0
  CHECK(rng() == 0xe220a8397b1dcdafull);
  CHECK(rng() == 0x6e789e6aa1b965f4ull);
  CHECK(rng() == 0x06c45d188009454full);
}

TEST_CASE("sample order: below() is uniform on a small bound and within range") {
  gx::splitmix64 rng(42);
  std::vector<int> counts(7, 0);
  constexpr int draws = 70000;
  for (int i = 0; i < draws; ++i) {
    const std::uint64_t v = rng.below(7);
    REQUIRE(v < 7);
    ++counts[v];
  }
  for (const int c : counts) { // expected 10000 each, sd ~93: 6 sd
    CHECK(std::abs(c - draws / 7) < 560);
  }
  CHECK(rng.below(1) == 0);
}

TEST_CASE("sample order: golden values shared with scripts/ddp_train.py") {
  const std::vector<std::int64_t> e0 = gx::epoch_order(60000, 1, 0);
  CHECK(std::vector<std::int64_t>(e0.begin(), e0.begin() + 8) ==
        std::vector<std::int64_t>{56858, 2289, 14309, 49649, 57449, 40485, 56020, 951});
  const std::vector<std::int64_t> e2 = gx::epoch_order(60000, 1, 2);
  CHECK(std::vector<std::int64_t>(e2.begin(), e2.begin() + 8) ==
        std::vector<std::int64_t>{9975, 15793, 37417, 28440, 5216, 59255, 46925, 42996});
  const std::vector<std::int64_t> s = gx::shard(1001, 4, 3, 7, 1);
  REQUIRE(s.size() == 251);
  CHECK(std::vector<std::int64_t>(s.begin(), s.begin() + 6) ==
        std::vector<std::int64_t>{23, 208, 412, 772, 65, 787});
  CHECK(s.back() == 745);
}

TEST_CASE("sample order: every epoch is a permutation, epochs differ") {
  for (const std::int64_t n : {0, 1, 2, 3, 1000}) {
    std::vector<std::int64_t> o = gx::epoch_order(n, 3, 1);
    std::sort(o.begin(), o.end());
    std::vector<std::int64_t> expected(static_cast<std::size_t>(n));
    std::iota(expected.begin(), expected.end(), std::int64_t{0});
    CHECK(o == expected);
  }
  CHECK(gx::epoch_order(1000, 3, 1) != gx::epoch_order(1000, 3, 2));
}

TEST_CASE("sample order: shards follow DistributedSampler (positions r, r + P, ... wrapped)") {
  for (const int ranks : {1, 3, 4}) {
    const std::int64_t n = 10;
    const std::vector<std::int64_t> order = gx::epoch_order(n, 5, 0);
    std::vector<std::int64_t> all; // the shards interleaved = the padded permutation
    std::vector<std::vector<std::int64_t>> shards;
    for (int r = 0; r < ranks; ++r) {
      shards.push_back(gx::shard(n, ranks, r, 5, 0));
    }
    const std::size_t per_rank = shards[0].size();
    CHECK(per_rank == static_cast<std::size_t>((n + ranks - 1) / ranks));
    for (std::size_t j = 0; j < per_rank; ++j) {
      for (int r = 0; r < ranks; ++r) {
        all.push_back(shards[static_cast<std::size_t>(r)][j]);
      }
    }
    for (std::size_t p = 0; p < all.size(); ++p) {
      CHECK(all[p] == order[p % static_cast<std::size_t>(n)]);
    }
  }
}
