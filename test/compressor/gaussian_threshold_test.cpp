// SPDX-License-Identifier: Apache-2.0
// gradcomp::gaussian_threshold and lognormal_threshold (compressor/gaussian_threshold.hpp): the
// selection is exactly what the fitted threshold says (checked by scanning the input), within
// the guard band, on every input shape; k is hit without a fallback on the data each model fits;
// the guard band falls back to exact top-k where the fit is badly off; options are validated.
#include <gradcomp/compressor/gaussian_threshold.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/estimator_testing.hpp"
#include "../common/generators.hpp"

namespace compressor_gaussian_threshold_test {

using namespace gradcomp;
using test::check_selection;
using test::distribution;
using test::run_static;

TEST_CASE("gaussian_threshold and lognormal_threshold select exactly what their threshold says",
          "[estimators]") {
  const auto dist = GENERATE(distribution::normal, distribution::heavy_tailed,
                             distribution::constant, distribution::tied, distribution::with_zeros);
  const std::size_t n = GENERATE(0, 1, 7, 1000, 200000);
  const double d = GENERATE(0.001, 0.01, 0.1);
  CAPTURE(test::name(dist), n, d);
  run_static(gaussian_threshold(d), dist, n, n + 3);
  run_static(lognormal_threshold(d), dist, n, n + 3);
}

TEST_CASE("Gaussian threshold hits k on Gaussian data without a fallback", "[estimators]") {
  const auto x = test::make_values(distribution::normal, 1 << 20, 1);
  gaussian_threshold c(0.01);
  sparse_message m;
  const auto s = c.compress(x, m);
  CHECK_FALSE(s.fallback);
  CHECK(std::abs(static_cast<double>(s.k_selected) / s.k_target - 1.0) < 0.05);
}

TEST_CASE("lognormal threshold hits k on lognormal data without a fallback", "[estimators]") {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<float> lognormal(0.0f, 1.0f);
  std::vector<float> x(1 << 20);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = (i % 2 ? -1.0f : 1.0f) * lognormal(rng);
  }
  lognormal_threshold c(0.01);
  sparse_message m;
  const auto s = c.compress(x, m);
  CHECK_FALSE(s.fallback);
  CHECK(std::abs(static_cast<double>(s.k_selected) / s.k_target - 1.0) < 0.05);
}

TEST_CASE("the guard band catches an estimator that is badly off", "[estimators]") {
  // Gaussian-k on two far-apart clusters: the fitted threshold selects nearly nothing or
  // nearly everything, so the guard must fall back to exact top-k.
  std::vector<float> x(100000, 1e-3f);
  for (std::size_t i = 0; i < x.size(); i += 50) {
    x[i] = 100.0f;
  }
  gaussian_threshold c({.density = 0.001, .guard_factor = 1.5});
  sparse_message m;
  const auto s = c.compress(x, m);
  CHECK(s.fallback);
  CHECK(s.exact);
  check_selection(x, m, s, 1.5);
}

TEST_CASE("gaussian and lognormal threshold options are validated", "[estimators]") {
  CHECK_THROWS_AS(gaussian_threshold(2.0), std::invalid_argument);
  CHECK_THROWS_AS(lognormal_threshold({.density = 0.1, .guard_factor = 0.99}),
                  std::invalid_argument);
}

} // namespace compressor_gaussian_threshold_test
