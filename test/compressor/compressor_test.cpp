// SPDX-License-Identifier: Apache-2.0
// k = ceil(density x n) clamped to [1, n]; invalid densities are rejected by name.
#include <gradcomp/compressor/compressor.hpp>

#include <cmath>
#include <limits>

#include "../common/catch.hpp"

namespace compressor_compressor_test {

using gradcomp::k_for_density;

TEST_CASE("k_for_density is ceil(density x n) clamped to 1..n", "[compressor][k]") {
  CHECK(k_for_density(0, 0.5) == 0);
  CHECK(k_for_density(1, 0.001) == 1);
  CHECK(k_for_density(1000, 0.001) == 1);
  CHECK(k_for_density(1001, 0.001) == 2);
  CHECK(k_for_density(100, 1.0) == 100);
  CHECK(k_for_density(3, 0.5) == 2);
  // binary rounding must not add one: 0.07 x 100 is 7.000000000000001 in double
  CHECK(k_for_density(100, 0.07) == 7);
  CHECK(k_for_density(1000, 0.29) == 290);
  CHECK(k_for_density(std::size_t{1} << 24, 0.01) == 167773);
}

TEST_CASE("densities outside 0 < d <= 1 are rejected with the value in the message",
          "[compressor][k]") {
  for (double bad : {0.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(k_for_density(10, bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(k_for_density(10, 1.5), Catch::Contains("1.5") && Catch::Contains("(0, 1]"));
}

TEST_CASE("the guard band is k/c to c k", "[compressor][guard]") {
  CHECK(gradcomp::in_guard_band(5, 10, 2.0));
  CHECK_FALSE(gradcomp::in_guard_band(4, 10, 2.0));
  CHECK(gradcomp::in_guard_band(20, 10, 2.0));
  CHECK_FALSE(gradcomp::in_guard_band(21, 10, 2.0));
  CHECK_FALSE(gradcomp::in_guard_band(0, 1, 2.0));
  CHECK(gradcomp::in_guard_band(10, 10, 1.0));
  CHECK_FALSE(gradcomp::in_guard_band(11, 10, 1.0));
}

} // namespace compressor_compressor_test
