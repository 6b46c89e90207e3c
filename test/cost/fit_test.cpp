// SPDX-License-Identifier: Apache-2.0
// The least-squares line fit (cost/fit.hpp) against an exact line and a spoiled one; the ring
// allreduce's network recovered from times its alpha-beta formula (alpha_beta.hpp) predicts.
#include <gradcomp/cost/fit.hpp>

#include <array>
#include <span>

#include "../common/catch.hpp"

namespace cost_fit_test {

using namespace gradcomp::cost;

TEST_CASE("fit_line recovers an exact line and reports its quality", "[cost][fit]") {
  const std::array<double, 4> x{1e3, 4e3, 16e3, 64e3};
  std::array<double, 4> t{};
  for (std::size_t i = 0; i < x.size(); ++i) {
    t[i] = 5e-5 + 2e-9 * x[i];
  }
  const line_fit f = fit_line(x, t);
  CHECK(f.intercept == Approx(5e-5));
  CHECK(f.slope == Approx(2e-9));
  CHECK(f.r_squared == Approx(1.0));
  CHECK(f.max_relative_error < 1e-9);
  t[3] *= 1.5; // one bad point lowers the quality
  const line_fit g = fit_line(x, t);
  CHECK(g.r_squared < 0.999);
  CHECK(g.max_relative_error > 0.05);
  const std::array<double, 2> same{1.0, 1.0};
  CHECK_THROWS_AS(fit_line(same, same), std::invalid_argument);
  CHECK_THROWS_AS(
      fit_line(std::span<const double>(x).first(1), std::span<const double>(t).first(1)),
      std::invalid_argument);
}

TEST_CASE("ring_allreduce_network inverts the ring's alpha-beta formula", "[cost][fit]") {
  const network truth{3e-4, 9e-9, 0.0};
  for (const int p : {2, 3, 4, 16}) {
    INFO("ranks " << p);
    const std::array<double, 3> bytes{4096.0, 65536.0, 1048576.0};
    std::array<double, 3> seconds{};
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      seconds[i] = ring_allreduce_seconds(bytes[i], p, truth);
    }
    const network net = ring_allreduce_network(fit_line(bytes, seconds), p);
    CHECK(net.alpha_seconds == Approx(truth.alpha_seconds));
    CHECK(net.beta_seconds_per_byte == Approx(truth.beta_seconds_per_byte));
    CHECK(net.gamma_seconds_per_byte == 0.0);
  }
  // a negative intercept or slope (noise) clamps to 0; one rank sends nothing
  const network clamped = ring_allreduce_network({.intercept = -1e-3, .slope = -1e-9}, 4);
  CHECK(clamped.alpha_seconds == 0.0);
  CHECK(clamped.beta_seconds_per_byte == 0.0);
  const network alone = ring_allreduce_network({.intercept = 1.0, .slope = 1.0}, 1);
  CHECK(alone.alpha_seconds == 0.0);
  CHECK(alone.beta_seconds_per_byte == 0.0);
  CHECK_THROWS_WITH(ring_allreduce_network({}, 0), Catch::Contains("rank count 0 is below 1"));
}

} // namespace cost_fit_test
