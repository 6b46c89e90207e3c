// SPDX-License-Identifier: Apache-2.0
// gradcomp::schedule::critical_regime (Accordion's detector) against the rule written out by
// hand: |n_i - n_(i-1)| / n_(i-1) >= eta, the first interval and the announced intervals after a
// learning-rate drop critical.
#include <gradcomp/schedule/critical_regime.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"

namespace schedule_critical_regime_test {

using gradcomp::schedule::critical_regime;

TEST_CASE("critical_regime: the first interval is critical, then the relative change decides",
          "[schedule][critical_regime]") {
  critical_regime r; // eta 0.5
  CHECK(r.critical());
  CHECK(r.observe(10.0));       // first: nothing to compare with
  CHECK_FALSE(r.observe(14.0)); // +40 %
  CHECK(r.last_change() == Approx(0.4));
  CHECK(r.observe(21.0));       // +50 %: at eta counts
  CHECK_FALSE(r.observe(11.0)); // -47.6 %
  CHECK(r.observe(5.0));        // -54.5 %
  CHECK(r.critical());
  CHECK_FALSE(r.observe(5.0)); // no change
  CHECK(r.last_change() == 0.0);
}

TEST_CASE("critical_regime: agrees with the rule on a random sequence",
          "[schedule][critical_regime]") {
  critical_regime r(0.3);
  double previous = 0;
  unsigned state = 12345;
  for (int i = 0; i < 1000; ++i) {
    state = state * 1103515245u + 12345u;
    const double norm = 1.0 + static_cast<double>(state % 1000) / 250.0; // [1, 5)
    const bool expected = i == 0 || std::abs(norm - previous) / previous >= 0.3;
    REQUIRE(r.observe(norm) == expected);
    previous = norm;
  }
}

TEST_CASE("critical_regime: a learning-rate drop makes the next intervals critical",
          "[schedule][critical_regime]") {
  critical_regime r;
  r.observe(1.0);
  CHECK_FALSE(r.observe(1.0));
  r.learning_rate_dropped(2);
  r.learning_rate_dropped(1); // a smaller count does not shorten it
  CHECK(r.observe(1.0));
  CHECK(r.observe(1.0));
  CHECK_FALSE(r.observe(1.0));
}

TEST_CASE("critical_regime: a zero norm, then any non-zero norm is a change",
          "[schedule][critical_regime]") {
  critical_regime r;
  r.observe(0.0);
  CHECK_FALSE(r.observe(0.0));
  CHECK(r.observe(1e-30));
  CHECK(std::isinf(r.last_change()));
}

TEST_CASE("critical_regime: bad values are refused naming them", "[schedule][critical_regime]") {
  CHECK_THROWS_WITH(critical_regime(0.0), Catch::Contains("eta 0 is not a finite value above 0"));
  CHECK_THROWS_AS(critical_regime(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  critical_regime r;
  CHECK_THROWS_WITH(r.observe(-1.0), Catch::Contains("gradient norm -1 is not a finite value"));
  CHECK_THROWS_AS(r.observe(std::numeric_limits<double>::infinity()), std::invalid_argument);
  CHECK_THROWS_WITH(r.learning_rate_dropped(0), Catch::Contains("0 intervals"));
}

TEST_CASE("critical_regime: a detector resumed from state() answers as the original",
          "[schedule][critical_regime]") {
  unsigned seed = 777;
  const auto next_norm = [&seed] {
    seed = seed * 1103515245u + 12345u;
    return 1.0 + static_cast<double>(seed % 1000) / 250.0;
  };
  for (int saved_at : {0, 1, 5}) {
    INFO("saved after " << saved_at << " intervals");
    critical_regime a(0.3);
    for (int i = 0; i < saved_at; ++i) {
      a.observe(next_norm());
    }
    a.learning_rate_dropped(2); // pending drops are part of the state
    critical_regime b(a.state());
    CHECK(b.critical() == a.critical());
    CHECK(b.eta() == a.eta());
    CHECK((b.last_change() == a.last_change() ||
           (std::isinf(a.last_change()) && std::isinf(b.last_change()))));
    for (int i = 0; i < 20; ++i) {
      const double norm = next_norm();
      REQUIRE(b.observe(norm) == a.observe(norm));
      REQUIRE(b.last_change() == a.last_change());
    }
  }
  critical_regime::state_type bad;
  bad.previous = -1.0;
  CHECK_THROWS_WITH(critical_regime{bad}, Catch::Contains("saved norm -1"));
  bad = {};
  bad.dropped_intervals = -2;
  CHECK_THROWS_WITH(critical_regime{bad}, Catch::Contains("saved -2 intervals"));
  bad = {};
  bad.eta = 0.0;
  CHECK_THROWS_WITH(critical_regime{bad}, Catch::Contains("eta 0"));
}

} // namespace schedule_critical_regime_test
