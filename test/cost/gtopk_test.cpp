// SPDX-License-Identifier: Apache-2.0
// gTop-k's cost model (cost/gtopk.hpp) against its doc comment's formulas evaluated by hand: the
// busiest rank's bytes, ceil(log2 P) levels of (8 + 4k) + (8 + 8k), and the time, ceil(log2 P)
// levels of 9 alpha + 24 k beta + 12 k gamma.
#include <gradcomp/cost/gtopk.hpp>

#include "../common/catch.hpp"

namespace cost_gtopk_test {

using namespace gradcomp::cost;

TEST_CASE("gtopk: the busiest rank's bytes per tree level", "[cost][gtopk]") {
  // k = 1000: 16 + 12000 = 12016 bytes per level
  CHECK(gtopk_bytes_sent(1000, 2) == 12016.0);
  CHECK(gtopk_bytes_sent(1000, 3) == 2 * 12016.0);
  CHECK(gtopk_bytes_sent(1000, 4) == 2 * 12016.0);
  CHECK(gtopk_bytes_sent(1000, 5) == 3 * 12016.0);
  CHECK(gtopk_bytes_sent(1000, 8) == 3 * 12016.0);
  CHECK(gtopk_bytes_sent(1000, 9) == 4 * 12016.0);
  CHECK(gtopk_bytes_sent(1000, 1) == 0.0);   // one rank sends nothing
  CHECK(gtopk_bytes_sent(0, 4) == 2 * 16.0); // the counts alone
  // O(k log P): doubling P adds one level, doubling k about doubles each level
  CHECK(gtopk_bytes_sent(1000, 1024) == 10 * 12016.0);
  CHECK(gtopk_bytes_sent(2000, 1024) == 10 * 24016.0);
}

TEST_CASE("gtopk: the time, 9 alpha + 24 k beta + 12 k gamma per level", "[cost][gtopk]") {
  const network net{
      .alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9, .gamma_seconds_per_byte = 1e-10};
  // k = 1000: 9e-5 + 2.4e-5 + 1.2e-6 = 1.152e-4 per level
  CHECK(gtopk_allreduce_seconds(1000, 2, net) == Approx(1.152e-4));
  CHECK(gtopk_allreduce_seconds(1000, 8, net) == Approx(3 * 1.152e-4));
  CHECK(gtopk_allreduce_seconds(1000, 6, net) == Approx(3 * 1.152e-4));
  CHECK(gtopk_allreduce_seconds(1000, 1, net) == 0.0);
  // latency only, bandwidth only, reduction only
  CHECK(gtopk_allreduce_seconds(1000, 4, {.alpha_seconds = 1.0}) == 18.0);
  CHECK(gtopk_allreduce_seconds(1000, 4, {.beta_seconds_per_byte = 1.0}) == 48000.0);
  CHECK(gtopk_allreduce_seconds(1000, 4, {.gamma_seconds_per_byte = 1.0}) == 24000.0);
}

} // namespace cost_gtopk_test
