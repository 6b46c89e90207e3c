// SPDX-License-Identifier: Apache-2.0
// The FC-layer cost model (gradcomp/cost/hybrid.hpp) against its collectives summed by hand, and
// the data / model parallelism planner (gradcomp/hybrid/plan.hpp) against S2's volume rule
// evaluated directly and against S2's reported outcome for VGG-16's FC1 and FC2.
#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/hybrid/column_split.hpp>
#include <gradcomp/hybrid/plan.hpp>

#include "../common/catch.hpp"

#include <cmath>
#include <numeric>

using namespace gradcomp;

TEST_CASE("column_split covers N outputs in order, sizes differing by at most one", "[hybrid]") {
  for (int p = 1; p <= 9; ++p) {
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
      std::size_t next = 0;
      for (int r = 0; r < p; ++r) {
        const column_slice s = column_split(n, p, r);
        CHECK(s.offset == next);
        CHECK((s.rows == n / static_cast<std::size_t>(p) ||
               s.rows == n / static_cast<std::size_t>(p) + 1));
        next += s.rows;
      }
      CHECK(next == n);
    }
  }
  CHECK_THROWS_WITH(column_split(10, 3, 3), Catch::Contains("rank 3 is outside [0, 3)"));
  CHECK_THROWS_WITH(column_split(10, 0, 0), Catch::Contains("rank count 0"));
}

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

TEST_CASE("the planner's volume choice is S2's rule; its cost choice the cheaper side",
          "[hybrid]") {
  const cost::network net{5e-5, 1e-8, 0};
  for (const hybrid::fc_layer& layer : hybrid::vgg16_fc_layers()) {
    for (int p : {2, 3, 4, 8}) {
      for (std::size_t m = 1; m <= 256; m *= 2) {
        const hybrid::fc_choice c = hybrid::choose(layer, m, p, net);
        const double k = static_cast<double>(layer.inputs_k);
        const double n = static_cast<double>(layer.outputs_n);
        const double mp = static_cast<double>(m) * p;
        // S2: model parallel when M P < (K + 1) N / (3 K + 2 N), i.e. when its volume is smaller
        const bool rule = mp * (3 * k + 2 * n) < (k + 1) * n;
        CHECK((c.by_volume == hybrid::parallelism::model) == rule);
        CHECK((c.model_values < c.data_values) == rule);
        const double dp_s = cost::fc_data_parallel_seconds(k, n, p, net);
        const double mp_s = cost::fc_model_parallel_seconds(static_cast<double>(m), k, n, p, net);
        CHECK(c.data_seconds == dp_s);
        CHECK(c.model_seconds == mp_s);
        CHECK((c.by_cost == hybrid::parallelism::model) == (mp_s < dp_s));
      }
    }
  }
}

TEST_CASE("S2's reported FC1 / FC2 outcome on VGG-16, P = 2, 4, 8, batch 1..128", "[hybrid]") {
  // S2: FC1 model parallel always faster; FC2 model parallel except P = 8 with batch 128
  const auto layers = hybrid::vgg16_fc_layers();
  const cost::network net = cost::network::from_link(1e9, 50e-6);
  for (int p : {2, 4, 8}) {
    for (std::size_t m = 1; m <= 128; m *= 2) {
      const auto plan = hybrid::plan(layers, m, p, net);
      CHECK(plan[0].by_volume == hybrid::parallelism::model);
      CHECK(plan[0].by_cost == hybrid::parallelism::model);
      const bool fc2_data = p == 8 && m == 128;
      CHECK(plan[1].by_volume ==
            (fc2_data ? hybrid::parallelism::data : hybrid::parallelism::model));
    }
  }
  CHECK_THROWS_WITH(hybrid::choose({"empty", 0, 10}, 1, 2, net), Catch::Contains("K = 0"));
}
