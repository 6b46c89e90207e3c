// SPDX-License-Identifier: Apache-2.0
// The data / model parallelism planner (gradcomp/hybrid/plan.hpp) against S2's volume rule
// evaluated directly and against S2's reported outcome for VGG-16's FC1 and FC2.
#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/hybrid/plan.hpp>

#include <cstddef>

#include "../common/catch.hpp"

namespace hybrid_plan_test {

using namespace gradcomp;

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

} // namespace hybrid_plan_test
