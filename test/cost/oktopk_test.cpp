// SPDX-License-Identifier: Apache-2.0
// Ok-Topk's cost model (cost/oktopk.hpp) against its doc comment's formulas evaluated by hand:
// the bytes of the reduce-scatter and the allgather with their size rounds, the repartition and
// the threshold evaluation, and the time alpha (3 (P-1) + L) + beta bytes + gamma 4 k (P-1)/P.
#include <gradcomp/cost/oktopk.hpp>

#include "../common/catch.hpp"

namespace cost_oktopk_test {

using namespace gradcomp::cost;

TEST_CASE("oktopk: the bytes one rank sends, worked by hand", "[cost][oktopk]") {
  // P = 4 (L = 2), k_local = 400, k_global = 800, 8-byte pairs, 32-byte headers:
  // reduce-scatter 8 x 3 + 3 x (32 + 8 x 100) = 24 + 2496; allgather 16 x 3 + 3 x (32 + 8 x 200)
  // = 48 + 4896
  CHECK(oktopk_bytes_sent(400, 800, 4) == 24 + 2496 + 48 + 4896);
  // a repartition adds 8 (P-1) L = 48; a threshold evaluation 4 x 1024 L = 8192
  CHECK(oktopk_bytes_sent(400, 800, 4, 8.0, true) == 7464 + 48);
  CHECK(oktopk_bytes_sent(400, 800, 4, 8.0, false, true) == 7464 + 8192);
  CHECK(oktopk_bytes_sent(400, 800, 4, 8.0, true, true) == 7464 + 48 + 8192);
  // delta + varint pairs of about 5.3 bytes
  CHECK(oktopk_bytes_sent(400, 800, 4, 5.25) == 24 + 3 * (32 + 525) + 48 + 3 * (32 + 1050));
  // P = 3 (L = 2), k = 300 both ways
  CHECK(oktopk_bytes_sent(300, 300, 3) == 16 + 2 * (32 + 800) + 32 + 2 * (32 + 800));
  // one rank: nothing crosses a link, whatever happens
  CHECK(oktopk_bytes_sent(400, 800, 1, 8.0, true, true) == 0.0);
}

TEST_CASE("oktopk: the time, worked by hand", "[cost][oktopk]") {
  const network net{
      .alpha_seconds = 1e-5, .beta_seconds_per_byte = 1e-9, .gamma_seconds_per_byte = 1e-10};
  // P = 4, k = 400: 11 alpha; 5064 bytes (24 + 2496 + 48 + 2496); gamma on 4 x 400 x 3/4 = 1200
  CHECK(oktopk_bytes_sent(400, 400, 4) == 5064.0);
  CHECK(oktopk_allreduce_seconds(400, 4, net) == Approx(1.1e-4 + 5.064e-6 + 1.2e-7));
  CHECK(oktopk_allreduce_seconds(400, 4, {.alpha_seconds = 1.0}) == 11.0);
  CHECK(oktopk_allreduce_seconds(400, 4, {.gamma_seconds_per_byte = 1.0}) == 1200.0);
  // P = 8: 3 x 7 + 3 = 24 latencies
  CHECK(oktopk_allreduce_seconds(1000, 8, {.alpha_seconds = 1.0}) == 24.0);
  CHECK(oktopk_allreduce_seconds(400, 1, net) == 0.0);
}

} // namespace cost_oktopk_test
