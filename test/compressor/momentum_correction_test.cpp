// SPDX-License-Identifier: Apache-2.0
// DGC momentum correction fused into error feedback (compress_accumulate_momentum and
// error_feedback with gradcomp::momentum_correction) against an independent composition: the
// velocity updated in a separate loop, plain error feedback on it, then the velocity zeroed at
// the message's indices. Bit for bit, for every compressor, over iterations; plus conservation
// and the refusals.
#include <gradcomp/gradcomp.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/first_failure.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace compressor_momentum_correction_test {

using gradcomp::test::same_bits;

using namespace gradcomp;
using test::distribution;

namespace {

bool same_message(const sparse_message& a, const sparse_message& b) {
  return a.dense_length_elements == b.dense_length_elements && a.dense == b.dense &&
         a.values_type == b.values_type && a.indices == b.indices && same_bits(a.values, b.values);
}

// Elements exact top-k sends at `density` of n: ceil(density n), at least 1.
std::size_t reference_k(double density, std::size_t n) {
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::ceil(density * static_cast<double>(n))));
}

// The sort-and-truncate reference of one momentum-corrected call, independent of the
// compressors: u = m u + g; acc = r + u; the k largest |acc| by a full sort are sent (returned
// dense); r = acc where not sent, 0 where sent; u zeroed where sent if `masking`.
std::vector<float> reference_call(std::vector<float>& u,
                                  std::vector<float>& r,
                                  const std::vector<float>& g,
                                  float m,
                                  double density,
                                  bool masking) {
  const std::size_t n = g.size();
  std::vector<float> acc(n);
  for (std::size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + g[i];
    if (std::fabs(u[i]) < std::numeric_limits<float>::min()) {
      u[i] = 0.0f; // the documented flush of a subnormal velocity
    }
    acc[i] = r[i] + u[i];
  }
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) {
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::fabs(acc[a]) > std::fabs(acc[b]); });
  const std::size_t k = reference_k(density, n);
  std::vector<float> expected(n, 0.0f);
  for (std::size_t j = 0; j < k; ++j) {
    expected[order[j]] = acc[order[j]];
  }
  for (std::size_t i = 0; i < n; ++i) {
    const bool was_sent = expected[i] != 0.0f;
    r[i] = was_sent ? 0.0f : acc[i];
    if (masking && was_sent) {
      u[i] = 0.0f;
    }
  }
  return expected;
}

// Runs the fused call (with factor masking or the velocity kept) and the reference composition
// side by side on two copies of `c`.
template <class Compressor>
void check_against_composition(const Compressor& c,
                               std::size_t n,
                               distribution dist,
                               float momentum,
                               bool masking,
                               int iterations) {
  Compressor fused_c = c;
  Compressor reference_c = c;
  std::vector<float> residual(n, 0.0f), velocity(n, 0.0f);
  std::vector<float> ref_residual(n, 0.0f), ref_velocity(n, 0.0f);
  sparse_message fused, reference;
  std::vector<float> sent(n);
  for (int it = 0; it < iterations; ++it) {
    CAPTURE(it);
    const auto g = test::make_values(dist, n, 300 + it, static_cast<float>(std::pow(0.95, it)));
    const std::vector<float> old_residual = residual;
    const auto fs =
        masking
            ? fused_c.compress_accumulate_momentum(residual, velocity, g, momentum, fused)
            : fused_c.compress_accumulate_momentum(residual, velocity, g, momentum, fused, false);
    // reference: u = m u + g in its own loop, plain error feedback on u, then factor masking
    for (std::size_t i = 0; i < n; ++i) {
      ref_velocity[i] = momentum * ref_velocity[i] + g[i];
    }
    const std::vector<float> u = ref_velocity;
    const auto rs = reference_c.compress_accumulate(ref_residual, u, reference);
    for (std::size_t j = 0; masking && j < reference.nnz(); ++j) {
      ref_velocity[reference.dense ? j : reference.indices[j]] = 0.0f;
    }
    REQUIRE(fs.k_selected == rs.k_selected);
    REQUIRE(fs.fallback == rs.fallback);
    REQUIRE(same_message(fused, reference));
    REQUIRE(same_bits(residual, ref_residual));
    REQUIRE(same_bits(velocity, ref_velocity));
    // conservation against u: sent + new residual == old residual + u, bit for bit
    decompress(fused, sent);
    REQUIRE(test::first_unconserved(sent, residual, old_residual, u) == n);
  }
}

} // namespace

static_assert(kept_velocity_compressor<exact_top_k> && kept_velocity_compressor<reused_threshold> &&
              kept_velocity_compressor<dense> &&
              kept_velocity_compressor<size_switch<dense, reused_threshold>> &&
              kept_velocity_compressor<any_compressor>);

TEST_CASE("momentum correction equals velocity update + error feedback + masking, bit for bit",
          "[momentum]") {
  const auto dist = GENERATE(distribution::normal, distribution::heavy_tailed, distribution::tied,
                             distribution::with_zeros);
  // 70,000 values: two chunks of the parallel passes, the second one partial
  const std::size_t n = GENERATE(0, 1, 7, 5000, 70000);
  const float m = GENERATE(0.0f, 0.9f);
  // with masking (DGC), or the velocity kept (the update still fused into the first pass)
  const bool masking = GENERATE(true, false);
  CAPTURE(test::name(dist), n, m, masking);
  SECTION("exact_top_k") {
    check_against_composition(exact_top_k(0.01), n, dist, m, masking, 8);
  }
  SECTION("sampled_threshold") {
    check_against_composition(sampled_threshold({.density = 0.01, .seed = 5}), n, dist, m, masking,
                              8);
  }
  SECTION("gaussian_threshold") {
    check_against_composition(gaussian_threshold(0.01), n, dist, m, masking, 8);
  }
  SECTION("lognormal_threshold") {
    check_against_composition(lognormal_threshold(0.01), n, dist, m, masking, 8);
  }
  SECTION("reused_threshold") {
    check_against_composition(reused_threshold({.density = 0.01, .interval = 3}), n, dist, m,
                              masking, 8);
  }
  SECTION("dense fp16 (rounding error stays in the residual)") {
    check_against_composition(dense(value_type::fp16), n, dist, m, masking, 4);
  }
  SECTION("size_switch") {
    check_against_composition(size_switch(1000, dense(), exact_top_k(0.05)), n, dist, m, masking,
                              4);
  }
}

TEST_CASE("momentum 0 is plain error feedback", "[momentum]") {
  const std::size_t n = 20000;
  error_feedback<reused_threshold> plain(n, reused_threshold({.density = 0.01, .interval = 3}));
  error_feedback<reused_threshold> corrected(n, reused_threshold({.density = 0.01, .interval = 3}),
                                             momentum_correction{0.0});
  CHECK(corrected.velocity().empty());
  sparse_message a, b;
  for (int it = 0; it < 5; ++it) {
    const auto g = test::make_values(distribution::normal, n, 40 + it);
    plain.compress(g, a);
    corrected.compress(g, b);
    REQUIRE(same_message(a, b));
    REQUIRE(same_bits(plain.residual(), corrected.residual()));
  }
}

TEST_CASE("error_feedback with momentum correction keeps the velocity and masks it", "[momentum]") {
  const std::size_t n = 4000;
  error_feedback<exact_top_k> ef(n, exact_top_k(0.01), momentum_correction{0.5});
  REQUIRE(ef.velocity().size() == n);
  CHECK(ef.momentum() == 0.5f);
  sparse_message m;
  const auto g1 = test::make_values(distribution::normal, n, 1);
  ef.compress(g1, m);
  // after one call the velocity is g1, zeroed where sent
  std::vector<bool> was_sent(n, false);
  for (const auto i : m.indices) {
    was_sent[i] = true;
  }
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(ef.velocity()[i] == (was_sent[i] ? 0.0f : g1[i]));
  }
  // the second call accumulates 0.5 u + g2
  const std::vector<float> u1(ef.velocity().begin(), ef.velocity().end());
  const std::vector<float> r1(ef.residual().begin(), ef.residual().end());
  const auto g2 = test::make_values(distribution::normal, n, 2);
  ef.compress(g2, m);
  std::vector<float> sent(n);
  decompress(m, sent);
  for (std::size_t i = 0; i < n; ++i) {
    const float u2 = 0.5f * u1[i] + g2[i];
    REQUIRE(sent[i] + ef.residual()[i] == r1[i] + u2);
  }
  ef.reset();
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(ef.velocity()[i] == 0.0f);
    REQUIRE(ef.residual()[i] == 0.0f);
  }
}

TEST_CASE("without factor masking the velocity is momentum SGD's and only the accumulation is "
          "cleared (against sort-and-truncate)",
          "[momentum]") {
  // reference_call without masking: u is never zeroed
  const std::size_t n = GENERATE(1, 10, 3000);
  const float m = GENERATE(0.5f, 0.9f);
  const double density = 0.02;
  CAPTURE(n, m);
  error_feedback<exact_top_k> ef(n, exact_top_k(density),
                                 momentum_correction{.momentum = m, .factor_masking = false});
  CHECK(!ef.factor_masking());
  std::vector<float> u(n, 0.0f), r(n, 0.0f), sent(n);
  sparse_message msg;
  for (int it = 0; it < 6; ++it) {
    CAPTURE(it);
    const auto g = test::make_values(distribution::normal, n, 700 + it);
    const std::vector<float> expected = reference_call(u, r, g, m, density, false);
    ef.compress(g, msg);
    REQUIRE(msg.nnz() == reference_k(density, n));
    decompress(msg, sent);
    REQUIRE(same_bits(sent, expected));
    REQUIRE(same_bits(ef.residual(), r));
    REQUIRE(same_bits(ef.velocity(), u)); // sent elements keep their velocity
  }
}

namespace {
// A compressor of a user's own with only the five-argument momentum form (no factor-masking
// flag): error feedback without masking then runs the velocity update as its own pass.
struct five_argument_top_k {
  using compressor_concept = compressor_tag;
  exact_top_k inner{0.02};
  selection_stats compress(std::span<const float> x, sparse_message& m) {
    return inner.compress(x, m);
  }
  selection_stats
  compress_accumulate(std::span<float> r, std::span<const float> x, sparse_message& m) {
    return inner.compress_accumulate(r, x, m);
  }
  selection_stats compress_accumulate_momentum(std::span<float> r,
                                               std::span<float> u,
                                               std::span<const float> x,
                                               float momentum,
                                               sparse_message& m) {
    return inner.compress_accumulate_momentum(r, u, x, momentum, m);
  }
};
static_assert(momentum_compressor<five_argument_top_k> &&
              !kept_velocity_compressor<five_argument_top_k>);
} // namespace

TEST_CASE("a momentum compressor without the masking flag keeps the velocity in a pass of its "
          "own (against sort-and-truncate)",
          "[momentum]") {
  const std::size_t n = GENERATE(1, 10, 3000);
  const bool masking = GENERATE(true, false);
  const float m = 0.9f;
  CAPTURE(n, masking);
  error_feedback<five_argument_top_k> ef(
      n, five_argument_top_k{}, momentum_correction{.momentum = m, .factor_masking = masking});
  std::vector<float> u(n, 0.0f), r(n, 0.0f), sent(n);
  sparse_message msg;
  for (int it = 0; it < 6; ++it) {
    CAPTURE(it);
    const auto g = test::make_values(distribution::normal, n, 900 + it);
    const std::vector<float> expected = reference_call(u, r, g, m, 0.02, masking);
    ef.compress(g, msg);
    decompress(msg, sent);
    REQUIRE(same_bits(sent, expected));
    REQUIRE(same_bits(ef.residual(), r));
    REQUIRE(same_bits(ef.velocity(), u));
  }
}

TEST_CASE("a decaying velocity becomes exactly 0, never subnormal", "[momentum]") {
  // element 0: gradient 1 once, then 0 (a dead unit); element 1: a large gradient every call,
  // so top-1 always sends element 1 and element 0's velocity decays as 0.5^t in its residual
  error_feedback<exact_top_k> ef(2, exact_top_k(0.5),
                                 momentum_correction{.momentum = 0.5f, .factor_masking = false});
  sparse_message msg;
  double accumulated = 0;
  for (int t = 0; t < 200; ++t) {
    CAPTURE(t);
    const std::vector<float> g = {t == 0 ? 1.0f : 0.0f, 1000.0f};
    ef.compress(g, msg);
    REQUIRE(msg.indices == std::vector<std::uint32_t>{1});
    const float u = ef.velocity()[0];
    REQUIRE(std::fpclassify(u) != FP_SUBNORMAL);
    // 0.5^t exactly while that is a normal float (t <= 126), then 0
    REQUIRE(u == (t <= 126 ? std::ldexp(1.0f, -t) : 0.0f));
    accumulated += u;
  }
  CHECK(ef.residual()[0] == Approx(accumulated)); // the unsent velocities, all kept
  CHECK(ef.residual()[0] == Approx(2.0));
}

TEST_CASE("set_factor_masking switches masking from the next call and keeps the state "
          "(against sort-and-truncate)",
          "[momentum]") {
  // reference_call with masking from iteration 3 on (u zeroed where sent from then)
  const std::size_t n = GENERATE(10, 3000);
  const float m = 0.9f;
  const double density = 0.02;
  CAPTURE(n);
  error_feedback<exact_top_k> ef(n, exact_top_k(density),
                                 momentum_correction{.momentum = m, .factor_masking = false});
  std::vector<float> u(n, 0.0f), r(n, 0.0f), sent(n);
  sparse_message msg;
  for (int it = 0; it < 6; ++it) {
    CAPTURE(it);
    const bool masking = it >= 3;
    if (it == 3) {
      ef.set_factor_masking(true);
    }
    CHECK(ef.factor_masking() == masking);
    const auto g = test::make_values(distribution::normal, n, 1700 + it);
    const std::vector<float> expected = reference_call(u, r, g, m, density, masking);
    ef.compress(g, msg);
    decompress(msg, sent);
    REQUIRE(same_bits(sent, expected));
    REQUIRE(same_bits(ef.residual(), r));
    REQUIRE(same_bits(ef.velocity(), u));
  }
}

TEST_CASE("at density 1, momentum correction without factor masking is momentum SGD and with "
          "it plain SGD",
          "[momentum]") {
  const std::size_t n = 500;
  const float m = 0.9f;
  error_feedback<exact_top_k> kept(n, exact_top_k(1.0),
                                   momentum_correction{.momentum = m, .factor_masking = false});
  error_feedback<exact_top_k> masked(n, exact_top_k(1.0), momentum_correction{m});
  std::vector<float> u(n, 0.0f), sent(n);
  sparse_message msg;
  for (int it = 0; it < 5; ++it) {
    CAPTURE(it);
    const auto g = test::make_values(distribution::normal, n, 900 + it);
    for (std::size_t i = 0; i < n; ++i) {
      u[i] = m * u[i] + g[i]; // momentum SGD's update direction
    }
    kept.compress(g, msg);
    decompress(msg, sent);
    REQUIRE(same_bits(sent, u));
    masked.compress(g, msg);
    decompress(msg, sent);
    REQUIRE(same_bits(sent, g)); // every velocity zeroed each step: no momentum at all
  }
}

TEST_CASE("momentum correction refuses a momentum outside 0 to 1 and mismatched lengths",
          "[momentum]") {
  for (const double bad : {-0.1, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    REQUIRE_THROWS_WITH(
        (error_feedback<exact_top_k>(10, exact_top_k(0.1), momentum_correction{bad})),
        Catch::Contains("momentum") && Catch::Contains("outside [0, 1)"));
  }
  exact_top_k c(0.1);
  std::vector<float> r(10), u(9), g(10);
  sparse_message m;
  REQUIRE_THROWS_WITH(c.compress_accumulate_momentum(r, u, g, 0.9f, m),
                      Catch::Contains("velocity 9"));
  std::vector<float> u10(10);
  REQUIRE_THROWS_WITH(c.compress_accumulate_momentum(r, u10, g, 1.5f, m),
                      Catch::Contains("momentum 1.5"));
}

} // namespace compressor_momentum_correction_test
