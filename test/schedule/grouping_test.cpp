// SPDX-License-Identifier: Apache-2.0
// Groupings (schedule/grouping.hpp): is_valid_grouping against every partition of L layers
// enumerated here by bit masks (2^(L-1) of them) and against groupings that break one rule each;
// grouping_from_ends, per_layer, single and forward_index on hand-worked cases.
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_grouping_test {

using namespace gradcomp::schedule;

namespace {

// The grouping whose groups end after backward position k for every bit k of `mask`, then at L.
grouping grouping_of_mask(std::uint64_t mask, std::size_t layers) {
  grouping g;
  std::size_t begin = 0;
  for (std::size_t k = 0; k + 1 < layers; ++k) {
    if ((mask >> k) & 1U) {
      g.push_back({begin, k + 1});
      begin = k + 1;
    }
  }
  g.push_back({begin, layers});
  return g;
}

} // namespace

TEST_CASE("grouping: every partition into consecutive groups is valid, 2^(L-1) of them",
          "[schedule][grouping]") {
  for (std::size_t layers = 1; layers <= 10; ++layers) {
    CAPTURE(layers);
    std::size_t valid = 0;
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (layers - 1)); ++mask) {
      const grouping g = grouping_of_mask(mask, layers);
      CHECK(is_valid_grouping(g, layers));
      CHECK_NOTHROW(validate(g, layers));
      // the same partition from its group ends
      std::vector<std::size_t> ends;
      std::size_t covered = 0;
      for (const layer_group& group : g) {
        ends.push_back(group.end);
        covered += group.size();
      }
      CHECK(covered == layers);
      CHECK(grouping_from_ends(ends, layers) == g);
      // and of no other layer count
      CHECK_FALSE(is_valid_grouping(g, layers + 1));
      if (layers > 1) {
        CHECK_FALSE(is_valid_grouping(g, layers - 1));
      }
      valid += 1;
    }
    CHECK(valid == (std::size_t{1} << (layers - 1)));
  }
}

TEST_CASE("grouping: a gap, an overlap, an empty group, a wrong start or end is invalid",
          "[schedule][grouping]") {
  CHECK(is_valid_grouping(grouping{{0, 2}, {2, 5}}, 5));
  CHECK_FALSE(is_valid_grouping(grouping{}, 5));                       // no group
  CHECK_FALSE(is_valid_grouping(grouping{{0, 2}, {3, 5}}, 5));         // gap at 2
  CHECK_FALSE(is_valid_grouping(grouping{{0, 3}, {2, 5}}, 5));         // overlap at 2
  CHECK_FALSE(is_valid_grouping(grouping{{0, 2}, {2, 2}, {2, 5}}, 5)); // empty group
  CHECK_FALSE(is_valid_grouping(grouping{{1, 5}}, 5));                 // does not start at 0
  CHECK_FALSE(is_valid_grouping(grouping{{0, 4}}, 5));                 // ends before L
  CHECK_FALSE(is_valid_grouping(grouping{{0, 6}}, 5));                 // ends after L
  CHECK_FALSE(is_valid_grouping(grouping{{0, 3}, {3, 1}}, 5));         // a group backwards
  CHECK_FALSE(is_valid_grouping(grouping{{0, 0}}, 0));                 // no layers
  CHECK_THROWS_WITH(validate(grouping{{0, 2}, {3, 5}}, 5),
                    Catch::Contains("grouping of 2 groups is not a partition of 5 layers"));
  CHECK_THROWS_AS(grouping_from_ends({2, 4}, 5), std::invalid_argument); // last end is not L
  CHECK_THROWS_AS(grouping_from_ends({3, 2, 5}, 5), std::invalid_argument);
  CHECK_THROWS_AS(grouping_from_ends({}, 5), std::invalid_argument);
}

TEST_CASE("grouping: per_layer, single, grouping_from_ends and forward_index by hand",
          "[schedule][grouping]") {
  CHECK(per_layer(3) == grouping{{0, 1}, {1, 2}, {2, 3}});
  CHECK(per_layer(1) == grouping{{0, 1}});
  CHECK(single(4) == grouping{{0, 4}});
  CHECK(grouping_from_ends({1, 3, 6}, 6) == grouping{{0, 1}, {1, 3}, {3, 6}});
  CHECK(layer_group{2, 7}.size() == 5);
  CHECK(layer_group{2, 7} == layer_group{2, 7});
  CHECK_FALSE(layer_group{2, 7} == layer_group{2, 6});
  CHECK_THROWS_WITH(per_layer(0), Catch::Contains("per_layer: no layers"));
  CHECK_THROWS_WITH(single(0), Catch::Contains("single: no layers"));
  // backward position 0 is the last layer (S1's layer L); position L-1 the first
  CHECK(forward_index(0, 5) == 4);
  CHECK(forward_index(4, 5) == 0);
  CHECK(forward_index(1, 5) == 3);
  static_assert(forward_index(0, 1) == 0);
}

} // namespace schedule_grouping_test
