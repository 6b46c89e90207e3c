// SPDX-License-Identifier: Apache-2.0
// gradcomp::schedule::choose_exchange on hand-made cost models: dense where compression costs
// more than it saves (fast links, small tensors, an exchange hidden by backward), sparse where it
// saves (slow links, large tensors), fp16 in a critical regime; with min_saving 0 the choice is
// the independent argmin of the exposed times; bad input refused naming the value. The
// small-tensor bypass's bound (dense_below_elements) against an exhaustive search.
#include <gradcomp/cost/transport.hpp>
#include <gradcomp/schedule/exchange_choice.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"

namespace schedule_exchange_choice_test {

namespace gs = gradcomp::schedule;
namespace gcost = gradcomp::cost;

namespace {

//! Costs on P ranks of a link of `bits_per_second` and `latency_seconds`, with a selection of
//! 2 ns per element + 20 us and a cast of 0.5 ns per element + 5 us.
gs::exchange_costs costs_on(double bits_per_second, double latency_seconds, int ranks) {
  const auto net = gcost::network::from_link(bits_per_second, latency_seconds);
  const gcost::message_cost ring(gcost::transport_kind::ring_allreduce, ranks, net);
  const gcost::message_cost gather(gcost::transport_kind::sparse_allgather, ranks, net);
  return {[ring](std::uint64_t b) { return ring(b); },
          [gather](std::uint64_t b) { return gather(b); }, gs::affine_cost{5e-6, 0.5e-9},
          gs::affine_cost{20e-6, 2e-9}};
}

} // namespace

TEST_CASE("choose_exchange: dense where compression costs more than it saves",
          "[schedule][exchange_choice]") {
  // 100 Gbit/s, 5 us, 4 ranks, 10,000 elements: the ring moves 40 KB in ~33 us; selecting
  // costs 40 us before any byte is saved
  const auto d = gs::choose_exchange(10000, costs_on(100e9, 5e-6, 4), {}, false);
  CHECK(d.chosen.method == gs::exchange_method::dense);
  REQUIRE(d.candidates.size() == 3);
  CHECK(d.candidates[0].bytes == 40000);
  CHECK(d.candidates[1].bytes == 20000);
  CHECK(d.candidates[2].bytes == 800); // 8 x k_for_density(10000, 0.01) = 8 x 100
  // the hand figure: ring 2 (P-1) alpha + 2 (P-1) beta M / P = 30 us + 4.8 us
  CHECK(d.candidates[0].communication_seconds == Approx(6 * 5e-6 + 6 * 8e-11 * 40000 / 4));
}

TEST_CASE("choose_exchange: sparse where it saves (1 Gbit/s, a 1.6 M-element layer)",
          "[schedule][exchange_choice]") {
  const auto costs = costs_on(1e9, 50e-6, 4);
  const auto d = gs::choose_exchange(1600000, costs, {}, false);
  CHECK(d.chosen.method == gs::exchange_method::sparse);
  CHECK(d.chosen.density == 0.01);
  CHECK(d.chosen.bytes == 8 * 16000);
  CHECK(d.chosen.compress_seconds == Approx(20e-6 + 2e-9 * 1600000));
  CHECK(d.chosen.exposed_seconds < 0.2 * d.candidates[0].exposed_seconds);
}

TEST_CASE("choose_exchange: a critical regime leaves sparse out, fp16 wins on a slow link",
          "[schedule][exchange_choice]") {
  const auto costs = costs_on(1e9, 50e-6, 4);
  const auto d = gs::choose_exchange(1600000, costs, {}, true);
  REQUIRE(d.candidates.size() == 2);
  CHECK(d.chosen.method == gs::exchange_method::fp16);
  // with a critical density below 1, sparse competes at that density
  const auto d2 =
      gs::choose_exchange(1600000, costs, {.density = 0.01, .critical_density = 0.1}, true);
  REQUIRE(d2.candidates.size() == 3);
  CHECK(d2.candidates[2].density == 0.1);
  // without fp16 only dense is left
  const auto d3 = gs::choose_exchange(1600000, costs, {.allow_fp16 = false}, true);
  CHECK(d3.candidates.size() == 1);
  CHECK(d3.chosen.method == gs::exchange_method::dense);
}

TEST_CASE("choose_exchange: the sparse candidate is priced in its wire format",
          "[schedule][exchange_choice]") {
  // pure bandwidth: the ring moves 1.5 x its bytes' time, the allgather 3 x (P - 1 = 3); no
  // compression cost. At 10 % (u32, fp32) pairs cost 0.1 x 8 x 9 = 7.2 ns per element against
  // dense's 4 x 1.5 = 6: dense; fp16 values with delta + varint indices (3.0 bytes a pair at
  // 10 %) cost 2.7: sparse
  const gs::exchange_costs costs{[](std::uint64_t b) { return 1.5e-9 * static_cast<double>(b); },
                                 [](std::uint64_t b) { return 9e-9 * static_cast<double>(b); },
                                 gs::affine_cost{}, gs::affine_cost{}};
  const gs::exchange_choice_settings pairs{.density = 0.1, .allow_fp16 = false};
  const auto fp32 = gs::choose_exchange(1000000, costs, pairs, false);
  CHECK(fp32.chosen.method == gs::exchange_method::dense);
  CHECK(fp32.candidates[1].bytes == 8 * 100000);
  gs::exchange_choice_settings wire = pairs;
  wire.sparse_pairs = {.value_bytes = 2, .indices = gradcomp::index_encoding::delta_varint};
  const auto fp16 = gs::choose_exchange(1000000, costs, wire, false);
  CHECK(fp16.chosen.method == gs::exchange_method::sparse);
  CHECK(fp16.chosen.bytes == Approx(100000 * 3.0).epsilon(0.001));
}

TEST_CASE("choose_exchange: backward that hides the dense exchange keeps it dense",
          "[schedule][exchange_choice]") {
  const auto costs = costs_on(1e9, 50e-6, 4);
  const auto open = gs::choose_exchange(1600000, costs, {}, false, 0.0);
  const double dense_seconds = open.candidates[0].communication_seconds;
  const auto hidden = gs::choose_exchange(1600000, costs, {}, false, dense_seconds);
  CHECK(hidden.candidates[0].exposed_seconds == 0.0);
  CHECK(hidden.chosen.method == gs::exchange_method::dense);
}

TEST_CASE("choose_exchange: a lossier candidate must save min_saving",
          "[schedule][exchange_choice]") {
  // dense 1.0 s, fp16 0.95 s, sparse 0.85 s of exposed time (hand-made models)
  gs::exchange_costs c{[](std::uint64_t b) { return b == 400 ? 1.0 : 0.95; },
                       [](std::uint64_t) { return 0.85; },
                       {},
                       {}};
  CHECK(gs::choose_exchange(100, c, {.density = 0.5}, false).chosen.method ==
        gs::exchange_method::sparse);
  CHECK(gs::choose_exchange(100, c, {.density = 0.5, .min_saving = 0.2}, false).chosen.method ==
        gs::exchange_method::dense);
  CHECK(gs::choose_exchange(100, c, {.density = 0.5, .min_saving = 0.04}, false).chosen.method ==
        gs::exchange_method::sparse); // fp16 first (0.95 <= 0.96), then sparse (0.85 <= 0.912)
  // equal times: the least lossy stays
  gs::exchange_costs flat{
      [](std::uint64_t) { return 0.0; }, [](std::uint64_t) { return 0.0; }, {}, {}};
  CHECK(gs::choose_exchange(100, flat, {.min_saving = 0.0}, false).chosen.method ==
        gs::exchange_method::dense);
}

TEST_CASE("choose_exchange: with min_saving 0 the choice is the argmin of the exposed times",
          "[schedule][exchange_choice]") {
  unsigned state = 7;
  const auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const double alpha = 1e-6 * next(), beta = 1e-9 * next(), gather_factor = 4 * next();
    const double overlap = 1e-3 * next();
    gs::exchange_costs c{
        [=](std::uint64_t b) { return alpha + beta * static_cast<double>(b); },
        [=](std::uint64_t b) { return gather_factor * (alpha + beta * static_cast<double>(b)); },
        gs::affine_cost{1e-6 * next(), 1e-9 * next()},
        gs::affine_cost{1e-6 * next(), 4e-9 * next()}};
    const std::uint64_t n = 1 + static_cast<std::uint64_t>(1e6 * next());
    const auto d = gs::choose_exchange(n, c, {.density = 0.01, .min_saving = 0.0}, false, overlap);
    const auto best = std::min_element(
        d.candidates.begin(), d.candidates.end(),
        [](const auto& a, const auto& b) { return a.exposed_seconds < b.exposed_seconds; });
    REQUIRE(d.chosen.method == best->method);
  }
}

TEST_CASE("choose_exchange: bad input is refused naming the value", "[schedule][exchange_choice]") {
  const auto costs = costs_on(1e9, 50e-6, 4);
  CHECK_THROWS_WITH(gs::choose_exchange(10, costs, {.density = 0.0}, false),
                    Catch::Contains("density 0 is outside (0, 1]"));
  CHECK_THROWS_WITH(gs::choose_exchange(10, costs, {.critical_density = 1.5}, false),
                    Catch::Contains("density 1.5 is outside (0, 1]"));
  CHECK_THROWS_WITH(gs::choose_exchange(10, costs, {.min_saving = 1.0}, false),
                    Catch::Contains("min_saving 1 is outside [0, 1)"));
  CHECK_THROWS_WITH(gs::choose_exchange(10, costs, {}, false, -1.0),
                    Catch::Contains("overlap -1 s"));
  CHECK_THROWS_WITH(gs::choose_exchange(10, gs::exchange_costs{}, {}, false),
                    Catch::Contains("cost function is missing"));
  gs::exchange_costs nan = costs;
  nan.allgather_seconds = [](std::uint64_t) { return std::numeric_limits<double>::quiet_NaN(); };
  CHECK_THROWS_WITH(gs::choose_exchange(10, nan, {}, false),
                    Catch::Contains("the sparse candidate costs"));
}

namespace {
// The exhaustive reference: every bound b in [0, max + 1] sends the tensors of fewer than b
// elements whole; it is allowed when they hold at most share x total; the answer is the
// largest allowed b that is a size or max + 1 (the largest bound that sends the same set),
// 0 when only b = 0 sends none.
std::size_t reference_dense_below(const std::vector<std::size_t>& sizes, double share) {
  double total = 0;
  std::size_t largest = 0;
  for (const std::size_t n : sizes) {
    total += static_cast<double>(n);
    largest = std::max(largest, n);
  }
  std::size_t best = 0;
  for (std::size_t b = 0; b <= largest + 1; ++b) {
    double whole = 0;
    bool at_size = b == largest + 1;
    for (const std::size_t n : sizes) {
      whole += n < b ? static_cast<double>(n) : 0.0;
      at_size = at_size || n == b;
    }
    if (whole <= share * total && at_size && whole > 0) {
      best = b;
    }
  }
  return best;
}
} // namespace

TEST_CASE("dense_below_elements: the smallest tensors within the share, against exhaustive search",
          "[schedule][exchange_choice]") {
  // the CNN's tensors: at 5 % every tensor but fc1's weights (1,605,632) is whole
  const std::vector<std::size_t> cnn = {800, 32, 51200, 64, 1605632, 512, 5120, 10};
  CHECK(gs::dense_below_elements(cnn, 0.05) == 1605632);
  CHECK(gs::dense_below_elements(cnn, 0.001) == 5120); // 10 + 32 + 64 + 512 + 800 <= 1663
  CHECK(gs::dense_below_elements(cnn, 0.0) == 0);
  CHECK(gs::dense_below_elements({}, 0.5) == 0);
  // equal sizes go together: two of 10 do not fit in 15, so neither is whole
  CHECK(gs::dense_below_elements(std::vector<std::size_t>{10, 10, 80}, 0.15) == 0);
  CHECK(gs::dense_below_elements(std::vector<std::size_t>{10, 10, 80}, 0.2) == 80);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::size_t> sizes(1 + rng() % 6);
    for (std::size_t& n : sizes) {
      n = 1 + rng() % 40;
    }
    const double share = static_cast<double>(rng() % 100) / 100.0;
    CAPTURE(trial, sizes, share);
    REQUIRE(gs::dense_below_elements(sizes, share) == reference_dense_below(sizes, share));
  }
  CHECK_THROWS_WITH(gs::dense_below_elements(cnn, 1.0),
                    "gradcomp: dense share 1 is outside [0, 1)");
  CHECK_THROWS_WITH(gs::dense_below_elements(cnn, -0.1),
                    "gradcomp: dense share -0.1 is outside [0, 1)");
}

} // namespace schedule_exchange_choice_test
