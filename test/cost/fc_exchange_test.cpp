// SPDX-License-Identifier: Apache-2.0
// gradcomp::fc_exchange (cost/fc_exchange.hpp): the two exchanges of a model-parallel FC layer as
// its doc comment counts them, through the cost model that prices them (cost/hybrid.hpp): 4 data
// collectives against 5 (latency alone), and the values each moves (bandwidth alone, summed over
// the P ranks) against S2's accounting, 2 P M K + M N + P M n_r against exactly S2's
// 3 M K P + 2 M N P (cost/volume.hpp).
#include <gradcomp/cost/fc_exchange.hpp>
#include <gradcomp/cost/hybrid.hpp>
#include <gradcomp/cost/volume.hpp>

#include <type_traits>

#include "../common/catch.hpp"

namespace cost_fc_exchange_test {

using namespace gradcomp;

static_assert(std::is_enum_v<fc_exchange>);
static_assert(fc_exchange::all_to_all != fc_exchange::s2_allgather);

TEST_CASE("fc_exchange: 4 data collectives for all_to_all, 5 for s2_allgather",
          "[cost][fc_exchange]") {
  // latency alone, no argument agreement: each collective costs (P - 1) alpha
  const cost::network latency{.alpha_seconds = 1.0};
  for (const int p : {2, 4, 7}) {
    CAPTURE(p);
    const cost::fc_model_parallel_times a2a = cost::fc_model_parallel_passes(
        8, 100, 40, p, latency, {.exchange = fc_exchange::all_to_all, .argument_agreement = false});
    CHECK(a2a.forward_seconds == 2.0 * (p - 1));  // allgather of inputs, all-to-all of outputs
    CHECK(a2a.backward_seconds == 2.0 * (p - 1)); // all-to-all of gradients, reduce-scatter
    const cost::fc_model_parallel_times s2 = cost::fc_model_parallel_passes(
        8, 100, 40, p, latency,
        {.exchange = fc_exchange::s2_allgather, .argument_agreement = false});
    CHECK(s2.forward_seconds == 2.0 * (p - 1));  // two allgathers
    CHECK(s2.backward_seconds == 3.0 * (p - 1)); // two allgathers and a reduce-scatter
  }
  // the default is all_to_all
  CHECK(cost::fc_cost_options{}.exchange == fc_exchange::all_to_all);
}

TEST_CASE("fc_exchange: the values each moves, against S2's accounting", "[cost][fc_exchange]") {
  // 1 s per byte, 1 byte per value: a rank's seconds are the values it receives; over the P ranks
  // that is P / (P - 1) of S2's count. M = 8, K = 100, N = 40, P = 4: n_r = 10.
  const cost::network bandwidth{.beta_seconds_per_byte = 1.0};
  const double m = 8, k = 100, n = 40;
  const int p = 4;
  const auto values = [&](fc_exchange e) {
    return cost::fc_model_parallel_seconds(
               m, k, n, p, bandwidth,
               {.bytes_per_value = 1.0, .exchange = e, .argument_agreement = false}) *
           p / (p - 1);
  };
  // all_to_all: 2 P M K + M N + P M n_r = 6400 + 320 + 320
  CHECK(values(fc_exchange::all_to_all) == Approx(7040.0));
  // s2_allgather: exactly S2's 3 M K P + 2 M N P = 9600 + 2560
  CHECK(values(fc_exchange::s2_allgather) == Approx(12160.0));
  CHECK(values(fc_exchange::s2_allgather) == Approx(cost::fc_model_parallel_values(m, k, n, p)));
}

} // namespace cost_fc_exchange_test
