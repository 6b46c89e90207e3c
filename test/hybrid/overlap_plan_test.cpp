// SPDX-License-Identifier: Apache-2.0
// gradcomp::hybrid::plan_with_overlap against iterations simulated by hand (per-layer messages,
// T = 1 ms per byte): the choice follows the whole iteration, not the layer's cost in isolation.
#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/hybrid/overlap_plan.hpp>
#include <gradcomp/hybrid/plan.hpp>

#include <algorithm>
#include <vector>

#include "../common/catch.hpp"

namespace hybrid_overlap_plan_test {

using namespace gradcomp;

namespace {

// messages of 1 ms per byte, dense fp32, no compression step
schedule::cost_model millisecond_per_byte() {
  return schedule::cost_model::affine(0.0, 1e-3);
}

// conv (100 values) below an FC layer of K = 10, N = 100 (weight 1000, bias 100 values); the
// FC module's backward time on its bias, which comes first in backward order
schedule::layer_profile conv_then_fc(double conv_backward_seconds) {
  return {{{"conv", 100, conv_backward_seconds}, {"fc.weight", 1000, 0.0}, {"fc.bias", 100, 1.0}},
          1.0};
}

// the data-parallel tensors sent one message each
hybrid::overlap_plan_options per_layer() {
  hybrid::overlap_plan_options o;
  o.strategy = schedule::strategy::per_layer;
  return o;
}
const hybrid::overlap_plan_options per_layer_plan = per_layer();

hybrid::fc_candidate
candidate(const char* name, std::size_t k, std::size_t n, std::vector<std::size_t> tensors) {
  return {{name, k, n}, std::move(tensors)};
}

} // namespace

TEST_CASE("plan_with_overlap keeps a layer data parallel when its allreduce hides behind backward",
          "[hybrid]") {
  const cost::network net{0.0, 1e-8, 0.0};
  const std::vector<hybrid::fc_candidate> fc{candidate("fc", 10, 100, {1, 2})};
  const cost::fc_model_parallel_times mp = cost::fc_model_parallel_passes(1, 10, 100, 2, net);
  REQUIRE(mp.forward_seconds > 0);
  REQUIRE(mp.backward_seconds > 0);
  // in isolation the layer is cheaper model parallel
  REQUIRE(hybrid::choose(fc[0].layer, 1, 2, net).by_cost == hybrid::parallelism::model);

  SECTION("long backward below the layer: its 4.4 s of messages hide behind it") {
    const auto plan = hybrid::plan_with_overlap(conv_then_fc(10.0), fc, 1, 2, net,
                                                millisecond_per_byte(), per_layer_plan);
    // data parallel: bias ready at 2 (0.4 s), weight 2.4..6.4, conv ready at 12, 12..12.4
    CHECK(plan.data_parallel.predicted_iteration_seconds == Approx(12.4));
    // model parallel: forward 1 + f; conv ready at 1 + f + (1 + b) + 10, its message 0.4 s
    CHECK(plan.all[1].predicted_iteration_seconds ==
          Approx(12.4 + mp.forward_seconds + mp.backward_seconds));
    CHECK(plan.best.layers == std::vector{hybrid::parallelism::data});
    CHECK(plan.best.groups == schedule::per_layer(3));
  }
  SECTION("short backward below the layer: the weight's 4 s message is exposed") {
    const auto plan = hybrid::plan_with_overlap(conv_then_fc(0.5), fc, 1, 2, net,
                                                millisecond_per_byte(), per_layer_plan);
    // data parallel: bias 2..2.4, weight 2.4..6.4, conv (ready at 2.5) 6.4..6.8
    CHECK(plan.data_parallel.predicted_iteration_seconds == Approx(6.8));
    CHECK(plan.best.predicted_iteration_seconds ==
          Approx(2.9 + mp.forward_seconds + mp.backward_seconds));
    CHECK(plan.best.layers == std::vector{hybrid::parallelism::model});
    CHECK(plan.best.groups == schedule::per_layer(1)); // the conv tensor alone
  }
  SECTION("the layer at the input side: its compute after the last message still counts") {
    const schedule::layer_profile profile{
        {{"fc.weight", 1000, 0.0}, {"fc.bias", 100, 1.0}, {"conv", 100, 0.5}}, 1.0};
    const std::vector<hybrid::fc_candidate> first{candidate("fc", 10, 100, {0, 1})};
    const auto plan = hybrid::plan_with_overlap(profile, first, 1, 2, net, millisecond_per_byte(),
                                                per_layer_plan);
    // data parallel: conv 1.5..1.9, bias (ready 2.5) 2.5..2.9, weight 2.9..6.9
    CHECK(plan.data_parallel.predicted_iteration_seconds == Approx(6.9));
    // model parallel: conv's message ends at 1.9 + f, compute at 2.5 + f + b
    CHECK(plan.all[1].predicted_iteration_seconds ==
          Approx(2.5 + mp.forward_seconds + mp.backward_seconds));
    CHECK(plan.best.layers == std::vector{hybrid::parallelism::model});
  }
}

TEST_CASE("plan_with_overlap puts the backward collectives where the layer's backward runs",
          "[hybrid]") {
  // conv, FC, head (1000 values: a 4 s message), forward order
  const schedule::layer_profile profile{
      {{"conv", 100, 0.5}, {"fc.weight", 1000, 0.0}, {"fc.bias", 100, 1.0}, {"head", 1000, 0.5}},
      1.0};
  const std::vector<hybrid::fc_candidate> fc{candidate("fc", 10, 100, {1, 2})};
  const cost::network net{1e-2, 1e-6, 0.0};
  const cost::fc_model_parallel_times mp = cost::fc_model_parallel_passes(1, 10, 100, 2, net);
  const auto plan =
      hybrid::plan_with_overlap(profile, fc, 1, 2, net, millisecond_per_byte(), per_layer_plan);
  // head ready at 1.5 + f, its message until 5.5 + f; the FC layer's backward (1 + b) runs under
  // it, conv is ready at 3 + f + b < 5.5 + f and sends 5.5 + f .. 5.9 + f: b is hidden
  REQUIRE(mp.backward_seconds < 2.5);
  CHECK(plan.all[1].predicted_iteration_seconds == Approx(5.9 + mp.forward_seconds));
}

TEST_CASE("plan_with_overlap evaluates every set and picks the fastest, ties to data parallel",
          "[hybrid]") {
  // two FC layers over a conv: 4 sets, entry s has candidate i model parallel iff bit i of s
  const schedule::layer_profile profile{{{"conv", 100, 0.5},
                                         {"fc1.weight", 1000, 0.0},
                                         {"fc1.bias", 100, 1.0},
                                         {"fc2.weight", 500, 0.0},
                                         {"fc2.bias", 5, 0.25}},
                                        1.0};
  const std::vector<hybrid::fc_candidate> fcs{candidate("fc1", 10, 100, {1, 2}),
                                              candidate("fc2", 100, 5, {3, 4})};
  const cost::network net{1e-3, 1e-8, 0.0};
  const auto plan =
      hybrid::plan_with_overlap(profile, fcs, 4, 2, net, millisecond_per_byte(), per_layer_plan);
  REQUIRE(plan.all.size() == 4);
  double fastest = plan.all[0].predicted_iteration_seconds;
  for (std::size_t s = 0; s < 4; ++s) {
    CHECK(plan.all[s].layers[0] ==
          ((s & 1U) ? hybrid::parallelism::model : hybrid::parallelism::data));
    CHECK(plan.all[s].layers[1] ==
          ((s & 2U) ? hybrid::parallelism::model : hybrid::parallelism::data));
    fastest = std::min(fastest, plan.all[s].predicted_iteration_seconds);
  }
  CHECK(plan.best.predicted_iteration_seconds == fastest);
  CHECK(plan.data_parallel.layers == plan.all[0].layers);

  // free communication: every set takes forward + backward; data parallelism wins the tie
  const auto free = hybrid::plan_with_overlap(profile, fcs, 4, 2, cost::network{},
                                              schedule::cost_model::affine(0.0, 0.0));
  for (const auto& e : free.all) {
    CHECK(e.predicted_iteration_seconds == Approx(1.0 + 0.5 + 1.0 + 0.25));
  }
  CHECK(free.best.layers == free.data_parallel.layers);
  // every FC layer model parallel leaves only the conv tensor; no tensor left: compute alone
  const std::vector<hybrid::fc_candidate> all_fc{candidate("fc", 10, 100, {0})};
  const auto only =
      hybrid::plan_with_overlap(schedule::layer_profile{{{"fc.weight", 1000, 2.0}}, 1.0}, all_fc, 1,
                                2, cost::network{}, millisecond_per_byte());
  CHECK(only.all[1].predicted_iteration_seconds == Approx(3.0));
  CHECK(only.all[1].groups.empty());
}

TEST_CASE("plan_with_overlap rejects bad candidates naming the value", "[hybrid]") {
  const auto profile = conv_then_fc(1.0);
  const cost::network net{1e-4, 1e-8, 0.0};
  const auto model = millisecond_per_byte();
  hybrid::overlap_plan_options at_most_one;
  at_most_one.max_candidates = 1;
  const auto plan = [&](std::vector<hybrid::fc_candidate> c, int ranks = 2,
                        hybrid::overlap_plan_options o = {}) {
    return hybrid::plan_with_overlap(profile, c, 8, ranks, net, model, o);
  };
  CHECK_THROWS_WITH(plan({candidate("fc", 10, 100, {})}), Catch::Contains("'fc' names no tensor"));
  CHECK_THROWS_WITH(plan({candidate("fc", 10, 100, {1, 3})}),
                    Catch::Contains("names tensor 3, outside the profile's 3"));
  CHECK_THROWS_WITH(plan({candidate("a", 10, 100, {1}), candidate("b", 10, 100, {1, 2})}),
                    Catch::Contains("tensor 1 belongs to two candidates ('a', 'b')"));
  CHECK_THROWS_WITH(plan({candidate("fc", 10, 100, {1, 2})}, 101),
                    Catch::Contains("N = 100 outputs, fewer than the 101 ranks"));
  CHECK_THROWS_WITH(plan({candidate("fc", 0, 100, {1, 2})}), Catch::Contains("K 0"));
  CHECK_THROWS_WITH(
      plan({candidate("a", 10, 100, {1}), candidate("b", 10, 100, {2})}, 2, at_most_one),
      Catch::Contains("2 candidates, more than max_candidates = 1"));
  CHECK_THROWS_WITH(plan({candidate("fc", 10, 100, {1, 2})}, 0), Catch::Contains("ranks 0"));
}

TEST_CASE("plan_with_overlap as docs/hybrid.md shows it", "[hybrid]") {
  // every gradient tensor, forward order, all data parallel (a profile, or gradcomp-plan's CSV)
  const gradcomp::schedule::layer_profile profile{{{"conv.weight", 4608, 0.004},
                                                   {"conv.bias", 16, 0.0},
                                                   {"fc1.weight", 294912, 0.0},
                                                   {"fc1.bias", 256, 0.003}},
                                                  0.010};
  // the FC layers that could run model parallel: shape and their tensors' forward indices
  gradcomp::hybrid::fc_candidate fc1;
  fc1.layer = {"fc1", 1152, 256};
  fc1.tensors = {2, 3};
  const std::vector<gradcomp::hybrid::fc_candidate> fcs{fc1};
  const auto net = gradcomp::cost::network::from_link(1e9, 50e-6); // 1 Gbit/s, 50 us
  const auto merge_model =
      gradcomp::schedule::cost_model::affine(net.alpha_seconds, net.beta_seconds_per_byte);
  gradcomp::hybrid::overlap_plan_options o; // merge strategy: optimal (as the pipeline)
  const auto plan = gradcomp::hybrid::plan_with_overlap(profile, fcs, /*batch M=*/32,
                                                        /*ranks=*/4, net, merge_model, o);
  // plan.best.layers[j]: data or model; plan.best.predicted_iteration_seconds;
  // plan.best.groups: the data-parallel tensors' merge plan; plan.all: every set, 2^c of them
  REQUIRE(plan.all.size() == 2);
  CHECK(plan.best.predicted_iteration_seconds ==
        std::min(plan.all[0].predicted_iteration_seconds, plan.all[1].predicted_iteration_seconds));
  // data parallel: fc1's 1.18 MB gradient (9.5 ms) starts at 13 ms, 4 ms before the conv's
  // gradient, and ends near 22.6 ms; model parallel: its collectives (gathering 32 x 1152
  // inputs, reduce-scattering their gradients, ~8 ms in all) sit on the critical path, about
  // 25 ms: data parallel, although the layer alone is cheaper model parallel (8 < 9.5 ms)
  CHECK(plan.best.layers[0] == gradcomp::hybrid::parallelism::data);
  CHECK(plan.all[1].predicted_iteration_seconds > plan.all[0].predicted_iteration_seconds + 1e-3);
  CHECK(gradcomp::hybrid::choose(fc1.layer, 32, 4, net).by_cost ==
        gradcomp::hybrid::parallelism::model);
}

} // namespace hybrid_overlap_plan_test
