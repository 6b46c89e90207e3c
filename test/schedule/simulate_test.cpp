// SPDX-License-Identifier: Apache-2.0
// The iteration-time simulator against cases worked by hand from S1's recurrences (eqs. 2-5, 7,
// merging as in eq. 6), in both compression placements, and its argument checks.
#include <gradcomp/schedule.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "../common/catch.hpp"
#include "../common/schedule_testing.hpp"

namespace schedule_simulate_test {

using namespace gradcomp::schedule;

namespace {

// Three layers (forward order: S1's layers 1, 2, 3), t_f = 2 s, t_b = [1, 2, 3] s,
// numel [10, 20, 30] (dense: 40, 80, 120 bytes); s(m) = 0.5 + 0.01 m, T(B) = 1 + 0.025 B.
layer_profile three_layers() {
  return {{{"layer1", 10, 1.0}, {"layer2", 20, 2.0}, {"layer3", 30, 3.0}}, 2.0};
}

cost_model three_layer_model(compression_placement placement) {
  return cost_model::affine(1.0, 0.025, affine_cost{0.5, 0.01}, std::nullopt, placement);
}

} // namespace

TEST_CASE("per-layer groups on the compute stream follow S1 eqs. 2-5 and 7", "[schedule]") {
  // S1, by hand: t_s = [0.6, 0.7, 0.8], t_c = [2, 3, 4] for layers 1, 2, 3.
  // tau_b[3] = 2, tau_s[3] = 5, tau_c[3] = 5.8;
  // tau_b[2] = 5.8, tau_s[2] = 7.8, tau_c[2] = max(8.5, 5.8 + 4) = 9.8;
  // tau_b[1] = 8.5, tau_s[1] = 9.5, tau_c[1] = max(10.1, 9.8 + 3) = 12.8; t_iter = 12.8 + 2.
  const timeline t = simulate(
      three_layers(), three_layer_model(compression_placement::on_compute_stream), per_layer(3));
  CHECK(t.t_iter_seconds == Approx(14.8));
  REQUIRE(t.groups.size() == 3);
  REQUIRE(t.layers.size() == 3);
  // layers are indexed in forward order: layers[2] is S1's layer 3, the first in backward
  CHECK(t.layers[2].backward_start_seconds == Approx(2.0));
  CHECK(t.layers[2].backward_end_seconds == Approx(5.0));
  CHECK(t.layers[2].compress_end_seconds == Approx(5.8));
  CHECK(t.layers[2].communicate_start_seconds == Approx(5.8));
  CHECK(t.layers[2].communicate_end_seconds == Approx(9.8));
  CHECK(t.layers[1].backward_start_seconds == Approx(5.8)); // waits for layer 3's compression
  CHECK(t.layers[1].backward_end_seconds == Approx(7.8));
  CHECK(t.layers[1].compress_end_seconds == Approx(8.5));
  CHECK(t.layers[1].communicate_start_seconds == Approx(9.8)); // the channel is busy until 9.8
  CHECK(t.layers[0].backward_start_seconds == Approx(8.5));
  CHECK(t.layers[0].compress_start_seconds == Approx(9.5));
  CHECK(t.layers[0].communicate_start_seconds == Approx(12.8));
  CHECK(t.layers[0].communicate_end_seconds == Approx(14.8));
  CHECK(t.groups[0].layers == layer_group{0, 1});
  CHECK(t.groups[0].numel == 30);
  CHECK(t.groups[0].message_bytes == 120);
  CHECK(t.layers[2].group == 0);
  CHECK(t.layers[0].group == 2);
}

TEST_CASE("a merged group on the compute stream follows S1 eq. 6", "[schedule]") {
  // Merge layer 3 into layer 2 (t_s[3] = t_c[3] = 0, d[2] = 50, tau_b[2] = tau_b[3] + t_b[3]):
  // tau_s[2] = 7, t_s[2] = s(50) = 1, tau_c[2] = 8, t_c[2] = T(200) = 6;
  // tau_b[1] = 8, tau_s[1] = 9, tau_c[1] = max(9.6, 14) = 14; t_iter = 16.
  const grouping g{{0, 2}, {2, 3}};
  const timeline t =
      simulate(three_layers(), three_layer_model(compression_placement::on_compute_stream), g);
  CHECK(t.t_iter_seconds == Approx(16.0));
  REQUIRE(t.groups.size() == 2);
  CHECK(t.groups[0].numel == 50);
  CHECK(t.groups[0].message_bytes == 200);
  CHECK(t.groups[0].backward_start_seconds == Approx(2.0));
  CHECK(t.groups[0].backward_end_seconds == Approx(7.0));
  CHECK(t.groups[0].compress_end_seconds == Approx(8.0));
  CHECK(t.groups[0].communicate_end_seconds == Approx(14.0));
  CHECK(t.layers[2].backward_end_seconds == Approx(5.0)); // layer 3 ends, layer 2 starts at once
  CHECK(t.layers[1].backward_start_seconds == Approx(5.0));
  CHECK(t.layers[2].communicate_start_seconds == Approx(8.0)); // the group's message
  CHECK(t.groups[1].compress_start_seconds == Approx(9.0));
  CHECK(t.groups[1].communicate_start_seconds == Approx(14.0));
  CHECK(t_iter_seconds(three_layers(), three_layer_model(compression_placement::on_compute_stream),
                       g) == t.t_iter_seconds);
}

TEST_CASE("off the compute stream, backward never waits and compressions queue", "[schedule]") {
  // Same case off the stream: backward ends at 5, 7, 8; compressions [5, 5.8], [7, 7.7],
  // [8, 8.6]; messages [5.8, 9.8], [9.8, 12.8], [12.8, 14.8].
  const timeline t = simulate(
      three_layers(), three_layer_model(compression_placement::off_compute_stream), per_layer(3));
  CHECK(t.t_iter_seconds == Approx(14.8));
  CHECK(t.layers[1].backward_start_seconds == Approx(5.0));
  CHECK(t.layers[0].backward_end_seconds == Approx(8.0));
  CHECK(t.layers[1].compress_start_seconds == Approx(7.0));
  CHECK(t.layers[0].compress_end_seconds == Approx(8.6));

  // Compression 3 s, message 1 s, t_b 1 s each, t_f 0: off the stream the compressions queue
  // ([1, 4], [4, 7], [7, 10]; messages end 5, 8, 11); on it backward waits (ends 1, 5, 9,
  // compressions end 4, 8, 12; messages end 5, 9, 13).
  const layer_profile p{{{"a", 10, 1.0}, {"b", 10, 1.0}, {"c", 10, 1.0}}, 0.0};
  const cost_model off = cost_model::affine(1.0, 0.0, affine_cost{3.0, 0.0}, std::nullopt,
                                            compression_placement::off_compute_stream);
  const timeline q = simulate(p, off, per_layer(3));
  CHECK(q.t_iter_seconds == Approx(11.0));
  CHECK(q.groups[1].compress_start_seconds == Approx(4.0));
  CHECK(q.groups[2].compress_start_seconds == Approx(7.0));
  CHECK(q.groups[2].backward_end_seconds == Approx(3.0));
  cost_model on = off;
  on.placement = compression_placement::on_compute_stream;
  const timeline r = simulate(p, on, per_layer(3));
  CHECK(r.t_iter_seconds == Approx(13.0));
  CHECK(r.groups[2].backward_end_seconds == Approx(9.0));
  // one group: backward ends at 3, compression [3, 6], message [6, 7]
  CHECK(t_iter_seconds(p, off, single(3)) == Approx(7.0));
  CHECK(t_iter_seconds(p, on, single(3)) == Approx(7.0));
}

TEST_CASE("without compression both placements are the MG-WFBP model", "[schedule]") {
  // docs/planner.md, "The model" (MG-WFBP's model): tau_c(L) = tau_b(L) + t_b(L),
  // tau_c(l) = max(tau_c(l+1) + t_c(l+1), tau_b(l) + t_b(l)), t_iter = t_f + tau_c(1) + t_c(1).
  // The counterexample of docs/planner.md, "A counterexample to the greedy rules": backward
  // order t_b = [1, 3, 10], sizes [7, 1, 10], T(m) = 10 + m (alpha = 10 s, beta = 1/4 s per
  // byte of a 4-byte element); per layer: messages [1, 18], [18, 29], [29, 49].
  const layer_profile p{{{"l1", 10, 10.0}, {"l2", 1, 3.0}, {"l3", 7, 1.0}}, 0.0};
  for (const auto placement :
       {compression_placement::off_compute_stream, compression_placement::on_compute_stream}) {
    const cost_model m = cost_model::affine(10.0, 0.25, std::nullopt, std::nullopt, placement);
    CHECK(t_iter_seconds(p, m, per_layer(3)) == 49.0);
    CHECK(t_iter_seconds(p, m, grouping{{0, 2}, {2, 3}}) == 42.0);
    CHECK(t_iter_seconds(p, m, grouping{{0, 1}, {1, 3}}) == 39.0);
    CHECK(t_iter_seconds(p, m, single(3)) == 42.0);
    // t_f shifts everything when the channel is never the bottleneck at the start
    layer_profile shifted = p;
    shifted.forward_seconds = 5.0;
    CHECK(t_iter_seconds(shifted, m, per_layer(3)) == 54.0);
  }
}

TEST_CASE("after backward a message takes the after-backward cost", "[schedule]") {
  // three_layers() without compression: t_f = 2, backward order t_b = [3, 2, 1], backward ends
  // at K = 8; dense messages of 120, 80, 40 bytes. T(B) = 1 + 0.025 B during backward,
  // T'(B) = 0.5 + 0.0125 B after it. Per layer: layer 3 ready at 5, T = 4: at K = 8 three
  // quarters are done, the last quarter takes 0.25 T' = 0.25 x 2 = 0.5: ends at 8.5; layer 2
  // (ready at 7) starts at 8.5 >= K: T' = 1.5, ends at 10; layer 1: [10, 11].
  cost_model m = cost_model::affine(1.0, 0.025);
  m.communication_seconds_after_backward = affine_cost{0.5, 0.0125};
  const timeline t = simulate(three_layers(), m, per_layer(3));
  REQUIRE(t.groups.size() == 3);
  CHECK(t.groups[0].communicate_start_seconds == Approx(5.0));
  CHECK(t.groups[0].communicate_end_seconds == Approx(8.5));
  CHECK(t.groups[1].communicate_start_seconds == Approx(8.5));
  CHECK(t.groups[1].communicate_end_seconds == Approx(10.0));
  CHECK(t.groups[2].communicate_end_seconds == Approx(11.0));
  CHECK(t.t_iter_seconds == Approx(11.0));
  // a message that ends before K is not affected: the profile's backward made 10 s longer
  // (K = 18) ends every message during backward, as without T'
  layer_profile longer = three_layers();
  longer.layers[0].backward_seconds = 11.0;
  const cost_model during_only = cost_model::affine(1.0, 0.025);
  CHECK(t_iter_seconds(longer, m, grouping{{0, 2}, {2, 3}}) ==
        Approx(18.0 + 0.5 + 0.0125 * 40)); // the last group is ready at K
  CHECK(simulate(longer, m, per_layer(3)).groups[0].communicate_end_seconds ==
        simulate(longer, during_only, per_layer(3)).groups[0].communicate_end_seconds);
  // without the after-backward cost: T throughout (5 + 4 = 9, then [9, 12], [12, 14])
  CHECK(t_iter_seconds(three_layers(), during_only, per_layer(3)) == Approx(14.0));
  // it can change the best plan: one message after backward (8 + 0.5 + 0.0125 x 240 = 11.5)
  // against 11 per layer; with T throughout per layer 14 against single 8 + 7 = 15
  CHECK(t_iter_seconds(three_layers(), m, single(3)) == Approx(11.5));
  CHECK(t_iter_seconds(three_layers(), during_only, single(3)) == Approx(15.0));
  // a cost that is not finite and >= 0 is refused
  cost_model negative = m;
  negative.communication_seconds_after_backward = [](std::uint64_t) { return -1.0; };
  CHECK_THROWS_AS(simulate(three_layers(), negative, single(3)), std::invalid_argument);
}

TEST_CASE("message sizes: dense fp32 or (index, value) pairs at a density", "[schedule]") {
  CHECK(message_format{}.bytes(1000) == 4000);
  CHECK(message_format{0.01}.bytes(1000) == 80); // k = 10
  CHECK(message_format{0.01}.bytes(1001) == 88); // k = ceil(10.01) = 11
  CHECK(message_format{0.07}.bytes(100) == 56);  // k = 7, not 8, despite binary rounding
  CHECK(message_format{0.001}.bytes(10) == 8);   // at least one element
  CHECK(message_format{1.0}.bytes(10) == 80);
  // quantized: 9 + ceil(n b / 8), whatever the density
  CHECK(message_format{.density = 0.01, .quantized_bits = 5}.bytes(1000) == 9 + 625);
  CHECK(message_format{.quantized_bits = 1}.bytes(1001) == 9 + 126);
  const layer_profile p{{{"a", 1000, 0.0}}, 0.0};
  const cost_model m = cost_model::affine(1e-3, 1e-6, std::nullopt, 0.01);
  CHECK(t_iter_seconds(p, m, single(1)) == Approx(1e-3 + 80e-6));
  const timeline t = simulate(p, m, single(1));
  CHECK(t.groups[0].message_bytes == 80);
}

TEST_CASE("the simulator rejects invalid profiles, models and groupings", "[schedule]") {
  const layer_profile p = three_layers();
  const cost_model m = three_layer_model(compression_placement::off_compute_stream);
  CHECK_THROWS_AS(simulate(layer_profile{}, m, single(1)), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, grouping{}), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, grouping{{0, 2}}), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, grouping{{0, 1}, {2, 3}}), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, grouping{{0, 2}, {1, 3}}), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, grouping{{0, 0}, {0, 3}}), std::invalid_argument);
  CHECK_THROWS_AS(simulate(p, m, per_layer(4)), std::invalid_argument);
  layer_profile bad = p;
  bad.layers[1].numel = 0;
  CHECK_THROWS_AS(simulate(bad, m, per_layer(3)), std::invalid_argument);
  bad = p;
  bad.layers[0].backward_seconds = -1.0;
  CHECK_THROWS_AS(simulate(bad, m, per_layer(3)), std::invalid_argument);
  bad = p;
  bad.layers[0].backward_seconds = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(simulate(bad, m, per_layer(3)), std::invalid_argument);
  bad = p;
  bad.forward_seconds = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(simulate(bad, m, per_layer(3)), std::invalid_argument);
  cost_model no_transport = m;
  no_transport.communication_seconds = nullptr;
  CHECK_THROWS_AS(simulate(p, no_transport, per_layer(3)), std::invalid_argument);
  cost_model negative = m;
  negative.compression_seconds = [](std::uint64_t) { return -1.0; };
  CHECK_THROWS_AS(simulate(p, negative, per_layer(3)), std::invalid_argument);
  CHECK_THROWS_AS(cost_model::affine(-1.0, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(cost_model::affine(0.0, 0.0, std::nullopt, 1.5), std::invalid_argument);
  CHECK_THROWS_AS(cost_model::affine(0.0, 0.0, affine_cost{-1.0, 0.0}), std::invalid_argument);
  CHECK_FALSE(is_valid_grouping(grouping{{0, 3}}, 0));
  CHECK(is_valid_grouping(grouping{{0, 3}}, 3));
}

} // namespace schedule_simulate_test
