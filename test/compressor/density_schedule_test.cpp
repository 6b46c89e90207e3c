// SPDX-License-Identifier: Apache-2.0
// gradcomp::density_warmup (compressor/density_schedule.hpp) against its formula
// d(t) = d0 (dT / d0)^(e / E) evaluated by hand for DGC's defaults (0.25 -> 0.001 over 4 epochs),
// stepped and continuous, by iteration, with fractional and zero warm-ups; never rising and
// within [dT, d0]; every bad value named; and a compressor following it, its k = ceil(d n)
// counted by hand. (The pipeline's use of it is tested in test/pipeline/pipeline_density_test.cpp.)
#include <gradcomp/compressor/density_schedule.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace compressor_density_schedule_test {

using namespace gradcomp;
using Catch::Contains;

TEST_CASE("density_warmup: DGC's defaults, epoch by epoch, worked by hand", "[density_schedule]") {
  const density_warmup w; // 0.25 -> 0.001 over 4 epochs, stepped
  CHECK(w.initial_density == 0.25);
  CHECK(w.final_density == 0.001);
  CHECK(w.warmup_epochs == 4.0);
  CHECK(w.stepped);
  // 0.25 x 0.004^(e / 4): each epoch divides by 0.004^(-1/4) = 3.97635...
  const double by_hand[] = {0.25, 0.06287167148414677, 0.015811388300841896, 0.0039763536438352535,
                            0.001};
  for (int e = 0; e <= 4; ++e) {
    CAPTURE(e);
    CHECK(w.at_epoch(e) == Approx(by_hand[e]).epsilon(1e-12));
    if (e < 4) {
      CHECK(w.at_epoch(e) / w.at_epoch(e + 1) == Approx(3.9763536438352536).epsilon(1e-12));
      CHECK(w.at_epoch(e + 0.5) == w.at_epoch(e)); // one density per epoch
    }
  }
  CHECK(w.at_epoch(1000.0) == 0.001);
  // by iteration, 100 per epoch: iteration 150 is epoch 1.5, stepped to epoch 1
  CHECK(w.at_iteration(150, 100) == w.at_epoch(1.0));
  CHECK(w.at_iteration(0, 100) == 0.25);
  CHECK(w.at_iteration(399, 100) == w.at_epoch(3.0));
  CHECK(w.at_iteration(400, 100) == 0.001);
}

TEST_CASE("density_warmup: continuous, fractional and zero warm-ups", "[density_schedule]") {
  const density_warmup continuous{.stepped = false};
  CHECK(continuous.at_epoch(0.5) == Approx(0.12537112056225985).epsilon(1e-12));
  CHECK(continuous.at_epoch(2.0) == Approx(0.015811388300841896).epsilon(1e-12));
  CHECK(continuous.at_iteration(50, 100) == continuous.at_epoch(0.5));
  // E = 2.5, stepped: epochs 0, 1, 2 at exponents 0, 1/2.5, 2/2.5; dT from epoch 2.5 on
  const density_warmup fractional{.warmup_epochs = 2.5};
  CHECK(fractional.at_epoch(1.2) == Approx(0.027464013582652942).epsilon(1e-12));
  CHECK(fractional.at_epoch(2.4) == Approx(0.003017088168272581).epsilon(1e-12));
  CHECK(fractional.at_epoch(2.5) == 0.001);
  // E = 0: the target from the start
  const density_warmup none{.warmup_epochs = 0.0};
  CHECK(none.at_epoch(0.0) == 0.001);
  CHECK(none.at_iteration(0, 1) == 0.001);
  // d0 = dT: constant
  const density_warmup flat{.initial_density = 0.01, .final_density = 0.01};
  CHECK(flat.at_epoch(1.7) == 0.01);
  // never rises, stays within [dT, d0], on a fine grid of both kinds
  for (const density_warmup& w : {density_warmup{}, continuous, fractional}) {
    double previous = w.initial_density;
    for (int i = 0; i <= 600; ++i) {
      const double d = w.at_epoch(i / 100.0);
      REQUIRE(d <= previous);
      REQUIRE(d >= w.final_density);
      REQUIRE(d <= w.initial_density);
      previous = d;
    }
  }
  CHECK(density_warmup{} == density_warmup{});
  CHECK_FALSE(density_warmup{} == continuous);
}

TEST_CASE("density_warmup: bad schedules and arguments are named", "[density_schedule]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_NOTHROW(density_warmup{}.validate());
  CHECK_THROWS_WITH(density_warmup{.final_density = 0.0}.validate(),
                    Contains("final_density 0 is outside (0, 1]"));
  CHECK_THROWS_WITH(density_warmup{.initial_density = 1.5}.validate(),
                    Contains("initial_density 1.5 is outside (0, 1]"));
  CHECK_THROWS_WITH((density_warmup{.initial_density = 0.001, .final_density = 0.01}.validate()),
                    Contains("initial_density 0.001 is below final_density 0.01"));
  CHECK_THROWS_WITH(density_warmup{.warmup_epochs = -1.0}.validate(),
                    Contains("warmup_epochs -1 must be finite and >= 0"));
  CHECK_THROWS_AS(density_warmup{.warmup_epochs = nan}.validate(), std::invalid_argument);
  CHECK_THROWS_AS(
      density_warmup{.warmup_epochs = std::numeric_limits<double>::infinity()}.validate(),
      std::invalid_argument);
  // every query validates
  CHECK_THROWS_WITH(density_warmup{.final_density = 2.0}.at_epoch(1.0),
                    Contains("final_density 2"));
  CHECK_THROWS_WITH(density_warmup{}.at_epoch(-0.5), Contains("epoch -0.5 must be finite"));
  CHECK_THROWS_AS(density_warmup{}.at_epoch(nan), std::invalid_argument);
  CHECK_THROWS_WITH(density_warmup{}.at_iteration(5, 0),
                    Contains("iterations_per_epoch 0 is below the minimum 1"));
}

TEST_CASE("density_warmup: a compressor following it selects ceil(d n) each epoch",
          "[density_schedule]") {
  const density_warmup w;
  exact_top_k c({.density = w.at_epoch(0)});
  const std::vector<float> x = test::make_values(test::distribution::normal, 10000, 8);
  const std::size_t k_by_hand[] = {2500, 629, 159, 40, 10, 10};
  sparse_message m;
  for (int e = 0; e < 6; ++e) {
    CAPTURE(e);
    c.set_density(w.at_epoch(e));
    const selection_stats s = c.compress(x, m);
    CHECK(s.k_selected == k_by_hand[e]);
    CHECK(m.indices == test::reference_top_k(x, k_by_hand[e]));
  }
}

} // namespace compressor_density_schedule_test
