// SPDX-License-Identifier: Apache-2.0
// Loss scaling (precision/loss_scale.hpp): the dynamic scale's back-off, growth and bounds, the
// static scale, checkpoint state, overflow detection per wire type, and error feedback across
// scale changes: rescaling the residual loses nothing (unscaled sent + residual == the sum of
// the true gradients).
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace precision_loss_scale_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

TEST_CASE("loss scale: dynamic back-off and growth", "[loss_scale]") {
  loss_scale s({.initial_scale = 1024, .growth_interval = 3});
  CHECK(s.scale() == 1024);
  CHECK(s.inverse() == 1.0 / 1024);
  auto st = s.update(false);
  CHECK((st.apply && st.factor == 1.0 && s.scale() == 1024));
  s.update(false);
  st = s.update(false); // third clean step in a row: grows
  CHECK((st.apply && st.factor == 2.0 && s.scale() == 2048));
  st = s.update(true); // overflow: skipped, halved
  CHECK((!st.apply && st.factor == 0.5 && s.scale() == 1024));
  s.update(false);
  s.update(false);
  st = s.update(true); // the clean run restarts after an overflow
  CHECK((!st.apply && s.scale() == 512));
  CHECK(s.steps() == 7);
  CHECK(s.skipped_steps() == 2);
}

TEST_CASE("loss scale: bounds and the static scale", "[loss_scale]") {
  loss_scale low({.initial_scale = 2, .min_scale = 1});
  low.update(true);
  const auto st = low.update(true);
  CHECK((!st.apply && st.factor == 1.0 && low.scale() == 1));
  loss_scale high({.initial_scale = 8, .growth_interval = 1, .max_scale = 16});
  high.update(false);
  CHECK(high.update(false).factor == 1.0);
  CHECK(high.scale() == 16);
  loss_scale fixed({.initial_scale = 128, .dynamic = false, .growth_interval = 1});
  const auto skipped = fixed.update(true);
  CHECK((!skipped.apply && skipped.factor == 1.0 && fixed.scale() == 128));
  CHECK(fixed.update(false).factor == 1.0);
  CHECK(fixed.scale() == 128);
}

TEST_CASE("loss scale: checkpoint state resumes the same sequence", "[loss_scale]") {
  loss_scale a({.initial_scale = 256, .growth_interval = 2});
  a.update(false);
  a.update(true);
  a.update(false);
  loss_scale b({.initial_scale = 256, .growth_interval = 2});
  b.restore(a.state());
  for (const bool overflow : {false, false, true, false, false, false}) {
    const auto x = a.update(overflow);
    const auto y = b.update(overflow);
    REQUIRE((x.apply == y.apply && x.factor == y.factor && a.scale() == b.scale()));
  }
  CHECK(b.skipped_steps() == a.skipped_steps());
  CHECK_THROWS_WITH(b.restore({.scale = 0.5}), Contains("restored scale 0.5"));
}

TEST_CASE("loss scale: bad options are named", "[loss_scale][errors]") {
  CHECK_THROWS_WITH(loss_scale({.backoff_factor = 1.0}), Contains("backoff_factor 1"));
  CHECK_THROWS_WITH(loss_scale({.growth_factor = 1.0}), Contains("growth_factor 1"));
  CHECK_THROWS_WITH(loss_scale({.growth_interval = 0}), Contains("growth_interval 0"));
  CHECK_THROWS_WITH(loss_scale({.initial_scale = 1e9}), Contains("initial_scale 1e+09"));
  CHECK_THROWS_WITH(loss_scale({.min_scale = 0.0}), Contains("min_scale 0"));
}

TEST_CASE("loss scale: overflow per wire type", "[loss_scale]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(has_overflow(std::vector<float>{1.0f, -3e38f}));
  CHECK(has_overflow(std::vector<float>{1.0f, -inf}));
  CHECK(has_overflow(std::vector<float>{nan, 0.0f}));
  CHECK_FALSE(has_overflow(std::vector<float>{65504.0f, -65504.0f}, value_type::fp16));
  CHECK(has_overflow(std::vector<float>{0.0f, 65520.0f}, value_type::fp16));
  CHECK_FALSE(has_overflow(std::vector<float>{3.3895e38f}, value_type::bf16));
  CHECK(has_overflow(std::vector<float>{3.39e38f}, value_type::bf16));
  // the limit is where rounding to the wire type stops being finite or exact in range
  CHECK(round_to(value_type::bf16, max_finite(value_type::bf16)) == max_finite(value_type::bf16));
  CHECK(round_to(value_type::fp16, max_finite(value_type::fp16)) == 65504.0f);
  // error feedback's sum: each part alone is in range, the sum is not
  const std::vector<float> r{60000.0f, 1.0f};
  const std::vector<float> g{6000.0f, 1.0f};
  CHECK_FALSE(has_overflow(r, value_type::fp16));
  CHECK(has_overflow(r, g, value_type::fp16));
  CHECK_THROWS_WITH(has_overflow(r, std::vector<float>{1.0f}), Contains("residual has 2"));
}

TEST_CASE("loss scale: error feedback across scale changes loses nothing", "[loss_scale]") {
  // True gradients g_t; the exchange sees S_t g_t in fp16 through top-k with error feedback.
  // After each step the residual is rescaled by the scale's factor. Then
  // sum_t sent_t / S_t + residual / S_T equals sum_t g_t (up to float rounding).
  const std::size_t n = 2000;
  error_feedback<exact_top_k> ef(n, exact_top_k({.density = 0.05, .values = value_type::fp16}));
  loss_scale scale({.initial_scale = 4096, .growth_interval = 2});
  std::vector<double> true_sum(n, 0.0), delivered(n, 0.0);
  sparse_message m;
  std::vector<float> sent(n);
  for (int t = 0; t < 12; ++t) {
    const auto g = test::make_values(test::distribution::normal, n, 40 + t, 0.01f);
    std::vector<float> scaled(n);
    for (std::size_t i = 0; i < n; ++i) {
      true_sum[i] += g[i];
      scaled[i] = static_cast<float>(g[i] * scale.scale());
    }
    ef.compress(scaled, m);
    decompress(m, sent);
    for (std::size_t i = 0; i < n; ++i) {
      delivered[i] += sent[i] / scale.scale();
    }
    // every third step pretends an overflow elsewhere (the scale halves; this step's update is
    // still counted here, as this test follows values, not the optimizer)
    const auto step = scale.update(t % 3 == 2);
    ef.rescale(static_cast<float>(step.factor));
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double got = delivered[i] + ef.residual()[i] / scale.scale();
    worst = std::max(worst, std::abs(got - true_sum[i]));
  }
  CHECK(worst < 1e-6); // |g| ~ 0.01 x 12 steps; float rounding of the scaled values ~ 1e-9
}

TEST_CASE("loss scale: pipeline::rescale_state scales every residual and velocity exactly",
          "[loss_scale]") {
  const std::vector<std::size_t> sizes{300, 7, 1000};
  for (const auto scope : {compression_scope::per_layer, compression_scope::per_group}) {
    CAPTURE(scope == compression_scope::per_layer);
    loopback_exchange transport;
    pipeline p(sizes, pipeline_policy::fixed_grouping{}, exact_top_k(0.1), transport,
               momentum_correction{0.9}, scope);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      p.gradient_ready(l, test::make_values(test::distribution::normal, sizes[l], 9 + l, 3.0f));
    }
    p.finish();
    std::vector<std::vector<float>> residual, velocity;
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      residual.emplace_back(p.residual(l).begin(), p.residual(l).end());
      velocity.emplace_back(p.velocity(l).begin(), p.velocity(l).end());
      REQUIRE(has_overflow(residual.back()) == false);
    }
    REQUIRE(std::count(residual[2].begin(), residual[2].end(), 0.0f) < 500); // mostly unsent
    REQUIRE(std::count(velocity[2].begin(), velocity[2].end(), 0.0f) < 500);
    p.rescale_state(0.25f);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      REQUIRE(p.residual(l).size() == sizes[l]);
      REQUIRE(p.velocity(l).size() == sizes[l]);
      for (std::size_t i = 0; i < sizes[l]; ++i) {
        REQUIRE(p.residual(l)[i] == residual[l][i] * 0.25f);
        REQUIRE(p.velocity(l)[i] == velocity[l][i] * 0.25f);
      }
    }
    p.gradient_ready(0, std::vector<float>(sizes[0], 1.0f));
    CHECK_THROWS_WITH(p.rescale_state(2.0f), Contains("iteration is under way"));
    for (std::size_t l = 1; l < sizes.size(); ++l) {
      p.gradient_ready(l, std::vector<float>(sizes[l], 1.0f));
    }
    p.finish();
  }
}

TEST_CASE("loss scale: drop_non_finite_state clears what an overflowed step left", "[loss_scale]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::size_t> sizes{100, 50};
  for (const auto scope : {compression_scope::per_layer, compression_scope::per_group}) {
    CAPTURE(scope == compression_scope::per_layer);
    loopback_exchange transport;
    // k = 1 per layer (per group: 2): one non-finite value is sent, the others stay behind
    pipeline p(sizes, pipeline_policy::fixed_grouping{}, exact_top_k(0.01), transport, {}, scope);
    std::vector<float> g0 = test::make_values(test::distribution::normal, 100, 1);
    std::vector<float> g1 = test::make_values(test::distribution::normal, 50, 2);
    g0[3] = nan;
    g0[40] = nan;
    g0[41] = -inf;
    g1[7] = inf;
    p.gradient_ready(1, g1);
    p.gradient_ready(0, g0);
    p.finish();
    const bool left = has_overflow(p.residual(0)) || has_overflow(p.residual(1));
    REQUIRE(left);
    const std::vector<float> before(p.residual(0).begin(), p.residual(0).end());
    const std::size_t dropped = p.drop_non_finite_state();
    CHECK(dropped == 2); // NaN at 40, -inf at 41 (layer 1 sent its only one)
    CHECK_FALSE(has_overflow(p.residual(0)));
    CHECK_FALSE(has_overflow(p.residual(1)));
    for (std::size_t i = 0; i < before.size(); ++i) {
      if (std::isfinite(before[i])) {
        REQUIRE(p.residual(0)[i] == before[i]); // finite values are kept
      }
    }
  }
}

} // namespace precision_loss_scale_test
