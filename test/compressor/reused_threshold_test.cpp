// SPDX-License-Identifier: Apache-2.0
// gradcomp::reused_threshold (compressor/reused_threshold.hpp): an exact selection on calls 0, s,
// 2s, ... and the remembered threshold in between (the selection checked by scanning the input);
// a fallback that re-learns when the scale changes; options are validated.
#include <gradcomp/compressor/reused_threshold.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/estimator_testing.hpp"
#include "../common/generators.hpp"

namespace compressor_reused_threshold_test {

using namespace gradcomp;
using test::check_selection;
using test::distribution;

TEST_CASE("reused threshold refreshes exactly on calls 0, s, 2s, ...", "[estimators]") {
  const std::uint64_t interval = GENERATE(1, 3, 10);
  CAPTURE(interval);
  reused_threshold c({.density = 0.01, .interval = interval, .guard_factor = 1e6});
  sparse_message m;
  float remembered = 0.0f;
  for (std::uint64_t call = 0; call < 25; ++call) {
    const auto x = test::make_values(distribution::normal, 20000, call, 1.0f + 0.01f * call);
    const auto s = c.compress(x, m);
    CAPTURE(call);
    REQUIRE(s.exact == (call % interval == 0));
    REQUIRE_FALSE(s.fallback); // the band is effectively infinite here
    if (s.exact) {
      REQUIRE(s.k_selected == s.k_target);
      remembered = s.threshold;
    } else {
      REQUIRE(s.threshold == remembered);
    }
    check_selection(x, m, s, 1e6);
  }
  CHECK(c.calls() == 25);
}

TEST_CASE("reused threshold falls back and re-learns when the scale changes", "[estimators]") {
  reused_threshold c({.density = 0.01, .interval = 100});
  sparse_message m;
  auto s = c.compress(test::make_values(distribution::normal, 50000, 1), m);
  REQUIRE(s.exact);
  // gradients 10x smaller: the old threshold would select almost nothing
  s = c.compress(test::make_values(distribution::normal, 50000, 2, 0.1f), m);
  CHECK(s.fallback);
  CHECK(s.k_selected == s.k_target);
  const float relearned = s.threshold;
  s = c.compress(test::make_values(distribution::normal, 50000, 3, 0.1f), m);
  CHECK_FALSE(s.fallback);
  CHECK(s.threshold == relearned);
  CHECK(in_guard_band(s.k_selected, s.k_target, 2.0));
}

TEST_CASE("reused threshold options are validated", "[estimators]") {
  CHECK_THROWS_AS(reused_threshold({.density = 0.01, .interval = 0}), std::invalid_argument);
  CHECK_THROWS_AS(reused_threshold({.density = 0.01, .guard_factor = 0.5}), std::invalid_argument);
}

} // namespace compressor_reused_threshold_test
