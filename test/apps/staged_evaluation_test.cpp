// SPDX-License-Identifier: Apache-2.0
// Staged evaluation (apps/common/staged_evaluation.hpp): the stages tile each rank's shard, the
// early stop matches hand-computed bounds, and on random prefixes of a test set whose accuracy
// equals the target it stops no more often than 3 standard errors allow, while it stops nearly
// always for a model 3.5 points below the target.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../../apps/common/sample_order.hpp"
#include "../../apps/common/staged_evaluation.hpp"
#include "../common/catch.hpp"

namespace gx = gradcomp_apps;

TEST_CASE("staged evaluation: the stages tile the range in order") {
  for (const std::int64_t len : {0, 1, 7, 625, 2500, 2501}) {
    for (int stages = 1; stages <= 9; ++stages) {
      std::int64_t next = 13;
      for (int s = 0; s < stages; ++s) {
        const auto [first, last] = gx::stage_range(13, 13 + len, s, stages);
        REQUIRE(first == next);
        REQUIRE(last >= first);
        REQUIRE(last - first <= len / stages + 1);
        next = last;
      }
      REQUIRE(next == 13 + len);
    }
  }
}

TEST_CASE("staged evaluation: the early stop against hand-computed bounds") {
  // 2000 of 2500 right: p 0.8, se sqrt(0.16 / 2500 x 7500 / 9999) = 0.00693, 0.8208 < 0.905
  CHECK(gx::can_stop_early(2000, 2500, 10000, 0.905));
  // 2230 of 2500: p 0.892, se 0.00538, p + 3 se = 0.9081 >= 0.905: go on
  CHECK_FALSE(gx::can_stop_early(2230, 2500, 10000, 0.905));
  // 2210 of 2500: p 0.884, se 0.00554, 0.9006 < 0.905
  CHECK(gx::can_stop_early(2210, 2500, 10000, 0.905));
  CHECK_FALSE(gx::can_stop_early(0, 2500, 10000, 0.0));       // no target
  CHECK_FALSE(gx::can_stop_early(5000, 10000, 10000, 0.905)); // all seen: nothing to save
  CHECK_FALSE(gx::can_stop_early(0, 0, 10000, 0.905));        // nothing seen
  CHECK(gx::can_stop_early(0, 1, 10000, 0.905));              // 0 of 1 with se 0
}

namespace {

// Fraction of `trials` random orders of a test set with `right` of `total` classified right
// whose first `seen` images let the evaluation stop early at `target`.
double
stop_rate(std::int64_t right, std::int64_t total, std::int64_t seen, double target, int trials) {
  std::vector<int> outcome(static_cast<std::size_t>(total), 0);
  std::fill(outcome.begin(), outcome.begin() + right, 1);
  int stops = 0;
  for (int t = 0; t < trials; ++t) {
    const std::vector<std::int64_t> order = gx::epoch_order(total, 99, t);
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < seen; ++i) {
      correct += outcome[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
    }
    stops += gx::can_stop_early(correct, seen, total, target) ? 1 : 0;
  }
  return static_cast<double>(stops) / trials;
}

} // namespace

TEST_CASE("staged evaluation: wrong stops are rare at the target, stops sure far below it") {
  // accuracy exactly at the target: a stop would hide the crossing. The exact hypergeometric
  // rate is 0.022 % (4000 trials expect ~1); 2 standard errors would give 0.91 %
  CHECK(stop_rate(905, 1000, 250, 0.905, 4000) < 0.004);
  // 3.5 points below the target: the first quarter of 10,000 images suffices nearly always
  // (exactly: 99.94 %)
  CHECK(stop_rate(8700, 10000, 2500, 0.905, 400) > 0.99);
}
