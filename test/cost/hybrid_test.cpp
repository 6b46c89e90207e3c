// SPDX-License-Identifier: Apache-2.0
// The FC-layer cost model (gradcomp/cost/hybrid.hpp) against its collectives summed by hand.
#include <gradcomp/cost/hybrid.hpp>

#include "../common/catch.hpp"

namespace cost_hybrid_test {

using namespace gradcomp;

TEST_CASE("FC layer costs are the sums of their collectives", "[hybrid]") {
  const cost::network net{1e-4, 1e-8, 1e-10};
  const double m = 8, k = 100, n = 30; // n_max = 8 on P = 4
  const int p = 4;
  // data parallel: ring allreduce of (K N + N) fp32 values
  const double dp_bytes = (k * n + n) * 4;
  CHECK(cost::fc_data_parallel_seconds(k, n, p, net) ==
        Approx(2 * 3 * 1e-4 + (2 * 3 * 1e-8 + 3 * 1e-10) * dp_bytes / 4));
  CHECK(cost::fc_data_parallel_seconds(k, n, p, net, {.fused = true}) ==
        Approx((2 * 3 * 1e-8 + 3 * 1e-10) * dp_bytes / 4));
  // model parallel, all-to-all: agreement 2 log2(4) alpha, allgather M K, 2 all-to-all M n_max,
  // reduce-scatter P M K
  const double a2a = 2 * 2 * 1e-4 + 3 * (1e-4 + 1e-8 * m * k * 4) +
                     2 * 3 * (1e-4 + 1e-8 * m * 8 * 4) +
                     3 * (1e-4 + (1e-8 + 1e-10) * p * m * k * 4 / p);
  CHECK(cost::fc_model_parallel_seconds(m, k, n, p, net) == Approx(a2a));
  // by pass: the forward gathers the inputs and exchanges the outputs, the backward exchanges
  // the output gradients and reduce-scatters the input gradients; one agreement each
  const cost::fc_model_parallel_times passes = cost::fc_model_parallel_passes(m, k, n, p, net);
  CHECK(passes.forward_seconds ==
        Approx(2 * 1e-4 + 3 * (1e-4 + 1e-8 * m * k * 4) + 3 * (1e-4 + 1e-8 * m * 8 * 4)));
  CHECK(passes.backward_seconds == Approx(2 * 1e-4 + 3 * (1e-4 + 1e-8 * m * 8 * 4) +
                                          3 * (1e-4 + (1e-8 + 1e-10) * p * m * k * 4 / p)));
  // S2's allgathers instead: one more input gather, the P M n_max slices, the M N gradients
  const double s2 = a2a - 2 * 3 * (1e-4 + 1e-8 * m * 8 * 4) + 3 * (1e-4 + 1e-8 * m * k * 4) +
                    3 * (1e-4 + 1e-8 * p * m * 8 * 4) + 3 * (1e-4 + 1e-8 * m * n * 4);
  CHECK(cost::fc_model_parallel_seconds(m, k, n, p, net, {.exchange = fc_exchange::s2_allgather}) ==
        Approx(s2));
  CHECK(cost::fc_model_parallel_seconds(m, k, n, p, net, {.argument_agreement = false}) ==
        Approx(a2a - 4e-4));
  CHECK(cost::fc_model_parallel_seconds(m, k, n, 1, net) == 0.0);
  // a measured fixed cost replaces every alpha term (agreements included) of the model side
  const double bandwidth_only = a2a - 2 * 2 * 1e-4 - 3 * 1e-4 - 2 * 3 * 1e-4 - 3 * 1e-4;
  CHECK(cost::fc_model_parallel_seconds(m, k, n, p, net, {.model_parallel_fixed_seconds = 2e-3}) ==
        Approx(2e-3 + bandwidth_only));
  const cost::fc_model_parallel_times fixed =
      cost::fc_model_parallel_passes(m, k, n, p, net, {.model_parallel_fixed_seconds = 2e-3});
  CHECK(fixed.forward_seconds ==
        Approx(1e-3 + 3 * 1e-8 * m * k * 4 + 3 * 1e-8 * m * 8 * 4)); // half the fixed cost each
  CHECK(cost::fc_data_parallel_seconds(k, n, p, net, {.model_parallel_fixed_seconds = 2e-3}) ==
        cost::fc_data_parallel_seconds(k, n, p, net));
  CHECK_THROWS_WITH(cost::fc_model_parallel_seconds(m, 0, n, p, net), Catch::Contains("K 0"));
  CHECK_THROWS_WITH(cost::fc_data_parallel_seconds(k, n, p, net, {.bytes_per_value = 0}),
                    Catch::Contains("bytes per value 0"));
}

} // namespace cost_hybrid_test
