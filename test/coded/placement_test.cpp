// SPDX-License-Identifier: Apache-2.0
// gradcomp::coded's placement (coded/placement.hpp, CSSGD / S3) against subsets enumerated here
// by bit masks: every r-subset owns one part, each multicast group member lacks exactly one part
// the others own, the sample ranges and gradient slices partition their ranges, the
// reduce-scatter form's blocks reach exactly the ranks that lack them; bad parameters.
#include <gradcomp/coded/placement.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace coded_placement_test {

using namespace gradcomp::coded;

namespace {

// ---- an independent enumeration: subsets as bit masks ----------------------------------------

std::uint64_t binomial_by_pascal(int n, int k) {
  if (k < 0 || k > n) {
    return 0;
  }
  std::vector<std::vector<std::uint64_t>> c(static_cast<std::size_t>(n) + 1);
  for (int i = 0; i <= n; ++i) {
    c[static_cast<std::size_t>(i)].assign(static_cast<std::size_t>(i) + 1, 1);
    for (int j = 1; j < i; ++j) {
      c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
          c[static_cast<std::size_t>(i) - 1][static_cast<std::size_t>(j) - 1] +
          c[static_cast<std::size_t>(i) - 1][static_cast<std::size_t>(j)];
    }
  }
  return c[static_cast<std::size_t>(n)][static_cast<std::size_t>(k)];
}

std::vector<int> members_of(unsigned mask) {
  std::vector<int> m;
  for (int i = 0; i < 32; ++i) {
    if ((mask >> i) & 1U) {
      m.push_back(i);
    }
  }
  return m;
}

// every k-subset of n ranks, each as an ascending member list, in lexicographic order
std::vector<std::vector<int>> subsets_by_mask(int n, int k) {
  std::vector<std::vector<int>> all;
  for (unsigned mask = 0; mask < (1U << n); ++mask) {
    if (std::popcount(mask) == k) {
      all.push_back(members_of(mask));
    }
  }
  std::sort(all.begin(), all.end());
  return all;
}

unsigned mask_of(std::span<const int> ranks) {
  unsigned mask = 0;
  for (const int r : ranks) {
    mask |= 1U << r;
  }
  return mask;
}

std::vector<int> as_vector(std::span<const int> s) {
  return {s.begin(), s.end()};
}

} // namespace

// ---- placement ---------------------------------------------------------------------------------

TEST_CASE("coded placement: every r-subset owns one part, in lexicographic order",
          "[coded][placement]") {
  for (int n = 2; n <= 7; ++n) {
    for (int r = 1; r < n; ++r) {
      CAPTURE(n, r);
      const placement p(n, r);
      CHECK(p.ranks() == n);
      CHECK(p.redundancy() == r);
      REQUIRE(p.part_count() == binomial_by_pascal(n, r));
      REQUIRE(p.group_count() == binomial_by_pascal(n, r + 1));
      CHECK(p.parts_per_rank() == binomial_by_pascal(n - 1, r - 1));
      CHECK(p.groups_per_rank() == binomial_by_pascal(n - 1, r));

      const auto parts = subsets_by_mask(n, r);
      for (std::size_t t = 0; t < p.part_count(); ++t) {
        CHECK(as_vector(p.owners(t)) == parts[t]);
        CHECK(p.part_index(p.owners(t)) == t);
      }
      const auto groups = subsets_by_mask(n, r + 1);
      for (std::size_t g = 0; g < p.group_count(); ++g) {
        CHECK(as_vector(p.members(g)) == groups[g]);
        CHECK(p.group_index(p.members(g)) == g);
      }

      // C(n-1, r-1) parts per rank, every part owned by exactly r ranks
      std::vector<int> owner_count(p.part_count(), 0);
      for (int rank = 0; rank < n; ++rank) {
        const auto mine = p.parts_of(rank);
        REQUIRE(mine.size() == binomial_by_pascal(n - 1, r - 1));
        CHECK(std::is_sorted(mine.begin(), mine.end()));
        for (const std::size_t t : mine) {
          CHECK(p.owns(rank, t));
          CHECK(((mask_of(p.owners(t)) >> rank) & 1U) == 1U);
          ++owner_count[t];
        }
        // owns() agrees with parts_of() for every part
        std::size_t owned = 0;
        for (std::size_t t = 0; t < p.part_count(); ++t) {
          owned += p.owns(rank, t) ? 1 : 0;
        }
        CHECK(owned == mine.size());
        const auto my_groups = p.groups_of(rank);
        REQUIRE(my_groups.size() == binomial_by_pascal(n - 1, r));
        for (const std::size_t g : my_groups) {
          CHECK(((mask_of(p.members(g)) >> rank) & 1U) == 1U);
        }
      }
      CHECK(std::all_of(owner_count.begin(), owner_count.end(), [&](int c) { return c == r; }));
      CHECK(r * p.part_count() == n * p.parts_per_rank());
    }
  }
}

TEST_CASE("coded placement: each group member lacks exactly one part the others own",
          "[coded][placement]") {
  for (int n = 2; n <= 7; ++n) {
    for (int r = 1; r < n; ++r) {
      CAPTURE(n, r);
      const placement p(n, r);
      // per rank, the parts it recovers over all its groups
      std::vector<std::multiset<std::size_t>> recovered(static_cast<std::size_t>(n));
      for (std::size_t g = 0; g < p.group_count(); ++g) {
        const auto s = as_vector(p.members(g));
        const unsigned group_mask = mask_of(s);
        for (const int j : s) {
          // parts inside the group that j lacks: exactly one, owned by all the others
          std::vector<std::size_t> lacking;
          for (std::size_t t = 0; t < p.part_count(); ++t) {
            const unsigned owners = mask_of(p.owners(t));
            if ((owners & ~group_mask) == 0 && ((owners >> j) & 1U) == 0) {
              lacking.push_back(t);
            }
          }
          REQUIRE(lacking.size() == 1);
          CHECK(p.missing_part(g, j) == lacking[0]);
          CHECK(mask_of(p.owners(lacking[0])) == (group_mask & ~(1U << j)));
          recovered[static_cast<std::size_t>(j)].insert(lacking[0]);

          // j's packet: one term per other member, coding a part j owns, j's slice position
          const auto terms = p.coding_terms(g, j);
          REQUIRE(terms.size() == static_cast<std::size_t>(r));
          std::vector<int> receivers;
          for (const coding_term& term : terms) {
            receivers.push_back(term.receiver);
            CHECK(term.part == p.missing_part(g, term.receiver));
            CHECK(p.owns(j, term.part));
            REQUIRE(term.slice >= 0);
            REQUIRE(term.slice < r);
            CHECK(p.owners(term.part)[static_cast<std::size_t>(term.slice)] == j);
            // every other receiver of the packet can cancel this term
            for (const int other : s) {
              if (other != term.receiver) {
                CHECK(p.owns(other, term.part));
              }
            }
          }
          std::vector<int> others;
          std::copy_if(s.begin(), s.end(), std::back_inserter(others),
                       [&](int m) { return m != j; });
          CHECK(receivers == others);
        }
        // the r senders of a receiver deliver the r slices of its missing part once each
        for (const int j : s) {
          std::vector<int> slices;
          for (const int k : s) {
            if (k == j) {
              continue;
            }
            for (const coding_term& term : p.coding_terms(g, k)) {
              if (term.receiver == j) {
                slices.push_back(term.slice);
              }
            }
          }
          std::sort(slices.begin(), slices.end());
          std::vector<int> all(static_cast<std::size_t>(r));
          std::iota(all.begin(), all.end(), 0);
          CHECK(slices == all);
        }
      }
      // over all groups, each rank recovers every part it lacks, once
      for (int rank = 0; rank < n; ++rank) {
        std::multiset<std::size_t> lacked;
        for (std::size_t t = 0; t < p.part_count(); ++t) {
          if (!p.owns(rank, t)) {
            lacked.insert(t);
          }
        }
        CHECK(recovered[static_cast<std::size_t>(rank)] == lacked);
        CHECK(lacked.size() == p.groups_per_rank());
      }
    }
  }
}

TEST_CASE("coded placement: sample ranges partition the batch, sizes within 1",
          "[coded][placement]") {
  for (const std::size_t samples : {0UL, 1UL, 5UL, 13UL, 100UL, 1001UL, 65537UL}) {
    for (int n = 2; n <= 7; ++n) {
      for (int r = 1; r < n; ++r) {
        CAPTURE(samples, n, r);
        const placement p(n, r);
        std::size_t next = 0;
        std::size_t smallest = std::numeric_limits<std::size_t>::max();
        std::size_t largest = 0;
        for (std::size_t t = 0; t < p.part_count(); ++t) {
          const index_range range = p.part_samples(t, samples);
          CHECK(range.begin == next);
          CHECK(range.end >= range.begin);
          next = range.end;
          smallest = std::min(smallest, range.size());
          largest = std::max(largest, range.size());
        }
        CHECK(next == samples);
        CHECK(largest - smallest <= 1);
        std::size_t processed = 0;
        for (int rank = 0; rank < n; ++rank) {
          const auto ranges = p.rank_samples(rank, samples);
          REQUIRE(ranges.size() == p.parts_per_rank());
          for (std::size_t i = 0; i < ranges.size(); ++i) {
            CHECK(ranges[i] == p.part_samples(p.parts_of(rank)[i], samples));
            processed += ranges[i].size();
          }
        }
        CHECK(processed == static_cast<std::size_t>(r) * samples); // every sample r times
      }
    }
  }
  // slices of a gradient: the longer ones first, a packet holds the longest
  const placement p(5, 3);
  CHECK(p.slice_elements(10, 0) == index_range{0, 4});
  CHECK(p.slice_elements(10, 1) == index_range{4, 7});
  CHECK(p.slice_elements(10, 2) == index_range{7, 10});
  CHECK(p.packet_elements(10) == 4);
  CHECK(p.packet_elements(9) == 3);
  CHECK(p.packet_elements(0) == 0);
  CHECK(split_evenly(2, 3, 2) == index_range{2, 2});
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  CHECK(split_evenly(huge, 7, 6).end == huge);
}

// ---- the reduce-scatter form (variant R, docs/coded.md, "Variants F and R") --------------------

TEST_CASE("coded reduce-scatter form: every rank receives exactly its block of each missing part",
          "[coded][placement]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      const placement p(n, r);
      for (const std::size_t d : {0UL, 1UL, 5UL, 13UL, 29UL, 1000UL}) {
        CAPTURE(n, r, d);
        // blocks: a partition of [0, d), longer first, sizes within 1
        std::size_t next = 0;
        for (int b = 0; b < n; ++b) {
          const index_range blk = p.block_elements(d, b);
          CHECK(blk.begin == next);
          CHECK(blk.size() ==
                d / static_cast<std::size_t>(n) +
                    (static_cast<std::size_t>(b) < d % static_cast<std::size_t>(n) ? 1 : 0));
          next = blk.end;
          // slices of a block: a partition of the block, the longest fits a packet
          std::size_t at = blk.begin;
          for (int s = 0; s < r; ++s) {
            const index_range e = p.block_slice_elements(d, b, s);
            CHECK(e.begin == at);
            CHECK(e.size() <= p.block_packet_elements(d));
            at = e.end;
          }
          CHECK(at == blk.end);
        }
        CHECK(next == d);
        CHECK(p.block_packet_elements(d) ==
              p.block_slice_elements(d, 0, 0).size()); // the longest slice of the longest block
        // over all groups and senders, the terms addressed to `rank` cover block `rank` of each
        // missing part exactly once, each slice from a different owner of the part
        for (int rank = 0; rank < n; ++rank) {
          std::vector<std::vector<int>> covered(p.part_count(), std::vector<int>(d, 0));
          for (const std::size_t g : p.groups_of(rank)) {
            for (const int sender : p.members(g)) {
              if (sender == rank) {
                continue;
              }
              for (const coding_term& t : p.coding_terms(g, sender)) {
                if (t.receiver != rank) {
                  continue;
                }
                CHECK(p.owners(t.part)[static_cast<std::size_t>(t.slice)] == sender);
                const index_range e = p.block_slice_elements(d, rank, t.slice);
                for (std::size_t i = e.begin; i < e.end; ++i) {
                  ++covered[t.part][i];
                }
              }
            }
          }
          const index_range mine = p.block_elements(d, rank);
          for (std::size_t t = 0; t < p.part_count(); ++t) {
            for (std::size_t i = 0; i < d; ++i) {
              const bool wanted = !p.owns(rank, t) && i >= mine.begin && i < mine.end;
              CHECK(covered[t][i] == (wanted ? 1 : 0));
            }
          }
        }
      }
    }
  }
  const placement p(3, 2);
  CHECK(p.block_elements(10, 0) == index_range{0, 4});
  CHECK(p.block_elements(10, 2) == index_range{7, 10});
  CHECK(p.block_slice_elements(10, 0, 1) == index_range{2, 4});
  CHECK(p.block_slice_elements(10, 1, 0) == index_range{4, 6});
  CHECK(p.block_slice_elements(10, 2, 1) == index_range{9, 10});
  CHECK(p.block_packet_elements(10) == 2);
  CHECK(p.block_packet_elements(13) == 3); // blocks 5, 4, 4; slices of 5: 3 and 2
  CHECK(p.block_packet_elements(0) == 0);
}

// ---- bad parameters ---------------------------------------------------------------------------

TEST_CASE("coded placement: bad parameters are rejected with messages naming the value",
          "[coded][errors]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(placement(1, 1), Contains("n = 1") && Contains("below 2"));
  CHECK_THROWS_WITH(placement(4, 0), Contains("r = 0") && Contains("below 1"));
  CHECK_THROWS_WITH(placement(4, 4), Contains("r = 4") && Contains("n = 4"));
  CHECK_THROWS_WITH(placement(4, 7), Contains("r = 7"));
  CHECK_THROWS_WITH(placement(200, 100), Contains("C(200, 100)") && Contains("size_t"));
  CHECK_THROWS_WITH(placement(30, 10), Contains("30045015") && Contains("1048576"));
  CHECK_THROWS_WITH(placement(2000, 1), Contains("1999000") && Contains("max_subset_count"));

  const placement p(5, 2);
  CHECK_THROWS_WITH(p.owners(10), Contains("part 10") && Contains("10)"));
  CHECK_THROWS_WITH(p.parts_of(5), Contains("rank 5") && Contains("[0, n = 5)"));
  CHECK_THROWS_WITH(p.parts_of(-1), Contains("rank -1"));
  CHECK_THROWS_WITH(p.groups_of(7), Contains("rank 7"));
  CHECK_THROWS_WITH(p.members(10), Contains("multicast group 10"));
  CHECK_THROWS_WITH(p.part_index(std::vector<int>{1, 1}), Contains("not strictly ascending"));
  CHECK_THROWS_WITH(p.part_index(std::vector<int>{1, 2, 3}), Contains("3 ranks given, expected 2"));
  CHECK_THROWS_WITH(p.part_index(std::vector<int>{1, 9}), Contains("rank 9"));
  CHECK_THROWS_WITH(p.coding_terms(0, 4), Contains("rank 4 is not a member"));
  CHECK_THROWS_WITH(p.missing_part(0, 3), Contains("rank 3 is not a member"));
  CHECK_THROWS_WITH(p.slice_elements(10, 2), Contains("slice 2"));
  CHECK_THROWS_WITH(split_evenly(5, 0, 0), Contains("piece count 0"));
  CHECK_THROWS_WITH(split_evenly(5, 3, 3), Contains("piece 3"));
  CHECK_THROWS_WITH(p.block_elements(10, 5), Contains("block 5") && Contains("[0, n = 5)"));
  CHECK_THROWS_WITH(p.block_slice_elements(10, 1, 2), Contains("slice 2"));
}

} // namespace coded_placement_test
