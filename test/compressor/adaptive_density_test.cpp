// SPDX-License-Identifier: Apache-2.0
// gradcomp::adaptive_densities against a brute-force reference: bisection on the water level
// lambda of sum_i clamp(lambda w_i, m n_i, n_i) = d sum_i n_i in long double, on random layer
// sizes, weights and densities; worked examples by hand; the total, the clamping, the special
// cases and the errors.
#include <gradcomp/gradcomp.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../common/catch.hpp"

namespace compressor_adaptive_density_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

// The reference: bisection on lambda (200 halvings, long double).
std::vector<double>
reference(const std::vector<std::size_t>& n, const std::vector<double>& w, double d, double m) {
  using ld = long double;
  ld total = 0;
  for (const std::size_t x : n) {
    total += static_cast<ld>(x);
  }
  const ld budget = static_cast<ld>(d) * total;
  const auto f = [&](ld lambda) {
    ld sum = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      sum += std::clamp(lambda * static_cast<ld>(w[i]), static_cast<ld>(m) * n[i],
                        static_cast<ld>(n[i]));
    }
    return sum;
  };
  ld lo = 0;
  ld hi = 1;
  while (f(hi) < budget) {
    hi *= 2;
  }
  for (int i = 0; i < 200; ++i) {
    const ld mid = (lo + hi) / 2;
    (f(mid) < budget ? lo : hi) = mid;
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const ld k =
        std::clamp(hi * static_cast<ld>(w[i]), static_cast<ld>(m) * n[i], static_cast<ld>(n[i]));
    out.push_back(static_cast<double>(k / n[i]));
  }
  return out;
}

double sent(const std::vector<std::size_t>& n, const std::vector<double>& d) {
  double s = 0;
  for (std::size_t i = 0; i < n.size(); ++i) {
    s += d[i] * static_cast<double>(n[i]);
  }
  return s;
}

} // namespace

TEST_CASE("adaptive densities: worked examples", "[adaptive_density]") {
  // layer 2 wants 88.8 of its 10 elements: it is sent whole and the rest is shared 1:1
  const std::vector<std::size_t> n = {100, 1000, 10};
  auto d = adaptive_densities(n, std::vector<double>{1, 1, 8}, 0.1, 0.01);
  CHECK(d[0] == Approx(0.505).epsilon(1e-12));
  CHECK(d[1] == Approx(0.0505).epsilon(1e-12));
  CHECK(d[2] == 1.0);
  CHECK(sent(n, d) == Approx(111).epsilon(1e-12));
  // the floor: layer 1 would get 0.2 elements, gets min_density, layer 0 the rest
  const std::vector<std::size_t> two = {1000, 1000};
  d = adaptive_densities(two, std::vector<double>{1, 0.001}, 0.1, 0.05);
  CHECK(d[0] == Approx(0.15).epsilon(1e-12));
  CHECK(d[1] == 0.05);
  // weights proportional to the sizes: the uniform density
  d = adaptive_densities(n, std::vector<double>{10, 100, 1}, 0.05, 0.001);
  for (const double x : d) {
    CHECK(x == Approx(0.05).epsilon(1e-12));
  }
}

TEST_CASE("adaptive densities: special cases", "[adaptive_density]") {
  const std::vector<std::size_t> n = {10, 1000, 0};
  // all weights 0: uniform
  auto d = adaptive_densities(n, std::vector<double>{0, 0, 0}, 0.2, 0.01);
  CHECK(d == std::vector<double>{0.2, 0.2, 0.2});
  // the weighted layer cannot take the budget: it is whole, the other shares the rest
  d = adaptive_densities(n, std::vector<double>{1, 0, 5}, 0.5, 0.01);
  CHECK(d[0] == 1.0);
  CHECK(d[1] == Approx((505.0 - 10.0) / 1000.0).epsilon(1e-12));
  CHECK(d[2] == 0.5); // empty layer
  CHECK(sent(n, d) == Approx(505).epsilon(1e-12));
  // a weight of 0 among positive ones: min_density
  d = adaptive_densities(n, std::vector<double>{0, 1, 0}, 0.1, 0.01);
  CHECK(d[0] == 0.01);
  CHECK(d[1] == Approx((101.0 - 0.1) / 1000.0).epsilon(1e-12));
  // min_density == density: everyone at density
  d = adaptive_densities(n, std::vector<double>{3, 1, 0}, 0.1, 0.1);
  CHECK(d[0] == Approx(0.1).epsilon(1e-12));
  CHECK(d[1] == Approx(0.1).epsilon(1e-12));
  // density 1: every layer whole
  d = adaptive_densities(n, std::vector<double>{3, 1, 0}, 1.0, 0.5);
  CHECK(d[0] == 1.0);
  CHECK(d[1] == 1.0);
  // one layer: its density is the density
  d = adaptive_densities(std::vector<std::size_t>{77}, std::vector<double>{2.5}, 0.3, 0.01);
  CHECK(d[0] == Approx(0.3).epsilon(1e-12));
}

TEST_CASE("adaptive densities match the brute-force reference and keep the total",
          "[adaptive_density]") {
  std::mt19937_64 rng(2025);
  std::uniform_int_distribution<int> layers(1, 12);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int compared = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    CAPTURE(trial);
    const int L = layers(rng);
    std::vector<std::size_t> n;
    std::vector<double> w;
    for (int i = 0; i < L; ++i) {
      n.push_back(static_cast<std::size_t>(std::pow(10.0, 1.0 + 5.0 * unit(rng))));
      // log-uniform weights over 6 decades, some 0
      w.push_back(unit(rng) < 0.1 ? 0.0 : std::pow(10.0, -3.0 + 6.0 * unit(rng)));
    }
    const double density = std::pow(10.0, -3.0 + 3.0 * unit(rng));
    const double min_density = density * std::max(1e-3, unit(rng));
    CAPTURE(n, w, density, min_density);
    const std::vector<double> d = adaptive_densities(n, w, density, min_density);
    REQUIRE(d.size() == n.size());
    double total = 0;
    for (const std::size_t x : n) {
      total += static_cast<double>(x);
    }
    CHECK(sent(n, d) == Approx(density * total).epsilon(1e-9));
    for (std::size_t i = 0; i < n.size(); ++i) {
      CHECK(d[i] >= min_density);
      CHECK(d[i] <= 1.0);
    }
    // the reference's formula needs some positive weight that can absorb the budget
    double can_take = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      can_take += static_cast<double>(n[i]) * (w[i] > 0 ? 1.0 : min_density);
    }
    if (can_take <= density * total * (1 + 1e-9)) {
      continue;
    }
    ++compared;
    const std::vector<double> r = reference(n, w, density, min_density);
    for (std::size_t i = 0; i < n.size(); ++i) {
      CAPTURE(i);
      CHECK(d[i] == Approx(r[i]).epsilon(1e-9).margin(1e-15));
    }
  }
  CHECK(compared > 1500);
}

TEST_CASE("adaptive densities name bad input", "[adaptive_density]") {
  const std::vector<std::size_t> n = {10, 20};
  const std::vector<double> w = {1, 2};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(
      adaptive_densities(std::vector<std::size_t>{}, std::vector<double>{}, 0.1, 0.01),
      Contains("no layers"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, std::vector<double>{1}, 0.1, 0.01),
                      Contains("1 weights for 2 layers"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, std::vector<double>{1, -2}, 0.1, 0.01),
                      Contains("weight -2 of layer 1 must be finite and >= 0"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, std::vector<double>{nan, 1}, 0.1, 0.01),
                      Contains("weight nan of layer 0"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, w, 0.0, 0.01), Contains("density 0 is outside (0, 1]"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, w, 0.1, 0.2),
                      Contains("min_density 0.2 is outside (0, density] = (0, 0.1]"));
  REQUIRE_THROWS_WITH(adaptive_densities(n, w, 0.1, 0.0), Contains("min_density 0 is outside"));
  REQUIRE_THROWS_WITH(adaptive_densities(std::vector<std::size_t>{0, 0}, w, 0.1, 0.01),
                      Contains("the layers have no elements"));
}

} // namespace compressor_adaptive_density_test
