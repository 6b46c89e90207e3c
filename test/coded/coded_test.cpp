// SPDX-License-Identifier: Apache-2.0
// The MPI-free core of the coded multicast exchange (gradcomp::coded, CSSGD / S3): the placement
// against subsets enumerated here by bit masks; a whole coded exchange simulated in process for
// n = 2..6 and every r, fixed point and XOR, recovering every slice bit for bit; the
// quantisation bounds and the overflow headroom; the reduce-scatter form (blocks, its exchange
// simulated in process, its cost model against counts taken from the placement); the cost model
// against counts taken by simulating the exchange; the choice of r against an exhaustive
// evaluation; bad parameters.
#include <gradcomp/coded.hpp>

#include "../common/catch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <vector>

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

// ---- exact coding: a whole coded exchange in process -------------------------------------------

namespace {

// The gradient of every part: random values plus the extremes (the agreed maximum with both
// signs, zeros of both signs, a subnormal, tiny negatives).
std::vector<std::vector<float>>
part_gradients(const placement& p, std::size_t elements, float max_abs, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, max_abs / 8.0f);
  std::vector<std::vector<float>> g(p.part_count(), std::vector<float>(elements));
  for (std::size_t t = 0; t < g.size(); ++t) {
    for (float& v : g[t]) {
      v = std::clamp(normal(rng), -max_abs, max_abs);
    }
    const float extremes[] = {max_abs, -max_abs, 0.0f, -0.0f, 1e-40f, -3e-8f, -max_abs};
    for (std::size_t i = 0; i < std::size(extremes) && i < elements; ++i) {
      g[t][(i + t) % elements] = extremes[i];
    }
  }
  return g;
}

// Runs the coded exchange of `p` on per-part data (fixed-point codes or XOR words) with the
// given combine / cancel, entirely in process: for every group, every member builds its packet
// from parts it owns, every other member cancels the terms it knows and keeps its slice.
// Returns, per rank, the full data of every part (own parts copied, the others recovered), and
// checks each recovered slice bit for bit as it goes.
template <class Word, class Combine, class Cancel>
std::vector<std::vector<std::vector<Word>>>
simulate_exchange(const placement& p,
                  const std::vector<std::vector<Word>>& data,
                  Combine combine,
                  Cancel cancel) {
  const std::size_t elements = data.front().size();
  const std::size_t packet_length = p.packet_elements(elements);
  const auto n = static_cast<std::size_t>(p.ranks());
  // what each rank knows: its own parts now, the others as they are recovered
  std::vector<std::vector<std::vector<Word>>> known(n,
                                                    std::vector<std::vector<Word>>(p.part_count()));
  std::vector<std::vector<std::vector<bool>>> have(
      n, std::vector<std::vector<bool>>(
             p.part_count(), std::vector<bool>(static_cast<std::size_t>(p.redundancy()))));
  for (std::size_t rank = 0; rank < n; ++rank) {
    for (std::size_t t = 0; t < p.part_count(); ++t) {
      known[rank][t].assign(elements, Word{0});
    }
    for (const std::size_t t : p.parts_of(static_cast<int>(rank))) {
      known[rank][t] = data[t];
    }
  }
  auto slice_of = [&](std::size_t rank, std::size_t part, int slice) {
    const index_range e = p.slice_elements(elements, slice);
    return std::span<const Word>(known[rank][part]).subspan(e.begin, e.size());
  };
  for (std::size_t g = 0; g < p.group_count(); ++g) {
    const auto members = as_vector(p.members(g));
    for (const int sender : members) {
      const auto terms = p.coding_terms(g, sender);
      std::vector<std::span<const Word>> slices;
      for (const coding_term& term : terms) {
        REQUIRE(p.owns(sender, term.part)); // the sender codes only what it computed
        slices.push_back(slice_of(static_cast<std::size_t>(sender), term.part, term.slice));
      }
      std::vector<Word> packet(packet_length, Word{0x5a});
      combine(std::span<const std::span<const Word>>(slices), std::span<Word>(packet));
      for (const coding_term& wanted : terms) {
        const int receiver = wanted.receiver;
        std::vector<std::span<const Word>> known_slices;
        for (const coding_term& term : terms) {
          if (term.receiver != receiver) {
            REQUIRE(p.owns(receiver, term.part)); // the receiver computed it itself
            known_slices.push_back(
                slice_of(static_cast<std::size_t>(receiver), term.part, term.slice));
          }
        }
        std::vector<Word> received = packet;
        cancel(std::span<const std::span<const Word>>(known_slices), std::span<Word>(received));
        const index_range e = p.slice_elements(elements, wanted.slice);
        const std::vector<Word> expected(
            data[wanted.part].begin() + static_cast<std::ptrdiff_t>(e.begin),
            data[wanted.part].begin() + static_cast<std::ptrdiff_t>(e.end));
        const std::vector<Word> got(received.begin(),
                                    received.begin() + static_cast<std::ptrdiff_t>(e.size()));
        REQUIRE(got == expected); // bit-identical (integer words)
        CHECK(std::all_of(received.begin() + static_cast<std::ptrdiff_t>(e.size()), received.end(),
                          [](Word w) { return w == Word{0}; })); // the padding decodes to zero
        auto& target = known[static_cast<std::size_t>(receiver)][wanted.part];
        std::copy(got.begin(), got.end(), target.begin() + static_cast<std::ptrdiff_t>(e.begin));
        std::vector<bool>& slices_had = have[static_cast<std::size_t>(receiver)][wanted.part];
        CHECK_FALSE(slices_had[static_cast<std::size_t>(wanted.slice)]); // each arrives once
        slices_had[static_cast<std::size_t>(wanted.slice)] = true;
      }
    }
  }
  for (std::size_t rank = 0; rank < n; ++rank) {
    for (std::size_t t = 0; t < p.part_count(); ++t) {
      if (!p.owns(static_cast<int>(rank), t)) {
        CHECK(std::all_of(have[rank][t].begin(), have[rank][t].end(), [](bool b) { return b; }));
      }
    }
  }
  return known;
}

} // namespace

TEST_CASE("coded exchange in fixed point recovers every slice bit for bit, sums agree",
          "[coded][exact]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::size_t elements : {1UL, 7UL, 13UL}) {
        CAPTURE(n, r, elements);
        const placement p(n, r);
        const float max_abs = 3.75f;
        const auto grads =
            part_gradients(p, elements, max_abs, static_cast<std::uint32_t>(n * 10 + r));
        // the agreed maximum over all parts (an allreduce MAX in the transport)
        float agreed = 0.0f;
        for (const auto& g : grads) {
          for (const float v : g) {
            agreed = std::max(agreed, std::fabs(v));
          }
        }
        REQUIRE(agreed == max_abs);
        const std::size_t terms = p.part_count(); // every rank sums all parts, then decodes
        const double scale = fixed_point_scale(agreed, terms);
        std::vector<std::vector<std::int32_t>> codes(p.part_count(),
                                                     std::vector<std::int32_t>(elements));
        for (std::size_t t = 0; t < p.part_count(); ++t) {
          encode_fixed_point(grads[t], scale, codes[t]);
        }
        const auto known = simulate_exchange<std::int32_t>(
            p, codes,
            [](std::span<const std::span<const std::int32_t>> s, std::span<std::int32_t> packet) {
              combine_fixed_point(s, packet);
            },
            [](std::span<const std::span<const std::int32_t>> s, std::span<std::int32_t> packet) {
              cancel_fixed_point(s, packet);
            });
        // every rank sums all parts in its own order (own parts first), wrap-around in uint32;
        // the results are bit-identical and within terms 0.5 / scale of the exact float sum
        std::vector<std::int32_t> first_sum;
        for (int rank = 0; rank < n; ++rank) {
          std::vector<std::size_t> order(p.parts_of(rank).begin(), p.parts_of(rank).end());
          for (std::size_t t = 0; t < p.part_count(); ++t) {
            if (!p.owns(rank, t)) {
              order.push_back(t);
            }
          }
          std::vector<std::int32_t> sum(elements, 0);
          for (const std::size_t t : order) {
            REQUIRE(known[static_cast<std::size_t>(rank)][t] == codes[t]);
            add_fixed_point(known[static_cast<std::size_t>(rank)][t], sum);
          }
          if (rank == 0) {
            first_sum = sum;
          }
          CHECK(sum == first_sum);
        }
        std::vector<double> decoded(elements);
        decode_fixed_point(first_sum, scale, decoded);
        for (std::size_t i = 0; i < elements; ++i) {
          long double exact = 0.0L;
          for (std::size_t t = 0; t < p.part_count(); ++t) {
            exact += grads[t][i];
          }
          CHECK(std::fabs(static_cast<long double>(decoded[i]) - exact) <=
                static_cast<long double>(terms) * 0.5L / scale);
        }
      }
    }
  }
}

TEST_CASE("coded exchange by XOR recovers every float bit for bit, NaN and inf included",
          "[coded][exact]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::size_t elements : {1UL, 7UL, 13UL}) {
        CAPTURE(n, r, elements);
        const placement p(n, r);
        auto grads = part_gradients(p, elements, std::numeric_limits<float>::max(),
                                    static_cast<std::uint32_t>(n * 100 + r));
        const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::infinity(),
                                  std::bit_cast<float>(0x7fc01234U), // NaN with a payload
                                  std::numeric_limits<float>::denorm_min()};
        for (std::size_t t = 0; t < grads.size(); ++t) {
          grads[t][t % elements] = specials[t % std::size(specials)];
        }
        std::vector<std::vector<std::uint32_t>> words(p.part_count(),
                                                      std::vector<std::uint32_t>(elements));
        for (std::size_t t = 0; t < p.part_count(); ++t) {
          encode_bits(grads[t], words[t]);
        }
        const auto known = simulate_exchange<std::uint32_t>(
            p, words,
            [](std::span<const std::span<const std::uint32_t>> s, std::span<std::uint32_t> packet) {
              combine_xor(s, packet);
            },
            [](std::span<const std::span<const std::uint32_t>> s, std::span<std::uint32_t> packet) {
              cancel_xor(s, packet);
            });
        for (int rank = 0; rank < n; ++rank) {
          for (std::size_t t = 0; t < p.part_count(); ++t) {
            std::vector<float> back(elements);
            decode_bits(known[static_cast<std::size_t>(rank)][t], back);
            for (std::size_t i = 0; i < elements; ++i) {
              REQUIRE(std::bit_cast<std::uint32_t>(back[i]) ==
                      std::bit_cast<std::uint32_t>(grads[t][i]));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("fixed point: power-of-two scale with headroom, error within the documented bound",
          "[coded][exact]") {
  constexpr std::int64_t code_max = 2147483647;
  SECTION("the scale is the largest power of two with the headroom") {
    for (const double max_abs : {1e-30, 1e-6, 0.01, 0.3, 1.0, 10.0, 3.0e5, 3.4e38}) {
      for (const std::size_t terms : {1UL, 2UL, 3UL, 20UL, 1000UL, 2147483647UL}) {
        CAPTURE(max_abs, terms);
        const double s = fixed_point_scale(max_abs, terms);
        int exponent = 0;
        CHECK(std::frexp(s, &exponent) == 0.5); // a power of two
        const double limit = static_cast<double>(code_max / static_cast<std::int64_t>(terms));
        CHECK(max_abs * s <= limit);
        CHECK(max_abs * 2.0 * s > limit);
      }
    }
    // CSSGD's fixed range [-10, 10] for one term: 10 x 2^27 <= 2^31 - 1 < 10 x 2^28
    CHECK(fixed_point_scale(10.0, 1) == std::ldexp(1.0, 27));
    CHECK(fixed_point_scale(0.0, 7) == fixed_point_scale(1.0, 7)); // all zeros
  }

  SECTION("a sum of the stated number of terms at max magnitude does not wrap") {
    for (const std::size_t terms : {1UL, 2UL, 3UL, 10UL, 20UL, 35UL, 1000UL}) {
      for (const float max_abs : {1.0f, 0.123f, 7.5e-3f, 3.0e38f}) {
        CAPTURE(terms, max_abs);
        const double s = fixed_point_scale(max_abs, terms);
        for (const float v : {max_abs, -max_abs}) {
          std::vector<std::int32_t> code(1);
          encode_fixed_point(std::vector<float>{v}, s, code);
          std::vector<std::int32_t> sum(1, 0);
          std::int64_t wide = 0;
          for (std::size_t i = 0; i < terms; ++i) {
            add_fixed_point(code, sum);
            wide += code[0];
          }
          CHECK(std::llabs(wide) <= code_max);
          CHECK(sum[0] == wide); // no wrap
          std::vector<double> decoded(1);
          decode_fixed_point(sum, s, decoded);
          CHECK(std::fabs(decoded[0] - static_cast<double>(terms) * v) <=
                static_cast<double>(terms) * 0.5 / s);
        }
      }
    }
  }

  SECTION("wrapped intermediate sums cancel exactly") {
    const std::vector<std::int32_t> a{2147483647, -2147483647,
                                      std::numeric_limits<std::int32_t>::min(), 0, -1};
    const std::vector<std::int32_t> b{2147483647, -2147483647,
                                      std::numeric_limits<std::int32_t>::min(), 1, -1};
    const std::vector<std::int32_t> c{5, -5, -1, 2147483647,
                                      std::numeric_limits<std::int32_t>::min()};
    std::vector<std::int32_t> packet(5);
    const std::span<const std::int32_t> all[] = {a, b, c};
    combine_fixed_point(all, packet);
    CHECK(packet[0] == static_cast<std::int32_t>(std::uint32_t{2147483647} * 2U + 5U));
    const std::span<const std::int32_t> known[] = {a, c};
    cancel_fixed_point(known, packet);
    CHECK(packet == b);
    subtract_fixed_point(b, packet);
    CHECK(packet == std::vector<std::int32_t>(5, 0));
  }

  SECTION("per element: 0.5 / scale decoding to double, min(1, 0.5 + ulp) to float") {
    std::mt19937 rng(7);
    for (const float max_abs : {1.0f, 4.2e-3f, 1e-20f, 65504.0f}) {
      for (const std::size_t terms : {1UL, 6UL, 252UL}) {
        CAPTURE(max_abs, terms);
        const double s = fixed_point_scale(max_abs, terms);
        std::uniform_real_distribution<float> uniform(-max_abs, max_abs);
        std::vector<float> x(4096);
        for (float& v : x) {
          v = uniform(rng);
        }
        // extremes and exact halves of a step (rounded away from zero)
        x[0] = max_abs;
        x[1] = -max_abs;
        x[2] = 0.0f;
        x[3] = std::numeric_limits<float>::denorm_min();
        x[4] = static_cast<float>(2.5 / s);
        x[5] = static_cast<float>(-2.5 / s);
        x[6] = std::nextafter(max_abs, 0.0f);
        std::vector<std::int32_t> q(x.size());
        encode_fixed_point(x, s, q);
        if (static_cast<double>(x[4]) == 2.5 / s) {
          CHECK(q[4] == 3);
          CHECK(q[5] == -3);
        }
        std::vector<double> as_double(x.size());
        std::vector<float> as_float(x.size());
        decode_fixed_point(q, s, as_double);
        decode_fixed_point(q, s, as_float);
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double err = std::fabs(static_cast<double>(x[i]) - as_double[i]);
          REQUIRE(err <= 0.5 / s);
          const float y = as_float[i];
          const double half_ulp =
              0.5 * static_cast<double>(
                        std::nextafter(std::fabs(y), std::numeric_limits<float>::infinity()) -
                        std::fabs(y));
          const double float_err = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y));
          REQUIRE(float_err <= std::min(1.0 / s, 0.5 / s + half_ulp));
        }
        // sums of up to `terms` codes: within m 0.5 / scale of the exact sum
        const std::size_t m = std::min<std::size_t>(terms, 64);
        std::vector<std::int32_t> sum(1, 0);
        long double exact = 0.0L;
        for (std::size_t i = 0; i < m; ++i) {
          add_fixed_point(std::span<const std::int32_t>(q).subspan(i, 1), sum);
          exact += x[i];
        }
        std::vector<double> decoded(1);
        decode_fixed_point(sum, s, decoded);
        CHECK(std::fabs(static_cast<long double>(decoded[0]) - exact) <=
              static_cast<long double>(m) * 0.5L / s);
      }
    }
  }

  SECTION("values beyond the agreed maximum saturate; -0 and 0 encode as 0") {
    const double s = fixed_point_scale(1.0, 1);
    std::vector<std::int32_t> q(5);
    encode_fixed_point(
        std::vector<float>{1e30f, -1e30f, std::numeric_limits<float>::infinity(), -0.0f, 0.0f}, s,
        q);
    CHECK(q == std::vector<std::int32_t>{2147483647, -2147483647, 2147483647, 0, 0});
  }
}

TEST_CASE("XOR coding is a bit copy and its own inverse", "[coded][exact]") {
  const std::vector<float> x{1.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(), 1e-45f};
  std::vector<std::uint32_t> w(x.size());
  encode_bits(x, w);
  CHECK(w[0] == 0x3f800000U);
  CHECK(w[1] == 0x80000000U);
  std::vector<std::uint32_t> packet(6);
  const std::vector<std::uint32_t> other{1, 2, 3};
  const std::span<const std::uint32_t> both[] = {w, other};
  combine_xor(both, packet);
  CHECK(packet[5] == 0U); // padding beyond both slices
  const std::span<const std::uint32_t> known[] = {other};
  cancel_xor(known, packet);
  CHECK(std::equal(w.begin(), w.end(), packet.begin()));
  std::vector<float> back(x.size());
  decode_bits(std::span<const std::uint32_t>(packet).first(x.size()), back);
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(std::bit_cast<std::uint32_t>(back[i]) == std::bit_cast<std::uint32_t>(x[i]));
  }
}

// ---- cost model against a simulation of the exchange --------------------------------------------

namespace {

struct counted {
  std::uint64_t sent_messages = 0;
  std::uint64_t received_messages = 0;
  std::uint64_t sent_bytes = 0;
  std::uint64_t received_bytes = 0;
  std::uint64_t reduced_bytes = 0;
};

std::uint64_t slice_length(std::uint64_t elements, int r, int position) {
  const auto ur = static_cast<std::uint64_t>(r);
  return elements / ur + (static_cast<std::uint64_t>(position) < elements % ur ? 1 : 0);
}

// per rank, by walking every group (bit masks) and every message of the coded exchange
std::vector<counted>
simulate_coded(int n, int r, std::uint64_t elements, std::uint64_t bytes, delivery mode) {
  std::vector<counted> c(static_cast<std::size_t>(n));
  std::uint64_t longest = 0;
  for (int pos = 0; pos < r; ++pos) {
    longest = std::max(longest, slice_length(elements, r, pos));
  }
  const std::uint64_t packet = longest * bytes;
  std::uint64_t parts = 0;
  for (unsigned mask = 0; mask < (1U << n); ++mask) {
    parts += std::popcount(mask) == r ? 1 : 0;
  }
  for (unsigned group = 0; group < (1U << n); ++group) {
    if (std::popcount(group) != r + 1) {
      continue;
    }
    for (const int sender : members_of(group)) {
      auto& s = c[static_cast<std::size_t>(sender)];
      const std::uint64_t transmissions =
          mode == delivery::multicast ? 1 : static_cast<std::uint64_t>(r);
      s.sent_messages += transmissions;
      s.sent_bytes += transmissions * packet;
      s.reduced_bytes += static_cast<std::uint64_t>(r - 1) * packet; // building the packet
      for (const int receiver : members_of(group)) {
        if (receiver == sender) {
          continue;
        }
        auto& d = c[static_cast<std::size_t>(receiver)];
        d.received_messages += 1;
        d.received_bytes += packet;
        d.reduced_bytes += static_cast<std::uint64_t>(r - 1) * packet; // cancelling
      }
    }
  }
  for (auto& x : c) {
    x.reduced_bytes += (parts - 1) * elements * bytes; // summing all parts
  }
  return c;
}

// per rank: every owner sends its slice of each part to every rank that lacks it
std::vector<counted> simulate_uncoded(int n, int r, std::uint64_t elements, std::uint64_t bytes) {
  std::vector<counted> c(static_cast<std::size_t>(n));
  std::uint64_t parts = 0;
  for (unsigned owners = 0; owners < (1U << n); ++owners) {
    if (std::popcount(owners) != r) {
      continue;
    }
    ++parts;
    const auto list = members_of(owners);
    for (int position = 0; position < r; ++position) {
      const int sender = list[static_cast<std::size_t>(position)];
      for (int receiver = 0; receiver < n; ++receiver) {
        if ((owners >> receiver) & 1U) {
          continue;
        }
        const std::uint64_t b = slice_length(elements, r, position) * bytes;
        c[static_cast<std::size_t>(sender)].sent_messages += 1;
        c[static_cast<std::size_t>(sender)].sent_bytes += b;
        c[static_cast<std::size_t>(receiver)].received_messages += 1;
        c[static_cast<std::size_t>(receiver)].received_bytes += b;
      }
    }
  }
  for (auto& x : c) {
    x.reduced_bytes = (parts - 1) * elements * bytes;
  }
  return c;
}

} // namespace

TEST_CASE("coded cost model matches the counts of a simulated exchange", "[coded][cost]") {
  for (int n = 2; n <= 7; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::uint64_t elements : {1UL, 5UL, 12UL, 13UL, 1000003UL}) {
        for (const std::uint64_t bytes : {2UL, 4UL}) {
          CAPTURE(n, r, elements, bytes);
          for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
            const exchange_load model = coded_exchange_load(n, r, elements, bytes, mode);
            for (const counted& c : simulate_coded(n, r, elements, bytes, mode)) {
              CHECK(model.sent_messages == c.sent_messages);
              CHECK(model.received_messages == c.received_messages);
              CHECK(model.sent_bytes == static_cast<double>(c.sent_bytes));
              CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
              CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
            }
          }
          const exchange_load model = uncoded_exchange_load(n, r, elements, bytes);
          std::uint64_t busiest = 0;
          for (const counted& c : simulate_uncoded(n, r, elements, bytes)) {
            CHECK(model.sent_messages == c.sent_messages);
            CHECK(model.received_messages == c.received_messages);
            CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
            CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
            CHECK(model.sent_bytes >= static_cast<double>(c.sent_bytes));
            busiest = std::max(busiest, c.sent_bytes);
          }
          CHECK(model.sent_bytes == static_cast<double>(busiest));
          // coding cuts what a multicast sender transmits by r, not what a rank receives
          const exchange_load multicast =
              coded_exchange_load(n, r, elements, bytes, delivery::multicast);
          CHECK(multicast.sent_bytes * r == model.sent_bytes);
          if (elements > 1000) { // padding to ceil(d / r) aside
            CHECK(multicast.received_bytes == Approx(model.received_bytes).epsilon(1e-5));
          }
        }
      }
    }
  }
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

TEST_CASE("coded reduce-scatter exchange in process: every block recovered bit for bit",
          "[coded][exact]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::size_t d : {1UL, 7UL, 23UL}) {
        CAPTURE(n, r, d);
        const placement p(n, r);
        std::mt19937 rng(static_cast<std::uint32_t>(n * 1000 + r * 10 + d));
        std::vector<std::vector<std::uint32_t>> words(p.part_count(),
                                                      std::vector<std::uint32_t>(d));
        for (auto& part : words) {
          for (std::uint32_t& w : part) {
            w = static_cast<std::uint32_t>(rng());
          }
        }
        const std::size_t length = p.block_packet_elements(d);
        // known[rank][part]: own parts whole; block `rank` of the others as recovered
        std::vector<std::vector<std::vector<std::uint32_t>>> known(
            static_cast<std::size_t>(n), std::vector<std::vector<std::uint32_t>>(
                                             p.part_count(), std::vector<std::uint32_t>(d, 0)));
        for (int rank = 0; rank < n; ++rank) {
          for (const std::size_t t : p.parts_of(rank)) {
            known[static_cast<std::size_t>(rank)][t] = words[t];
          }
        }
        for (int mode = 0; mode < 2; ++mode) { // 0: XOR, 1: wrapping int32 sums
          for (std::size_t g = 0; g < p.group_count(); ++g) {
            for (const int sender : p.members(g)) {
              const auto terms = p.coding_terms(g, sender);
              auto term_slice = [&](int holder, const coding_term& t) {
                const index_range e = p.block_slice_elements(d, t.receiver, t.slice);
                return std::span<const std::uint32_t>(
                           known[static_cast<std::size_t>(holder)][t.part])
                    .subspan(e.begin, e.size());
              };
              std::vector<std::uint32_t> packet(length, 0);
              for (const coding_term& t : terms) {
                REQUIRE(p.owns(sender, t.part));
                const auto sl = term_slice(sender, t);
                for (std::size_t i = 0; i < sl.size(); ++i) {
                  packet[i] = mode == 0 ? packet[i] ^ sl[i] : packet[i] + sl[i];
                }
              }
              for (const coding_term& wanted : terms) {
                std::vector<std::uint32_t> got = packet;
                for (const coding_term& t : terms) {
                  if (t.receiver == wanted.receiver) {
                    continue;
                  }
                  REQUIRE(p.owns(wanted.receiver, t.part));
                  const auto sl = term_slice(wanted.receiver, t);
                  for (std::size_t i = 0; i < sl.size(); ++i) {
                    got[i] = mode == 0 ? got[i] ^ sl[i] : got[i] - sl[i];
                  }
                }
                const index_range e = p.block_slice_elements(d, wanted.receiver, wanted.slice);
                for (std::size_t i = 0; i < length; ++i) {
                  // the slice bit for bit, then zero padding
                  REQUIRE(got[i] == (i < e.size() ? words[wanted.part][e.begin + i] : 0U));
                }
              }
            }
          }
        }
      }
    }
  }
}

namespace {

// per rank, the reduce-scatter form counted from the placement: every packet of every group
// (point to point or multicast), padded to the longest slice of any block, then a ring
// allgather in which rank k sends block k - s to k + 1 in step s = 0 .. n - 2
std::vector<counted>
simulate_reduce_scatter(int n, int r, std::size_t d, std::uint64_t bytes, delivery mode) {
  const placement p(n, r);
  const auto un = static_cast<std::size_t>(n);
  std::uint64_t longest = 0;
  for (std::size_t b = 0; b < un; ++b) {
    const index_range blk = split_evenly(d, un, b);
    for (std::size_t s = 0; s < static_cast<std::size_t>(r); ++s) {
      longest = std::max<std::uint64_t>(
          longest, split_evenly(blk.size(), static_cast<std::size_t>(r), s).size());
    }
  }
  const std::uint64_t packet = longest * bytes;
  std::vector<counted> c(un);
  for (std::size_t g = 0; g < p.group_count(); ++g) {
    for (const int sender : p.members(g)) {
      auto& s = c[static_cast<std::size_t>(sender)];
      const auto terms = p.coding_terms(g, sender);
      const std::uint64_t transmissions = mode == delivery::multicast ? 1 : terms.size();
      s.sent_messages += transmissions;
      s.sent_bytes += transmissions * packet;
      s.reduced_bytes += (terms.size() - 1) * packet;
      for (const coding_term& t : terms) {
        auto& x = c[static_cast<std::size_t>(t.receiver)];
        x.received_messages += 1;
        x.received_bytes += packet;
        x.reduced_bytes += (terms.size() - 1) * packet;
      }
    }
  }
  for (std::size_t k = 0; k < un; ++k) {
    for (std::size_t step = 0; step + 1 < un; ++step) {
      const std::size_t block = (k + un - step) % un;
      const std::uint64_t b = split_evenly(d, un, block).size() * bytes;
      c[k].sent_messages += 1;
      c[k].sent_bytes += b;
      c[(k + 1) % un].received_messages += 1;
      c[(k + 1) % un].received_bytes += b;
    }
    c[k].reduced_bytes += (p.part_count() - 1) * split_evenly(d, un, k).size() * bytes;
  }
  return c;
}

} // namespace

TEST_CASE("coded reduce-scatter cost model matches counts taken from the placement",
          "[coded][cost]") {
  for (int n = 2; n <= 6; ++n) {
    for (int r = 1; r < n; ++r) {
      for (const std::size_t d : {0UL, 1UL, 4UL, 5UL, 12UL, 13UL, 61UL, 1000003UL}) {
        for (const std::uint64_t bytes : {2UL, 4UL}) {
          for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
            CAPTURE(n, r, d, bytes, mode == delivery::multicast);
            const auto counts = simulate_reduce_scatter(n, r, d, bytes, mode);
            exchange_load busiest;
            for (int k = 0; k < n; ++k) {
              CAPTURE(k);
              const counted& c = counts[static_cast<std::size_t>(k)];
              const exchange_load model = coded_reduce_scatter_load(n, r, d, bytes, mode, k);
              CHECK(model.sent_messages == c.sent_messages);
              CHECK(model.received_messages == c.received_messages);
              CHECK(model.sent_bytes == static_cast<double>(c.sent_bytes));
              CHECK(model.received_bytes == static_cast<double>(c.received_bytes));
              CHECK(model.reduced_bytes == static_cast<double>(c.reduced_bytes));
              busiest.sent_messages = std::max(busiest.sent_messages, c.sent_messages);
              busiest.received_messages = std::max(busiest.received_messages, c.received_messages);
              busiest.sent_bytes = std::max(busiest.sent_bytes, static_cast<double>(c.sent_bytes));
              busiest.received_bytes =
                  std::max(busiest.received_bytes, static_cast<double>(c.received_bytes));
              busiest.reduced_bytes =
                  std::max(busiest.reduced_bytes, static_cast<double>(c.reduced_bytes));
            }
            CHECK(coded_reduce_scatter_load(n, r, d, bytes, mode) == busiest);
            CHECK(coded_exchange_load(n, r, d, bytes, mode, exchange_variant::reduce_scatter) ==
                  busiest);
            CHECK(coded_exchange_load(n, r, d, bytes, mode, exchange_variant::full_recovery) ==
                  coded_exchange_load(n, r, d, bytes, mode));
          }
        }
      }
    }
  }
  // docs/coded.md, "Load formulas", table rows "R, r = 2" and "R, r = 3": multicast coded
  // packets plus a ring allgather, in units of d (the table rounds to 2 decimals)
  const std::size_t d = 720000; // divisible by n r for every entry
  const struct {
    int n, r;
    double send;
  } table[] = {{3, 2, 0.83}, {4, 2, 1.13}, {5, 2, 1.40}, {6, 2, 1.67}, {8, 2, 2.19},
               {4, 3, 0.83}, {5, 3, 1.07}, {6, 3, 1.39}, {8, 3, 2.33}};
  for (const auto& row : table) {
    CAPTURE(row.n, row.r);
    for (int k = 0; k < row.n; ++k) {
      const exchange_load load =
          coded_reduce_scatter_load(row.n, row.r, d, 1, delivery::multicast, k);
      CHECK(load.sent_bytes / static_cast<double>(d) == Approx(row.send).margin(0.005));
    }
  }
  // reduce-scatter sends less than the full form exactly when C(n - 1, r) > 1, i.e. r < n - 1
  const std::size_t divisible = 840 * 840; // by n r for every n <= 8, r < n: no padding
  for (int n = 2; n <= 8; ++n) {
    for (int r = 1; r < n; ++r) {
      CAPTURE(n, r);
      const double rs =
          coded_reduce_scatter_load(n, r, divisible, 4, delivery::point_to_point).sent_bytes;
      const double full =
          coded_exchange_load(n, r, divisible, 4, delivery::point_to_point).sent_bytes;
      if (r < n - 1) {
        CHECK(rs < full);
      } else {
        CHECK(rs == full);
      }
    }
  }
  // the iteration-time model picks the variant from coded_model
  const auto net = gradcomp::cost::network::from_link(1e9, 5e-5);
  const workload w{.gradient_elements = 1'000'000, .bytes_per_element = 4, .compute_seconds = 0.01};
  const coded_model rs_model{.variant = exchange_variant::reduce_scatter};
  CHECK(coded_iteration_seconds(5, 2, w, net, rs_model) ==
        Approx(2 * 0.01 + exchange_seconds(coded_reduce_scatter_load(5, 2, 1'000'000, 4,
                                                                     delivery::point_to_point),
                                           net, link_model::full_duplex)));
  CHECK(choose_redundancy(5, w, net, rs_model).table[1].iteration_seconds ==
        coded_iteration_seconds(5, 2, w, net, rs_model));
}

TEST_CASE("coded cost model: seconds under both link models, ring as gradcomp::cost has it",
          "[coded][cost]") {
  const gradcomp::cost::network net{
      .alpha_seconds = 2e-5, .beta_seconds_per_byte = 1e-9, .gamma_seconds_per_byte = 1e-10};
  const exchange_load load{.sent_messages = 3,
                           .received_messages = 6,
                           .sent_bytes = 1000.0,
                           .received_bytes = 4000.0,
                           .reduced_bytes = 500.0};
  CHECK(exchange_seconds(load, net, link_model::sender_bound) ==
        Approx(3 * 2e-5 + 1000 * 1e-9 + 500 * 1e-10));
  CHECK(exchange_seconds(load, net, link_model::full_duplex) ==
        Approx(6 * 2e-5 + 4000 * 1e-9 + 500 * 1e-10));
  for (int n = 1; n <= 9; ++n) {
    CAPTURE(n);
    const exchange_load ring = ring_allreduce_load(n, 1000, 4);
    for (const link_model link : {link_model::sender_bound, link_model::full_duplex}) {
      CHECK(exchange_seconds(ring, net, link) ==
            Approx(gradcomp::cost::ring_allreduce_seconds(4000.0, n, net)).margin(1e-15));
    }
  }
  const workload w{.gradient_elements = 1000, .bytes_per_element = 4, .compute_seconds = 0.01};
  CHECK(ring_iteration_seconds(4, w, net) ==
        Approx(0.01 + gradcomp::cost::ring_allreduce_seconds(4000.0, 4, net)));
  CHECK(coded_iteration_seconds(4, 2, w, net, {delivery::multicast, link_model::sender_bound}) ==
        Approx(2 * 0.01 + exchange_seconds(coded_exchange_load(4, 2, 1000, 4, delivery::multicast),
                                           net, link_model::sender_bound)));
  CHECK(uncoded_iteration_seconds(4, 2, w, net) ==
        Approx(2 * 0.01 + exchange_seconds(uncoded_exchange_load(4, 2, 1000, 4), net,
                                           link_model::full_duplex)));
  // docs/coded.md, "Load formulas", table row "F, r = 2", n = 4: each rank sends 1.5 d (one
  // packet of d / 2 in each of its C(3, 2) = 3 groups)
  CHECK(coded_exchange_load(4, 2, 1000, 1, delivery::multicast).sent_bytes == 1500.0);
  // n = 3, r = 2 worked example: each worker sends d / 2 against d uncoded
  CHECK(coded_exchange_load(3, 2, 1000, 1, delivery::multicast).sent_bytes == 500.0);
  CHECK(uncoded_exchange_load(3, 2, 1000, 1).sent_bytes == 1000.0);
}

TEST_CASE("choose_redundancy returns the argmin of an exhaustive evaluation", "[coded][cost]") {
  const std::vector<gradcomp::cost::network> nets{
      gradcomp::cost::network::from_link(1e9, 5e-5),
      gradcomp::cost::network::from_link(1e11, 2e-6),
      {.alpha_seconds = 1e-3, .beta_seconds_per_byte = 1e-10, .gamma_seconds_per_byte = 1e-11}};
  std::set<int> chosen;
  for (int n = 2; n <= 9; ++n) {
    for (const auto& net : nets) {
      for (const double compute : {0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0}) {
        for (const delivery mode : {delivery::multicast, delivery::point_to_point}) {
          for (const link_model link : {link_model::sender_bound, link_model::full_duplex}) {
            const workload w{
                .gradient_elements = 1'000'003, .bytes_per_element = 4, .compute_seconds = compute};
            const coded_model model{mode, link};
            CAPTURE(n, compute, net.alpha_seconds, net.beta_seconds_per_byte);
            const redundancy_choice c = choose_redundancy(n, w, net, model);
            REQUIRE(c.table.size() == static_cast<std::size_t>(n - 1));
            int best = 0;
            double best_seconds = std::numeric_limits<double>::infinity();
            for (int r = 1; r < n; ++r) {
              const double t = coded_iteration_seconds(n, r, w, net, model);
              const redundancy_cost& row = c.table[static_cast<std::size_t>(r - 1)];
              CHECK(row.redundancy == r);
              CHECK(row.iteration_seconds == t);
              CHECK(row.compute_seconds == r * compute);
              CHECK(row.compute_seconds + row.communication_seconds == row.iteration_seconds);
              if (t < best_seconds) {
                best = r;
                best_seconds = t;
              }
            }
            CHECK(c.redundancy == best);
            CHECK(c.iteration_seconds == best_seconds);
            CHECK(c.ring_iteration_seconds == ring_iteration_seconds(n, w, net));
            chosen.insert(c.redundancy);
            // limited to r <= 2
            if (n >= 3) {
              const redundancy_choice limited = choose_redundancy(n, w, net, model, 2);
              CHECK(limited.table.size() == 2);
              CHECK(limited.redundancy ==
                    (c.table[1].iteration_seconds < c.table[0].iteration_seconds ? 2 : 1));
            }
          }
        }
      }
    }
  }
  CHECK(chosen.size() >= 3); // the cases above do not all pick the same r
  // ties go to the smallest r: a free network and no compute
  const redundancy_choice tie = choose_redundancy(5, workload{.gradient_elements = 100}, {});
  CHECK(tie.redundancy == 1);
  CHECK(tie.iteration_seconds == 0.0);
}

TEST_CASE("the T(r) table of docs/coded.md for n = 4", "[coded][cost]") {
  // 25e6 fp32-sized elements (100 MB), 10 Gbit/s, 50 us latency, 0.05 s compute at r = 1
  const auto net = gradcomp::cost::network::from_link(10e9, 50e-6);
  const workload w{
      .gradient_elements = 25'000'000, .bytes_per_element = 4, .compute_seconds = 0.05};
  const redundancy_choice p2p = choose_redundancy(4, w, net);
  CHECK(p2p.ring_iteration_seconds == Approx(0.1703));
  CHECK(p2p.table[0].iteration_seconds == Approx(0.29015));
  CHECK(p2p.table[1].iteration_seconds == Approx(0.3403));
  CHECK(p2p.table[2].iteration_seconds == Approx(0.23015));
  CHECK(p2p.redundancy == 3);
  const redundancy_choice mc =
      choose_redundancy(4, w, net, {delivery::multicast, link_model::sender_bound});
  CHECK(mc.table[0].iteration_seconds == Approx(0.29015));
  CHECK(mc.table[1].iteration_seconds == Approx(0.22015));
  CHECK(mc.table[2].iteration_seconds == Approx(0.1767167));
  CHECK(mc.redundancy == 3);
  const workload light{
      .gradient_elements = 25'000'000, .bytes_per_element = 4, .compute_seconds = 0.02};
  const redundancy_choice mc_light =
      choose_redundancy(4, light, net, {delivery::multicast, link_model::sender_bound});
  CHECK(mc_light.iteration_seconds == Approx(0.0867167));
  CHECK(mc_light.ring_iteration_seconds == Approx(0.1403));
  CHECK(choose_redundancy(4, light, net).iteration_seconds == Approx(0.14015));
}

// ---- bad parameters
// ------------------------------------------------------------------------------

TEST_CASE("coded: bad parameters are rejected with messages naming the value", "[coded][errors]") {
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

  CHECK_THROWS_WITH(fixed_point_scale(-1.0, 2), Contains("-1"));
  CHECK_THROWS_WITH(fixed_point_scale(std::nan(""), 2), Contains("nan"));
  CHECK_THROWS_WITH(fixed_point_scale(1.0, 0), Contains("0") && Contains("2147483647"));
  CHECK_THROWS_WITH(fixed_point_scale(1.0, 2147483648UL), Contains("2147483648"));
  CHECK_THROWS_WITH(fixed_point_scale(1e-320, 1), Contains("too small"));
  std::vector<std::int32_t> four(4);
  CHECK_THROWS_WITH(encode_fixed_point(std::vector<float>(5), 1.0, four),
                    Contains("5 values") && Contains("4 codes"));
  CHECK_THROWS_WITH(encode_fixed_point(std::vector<float>(4), 0.0, four), Contains("scale 0"));
  CHECK_THROWS_WITH(
      encode_fixed_point(std::vector<float>{0.0f, 1.0f, std::nanf(""), 0.0f}, 1.0, four),
      Contains("value 2 is NaN"));
  std::vector<double> three(3);
  CHECK_THROWS_WITH(decode_fixed_point(four, 1.0, three),
                    Contains("4 codes") && Contains("3 values"));
  std::vector<std::int32_t> five(5);
  CHECK_THROWS_WITH(add_fixed_point(five, four), Contains("5 elements") && Contains("4 elements"));
  const std::span<const std::int32_t> slices[] = {four, five};
  CHECK_THROWS_WITH(combine_fixed_point(slices, four),
                    Contains("5 elements") && Contains("4 elements"));
  CHECK_THROWS_WITH(cancel_fixed_point(slices, four),
                    Contains("5 elements") && Contains("4 elements"));
  std::vector<std::uint32_t> words(3);
  CHECK_THROWS_WITH(encode_bits(std::vector<float>(2), words),
                    Contains("2 values") && Contains("3 words"));
  CHECK_THROWS_WITH(xor_into(std::vector<std::uint32_t>(4), words),
                    Contains("4 elements") && Contains("3 elements"));

  CHECK_THROWS_WITH(coded_exchange_load(1, 1, 10, 4, delivery::multicast), Contains("n = 1"));
  CHECK_THROWS_WITH(coded_exchange_load(4, 4, 10, 4, delivery::multicast), Contains("r = 4"));
  CHECK_THROWS_WITH(uncoded_exchange_load(4, 0, 10, 4), Contains("r = 0"));
  CHECK_THROWS_WITH(coded_exchange_load(4, 2, 10, 0, delivery::multicast),
                    Contains("bytes per element 0"));
  CHECK_THROWS_WITH(ring_allreduce_load(0, 10, 4), Contains("rank count 0"));
  CHECK_THROWS_WITH(coded_reduce_scatter_load(4, 2, 10, 4, delivery::multicast, 4),
                    Contains("rank 4") && Contains("[0, n = 4)"));
  CHECK_THROWS_WITH(coded_reduce_scatter_load(4, 4, 10, 4, delivery::multicast), Contains("r = 4"));
  CHECK_THROWS_WITH(p.block_elements(10, 5), Contains("block 5") && Contains("[0, n = 5)"));
  CHECK_THROWS_WITH(p.block_slice_elements(10, 1, 2), Contains("slice 2"));
  CHECK_THROWS_WITH(coded_exchange_load(120, 60, 10, 4, delivery::multicast),
                    Contains("does not fit"));
  const gradcomp::cost::network net = gradcomp::cost::network::from_link(1e9, 1e-5);
  CHECK_THROWS_WITH(choose_redundancy(4, workload{.compute_seconds = -1.0}, net), Contains("-1"));
  CHECK_THROWS_WITH(choose_redundancy(4, workload{}, net, {}, 4), Contains("max redundancy 4"));
  CHECK_THROWS_WITH(choose_redundancy(1, workload{}, net), Contains("n = 1"));
  CHECK_THROWS_WITH(choose_redundancy(100, workload{}, net), Contains("does not fit"));
  CHECK(choose_redundancy(100, workload{.gradient_elements = 10}, net, {}, 3).table.size() == 3);
}
