// SPDX-License-Identifier: Apache-2.0
// The least-squares line fit (cost/fit.hpp) against an exact line and a spoiled one.
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

} // namespace cost_fit_test
