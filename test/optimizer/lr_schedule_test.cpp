// SPDX-License-Identifier: Apache-2.0
// The learning-rate schedules (optimizer/lr_schedule.hpp): warm-up + polynomial decay worked by
// hand; warm-up + step decay against a step-by-step reference that multiplies the rate as it
// passes each milestone; bad schedules named in the exception.
#include <gradcomp/optimizer/lr_schedule.hpp>

#include <cstddef>
#include <vector>

#include "../common/catch.hpp"

namespace optimizer_lr_schedule_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

TEST_CASE("lr_schedule: the warm-up and polynomial decay schedule", "[lr_schedule]") {
  const warmup_poly_schedule s{.base = 0.4, .warmup_steps = 4, .total_steps = 12, .power = 2.0};
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(1) == Approx(0.2));
  CHECK(s.at(3) == Approx(0.4));
  CHECK(s.at(4) == Approx(0.4));
  CHECK(s.at(8) == Approx(0.1)); // 0.4 (1 - 4/8)^2
  CHECK(s.at(11) == Approx(0.4 / 64.0));
  CHECK(s.at(12) == 0.0);
  CHECK(s.at(1000) == 0.0);
  const warmup_poly_schedule none{.base = 1.0, .warmup_steps = 0, .total_steps = 10, .power = 1.0};
  CHECK(none.at(0) == 1.0);
  CHECK(none.at(5) == Approx(0.5));
  const warmup_poly_schedule bad{.base = 1.0, .warmup_steps = 10, .total_steps = 10};
  CHECK_THROWS_WITH(bad.at(0), Contains("total_steps 10") && Contains("warmup_steps 10"));
}

TEST_CASE("lr_schedule: step decay against a step-by-step reference", "[lr_schedule]") {
  const warmup_step_schedule s{
      .base = 0.4, .warmup_steps = 5, .milestones = {5, 9, 20}, .factor = 0.5};
  // the reference walks the steps: the warm-up's ramp, then the rate halves at each milestone
  double rate = 0.4;
  std::size_t next = 0;
  for (std::size_t step = 0; step < 40; ++step) {
    if (step < 5) {
      CHECK(s.at(step) == Approx(0.4 * static_cast<double>(step + 1) / 5.0));
      continue;
    }
    while (next < s.milestones.size() && s.milestones[next] == step) {
      rate *= 0.5;
      ++next;
    }
    CHECK(s.at(step) == Approx(rate));
  }
  CHECK(s.at(8) == Approx(0.2)); // after the first milestone (step 5)
  CHECK(s.at(9) == Approx(0.1)); // the milestone's own step is already decayed
  CHECK(s.at(19) == Approx(0.1));
  CHECK(s.at(20) == Approx(0.05));
  // no milestones, no warm-up: constant
  const warmup_step_schedule constant{.base = 0.04, .milestones = {}};
  CHECK(constant.at(0) == 0.04);
  CHECK(constant.at(100000) == 0.04);
  // factor 1: the milestones change nothing
  const warmup_step_schedule one{.base = 0.3, .milestones = {2, 4}, .factor = 1.0};
  CHECK(one.at(10) == 0.3);
}

TEST_CASE("lr_schedule: a bad step schedule is named", "[lr_schedule][errors]") {
  const warmup_step_schedule inside{.base = 0.1, .warmup_steps = 10, .milestones = {9}};
  CHECK_THROWS_WITH(inside.at(0), Contains("milestone 9") && Contains("10 steps"));
  const warmup_step_schedule order{.base = 0.1, .milestones = {7, 7}};
  CHECK_THROWS_WITH(order.at(0), Contains("milestone 7") && Contains("before it, 7"));
  const warmup_step_schedule zero{.base = 0.1, .milestones = {3}, .factor = 0.0};
  CHECK_THROWS_WITH(zero.at(0), Contains("factor 0") && Contains("(0, 1]"));
  const warmup_step_schedule big{.base = 0.1, .milestones = {}, .factor = 2.0};
  CHECK_THROWS_WITH(big.validate(), Contains("factor 2"));
  const warmup_step_schedule negative{.base = -1.0, .milestones = {}};
  CHECK_THROWS_WITH(negative.validate(), Contains("base -1"));
}

} // namespace optimizer_lr_schedule_test
