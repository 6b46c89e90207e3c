// SPDX-License-Identifier: Apache-2.0
// gradcomp::coded's exact coding of packets (coded/exact_coding.hpp): a whole coded exchange
// simulated in process on a placement for n = 2..6 and every r, in fixed point and by XOR,
// recovering every slice bit for bit (the full form and the reduce-scatter form); the
// fixed-point scale, its overflow headroom and quantisation bounds; XOR as a bit copy; bad
// parameters.
#include <gradcomp/coded/exact_coding.hpp>
#include <gradcomp/coded/placement.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace coded_exact_coding_test {

using namespace gradcomp::coded;

// ---- exact coding: a whole coded exchange in process -------------------------------------------

namespace {

std::vector<int> as_vector(std::span<const int> s) {
  return {s.begin(), s.end()};
}

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

// ---- bad parameters ---------------------------------------------------------------------------

TEST_CASE("coded exact coding: bad parameters are rejected with messages naming the value",
          "[coded][errors]") {
  using Catch::Contains;
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
}

} // namespace coded_exact_coding_test
