// SPDX-License-Identifier: Apache-2.0
// DGC's density warm-up (gradcomp::density_warmup) against its formula computed another way,
// and changing a compressor's density between calls (density_compressor::set_density, the
// pipeline's set_density / set_layer_densities): k follows the new density, error feedback's
// conservation stays bit-exact, and the pipeline's averages equal per-layer error feedback
// whose compressors were given the same densities.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/first_failure.hpp"
#include "../common/generators.hpp"

namespace pipeline_pipeline_density_test {

using namespace gradcomp;
using Catch::Contains;
using pipeline_policy::fixed_grouping;

namespace {

// d0 x r^e with r = (dT / d0)^(1/E) computed by exp/log, and e multiplications (not pow).
double reference_density(double d0, double dT, double E, double e) {
  const double r = std::exp(std::log(dT / d0) / E);
  double d = d0;
  for (int i = 0; i < static_cast<int>(e); ++i) {
    d *= r;
  }
  return d;
}

} // namespace

TEST_CASE("density warm-up follows DGC's schedule per epoch", "[density_warmup]") {
  const density_warmup w{.initial_density = 0.25, .final_density = 0.001, .warmup_epochs = 4};
  REQUIRE_NOTHROW(w.validate());
  for (int e = 0; e < 4; ++e) {
    CAPTURE(e);
    CHECK(w.at_epoch(e) == Approx(reference_density(0.25, 0.001, 4, e)).epsilon(1e-12));
    // constant within the epoch (stepped)
    CHECK(w.at_epoch(e + 0.999) == w.at_epoch(e));
  }
  // DGC's rounded values (25 %, 6.25 %, 1.5625 %, 0.4 %, 0.1 %) within 1.5 %
  const double dgc[] = {0.25, 0.0625, 0.015625, 0.004, 0.001};
  for (int e = 0; e < 5; ++e) {
    CHECK(std::abs(w.at_epoch(e) / dgc[e] - 1.0) < 0.015);
  }
  // the target exactly from epoch E on
  CHECK(w.at_epoch(4.0) == 0.001);
  CHECK(w.at_epoch(17.5) == 0.001);
  CHECK(w.at_epoch(0.0) == 0.25);
}

TEST_CASE("density warm-up by iteration, continuous, fractional and zero warm-up",
          "[density_warmup]") {
  const density_warmup w{.initial_density = 0.5, .final_density = 0.01, .warmup_epochs = 3};
  const std::uint64_t per_epoch = 7;
  double previous = 1.0;
  for (std::uint64_t i = 0; i < 5 * per_epoch; ++i) {
    CAPTURE(i);
    const double d = w.at_iteration(i, per_epoch);
    CHECK(d == w.at_epoch(static_cast<double>(i / per_epoch)));
    CHECK(d <= previous); // never rises
    CHECK(d >= 0.01);
    CHECK(d <= 0.5);
    previous = d;
  }
  density_warmup c = w;
  c.stepped = false;
  CHECK(c.at_epoch(1.5) == Approx(0.5 * std::pow(0.02, 0.5)).epsilon(1e-12));
  CHECK(c.at_iteration(3, 2) == c.at_epoch(1.5));
  CHECK(c.at_epoch(3.0) == 0.01);
  // a fractional warm-up: the epoch that holds E switches at E
  const density_warmup f{.initial_density = 0.25, .final_density = 0.01, .warmup_epochs = 2.5};
  CHECK(f.at_epoch(2.4) == Approx(0.25 * std::pow(0.04, 2.0 / 2.5)).epsilon(1e-12));
  CHECK(f.at_epoch(2.5) == 0.01);
  // no warm-up: always the target
  const density_warmup off{.initial_density = 0.25, .final_density = 0.01, .warmup_epochs = 0};
  CHECK(off.at_epoch(0.0) == 0.01);
  CHECK(off.at_iteration(0, 3) == 0.01);
  // initial == final: constant
  const density_warmup flat{.initial_density = 0.1, .final_density = 0.1, .warmup_epochs = 2};
  CHECK(flat.at_epoch(0.5) == 0.1);
}

TEST_CASE("density warm-up names bad values", "[density_warmup]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto bad = [](density_warmup w, const char* text) {
    CAPTURE(text);
    REQUIRE_THROWS_AS(w.validate(), std::invalid_argument);
    REQUIRE_THROWS_WITH(w.at_epoch(0.0), Contains(text));
  };
  bad({.initial_density = 0.25, .final_density = 0.0}, "final_density 0 is outside (0, 1]");
  bad({.initial_density = 1.0, .final_density = 1.5}, "final_density 1.5 is outside (0, 1]");
  bad({.initial_density = nan, .final_density = 0.1}, "initial_density nan is outside (0, 1]");
  bad({.initial_density = 0.01, .final_density = 0.1}, "initial_density 0.01 is below");
  bad({.warmup_epochs = -1.0}, "warmup_epochs -1 must be finite and >= 0");
  bad({.warmup_epochs = nan}, "warmup_epochs nan");
  const density_warmup w;
  REQUIRE_THROWS_WITH(w.at_epoch(-0.5), Contains("epoch -0.5 must be finite and >= 0"));
  REQUIRE_THROWS_WITH(w.at_iteration(3, 0), Contains("iterations_per_epoch 0 is below"));
}

TEST_CASE("set_density changes k from the next call and refuses bad densities",
          "[density_warmup][set_density]") {
  const auto x = test::make_values(test::distribution::normal, 1000, 3);
  sparse_message m;
  exact_top_k c(0.1);
  CHECK(c.compress(x, m).k_selected == 100);
  c.set_density(0.013);
  CHECK(c.density() == 0.013);
  CHECK(c.compress(x, m).k_selected == k_for_density(1000, 0.013));
  REQUIRE_THROWS_WITH(c.set_density(0.0), Contains("density 0 is outside (0, 1]"));
  REQUIRE_THROWS_WITH(c.set_density(1.25), Contains("density 1.25 is outside (0, 1]"));
  CHECK(c.density() == 0.013); // unchanged

  // size_switch: the large compressor's density; small layers stay dense
  size_switch s(500, dense(), exact_top_k(0.1));
  s.set_density(0.02);
  CHECK(s.density() == 0.02);
  CHECK(s.compress(x, m).k_selected == 20);
  const std::vector<float> small(x.begin(), x.begin() + 100);
  CHECK(s.compress(small, m).k_selected == 100);

  // reused_threshold: the call after a change is exact; setting the same density is no change
  reused_threshold r(reused_threshold_options{.density = 0.1, .interval = 100});
  CHECK(r.compress(x, m).exact);
  CHECK_FALSE(r.compress(x, m).exact);
  r.set_density(0.05);
  const selection_stats after = r.compress(x, m);
  CHECK(after.exact);
  CHECK(after.k_selected == 50);
  CHECK_FALSE(r.compress(x, m).exact);
  r.set_density(0.05);
  CHECK_FALSE(r.compress(x, m).exact);
  CHECK(r.calls() == 5);
}

TEMPLATE_TEST_CASE("error feedback conserves every value across a density warm-up",
                   "[density_warmup][error_feedback]",
                   exact_top_k,
                   reused_threshold,
                   sampled_threshold,
                   gaussian_threshold) {
  const std::size_t n = 3000;
  const density_warmup w{.initial_density = 0.25, .final_density = 0.004, .warmup_epochs = 3};
  error_feedback<TestType> ef(n, TestType(typename TestType::options{.density = 0.25}));
  sparse_message m;
  std::vector<float> sent(n);
  for (std::uint64_t it = 0; it < 20; ++it) {
    const double d = w.at_iteration(it, 4);
    ef.compressor().set_density(d);
    const auto g = test::make_values(test::distribution::heavy_tailed, n, 100 + it);
    const std::vector<float> old(ef.residual().begin(), ef.residual().end());
    const selection_stats s = ef.compress(g, m);
    CHECK(s.k_target == k_for_density(n, d));
    if constexpr (std::is_same_v<TestType, exact_top_k>) {
      CHECK(s.k_selected == k_for_density(n, d));
    }
    decompress(m, sent);
    REQUIRE(test::first_unconserved(sent, ef.residual(), old, g) == n);
  }
}

namespace {

// The pipeline (loopback, per layer) against one error feedback per layer whose compressor gets
// the same densities: bit-identical averages and residuals.
template <class Compressor>
void check_pipeline_densities(const Compressor& prototype, bool per_layer_densities) {
  const std::vector<std::size_t> sizes = {300, 17, 1200, 64, 800};
  loopback_exchange t;
  pipeline<Compressor, loopback_exchange> p(
      sizes, fixed_grouping{schedule::grouping{{0, 2}, {2, 5}}}, prototype, t);
  std::vector<error_feedback<Compressor>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, prototype);
  }
  const density_warmup w{.initial_density = 0.3, .final_density = 0.01, .warmup_epochs = 2};
  sparse_message m;
  for (int it = 0; it < 8; ++it) {
    CAPTURE(it);
    std::vector<double> d(sizes.size(), w.at_iteration(static_cast<std::uint64_t>(it), 3));
    if (per_layer_densities) {
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        d[l] = std::min(1.0, d[l] * static_cast<double>(l + 1) / 2.0);
      }
      p.set_layer_densities(d);
    } else {
      p.set_density(d[0]);
    }
    std::vector<std::vector<float>> grads;
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      grads.push_back(test::make_values(test::distribution::normal, sizes[l],
                                        static_cast<std::uint64_t>(1000 * it + l)));
    }
    for (std::size_t l = sizes.size(); l-- > 0;) {
      p.gradient_ready(l, grads[l]);
    }
    p.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(l);
      reference[l].compressor().set_density(d[l]);
      const selection_stats s = reference[l].compress(grads[l], m);
      CHECK(p.last_stats().layers[l].k_target == s.k_target);
      CHECK(p.last_stats().layers[l].k_selected == s.k_selected);
      std::vector<float> expected(sizes[l]);
      decompress(m, expected);
      const auto got = p.averaged(l);
      REQUIRE(std::vector<float>(got.begin(), got.end()) == expected);
      const auto r = p.residual(l);
      REQUIRE(std::vector<float>(r.begin(), r.end()) ==
              std::vector<float>(reference[l].residual().begin(), reference[l].residual().end()));
    }
  }
}

} // namespace

TEST_CASE("pipeline set_density and set_layer_densities match per-layer error feedback",
          "[density_warmup][pipeline]") {
  const bool per_layer = GENERATE(false, true);
  CAPTURE(per_layer);
  check_pipeline_densities(exact_top_k(0.3), per_layer);
  check_pipeline_densities(
      reused_threshold(reused_threshold_options{.density = 0.3, .interval = 4}), per_layer);
  check_pipeline_densities(size_switch(100, dense(), exact_top_k(0.3)), per_layer);
}

TEST_CASE("pipeline set_density per group, and its misuse", "[density_warmup][pipeline]") {
  const std::vector<std::size_t> sizes = {300, 500, 200};
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange> p(sizes, fixed_grouping{schedule::grouping{{0, 3}}},
                                             exact_top_k(0.5), t, momentum_correction{},
                                             compression_scope::per_group);
  p.set_density(0.02);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    p.gradient_ready(l, test::make_values(test::distribution::normal, sizes[l], l));
  }
  p.finish();
  CHECK(p.last_stats().selected == k_for_density(1000, 0.02));
  const std::vector<double> d = {0.1, 0.1, 0.1};
  REQUIRE_THROWS_WITH(p.set_layer_densities(d), Contains("needs compression_scope::per_layer"));
  REQUIRE_THROWS_WITH(p.set_density(2.0), Contains("density 2 is outside (0, 1]"));

  pipeline<exact_top_k, loopback_exchange> q(sizes, fixed_grouping{}, exact_top_k(0.5), t);
  const std::vector<double> two = {0.1, 0.1};
  REQUIRE_THROWS_WITH(q.set_layer_densities(two), Contains("2 densities for 3 layers"));
  const std::vector<double> bad = {0.1, -0.1, 0.1};
  REQUIRE_THROWS_WITH(q.set_layer_densities(bad), Contains("density -0.1 is outside (0, 1]"));
  q.gradient_ready(0, test::make_values(test::distribution::normal, 300, 1));
  REQUIRE_THROWS_WITH(q.set_density(0.1), Contains("set_density() while an iteration"));
  REQUIRE_THROWS_WITH(q.set_layer_densities(d),
                      Contains("set_layer_densities() while an iteration"));
}

} // namespace pipeline_pipeline_density_test
