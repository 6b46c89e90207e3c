// SPDX-License-Identifier: Apache-2.0
// The umbrella header <gradcomp/schedule.hpp> alone gives every piece it promises: a layer profile
// read from its CSV form, a cost model, the iteration-time simulator, every merge strategy by
// name, and the per-group choice of what to send, on an example worked by hand. The pieces' own
// tests are in test/schedule/.
#include <gradcomp/schedule.hpp>

#include <string_view>

#include "common/catch.hpp"
#include "common/schedule_testing.hpp"

namespace schedule_test {

using namespace gradcomp::schedule;

TEST_CASE("schedule.hpp: a two-layer model planned with the umbrella header alone",
          "[schedule][umbrella]") {
  // two layers of 1 element, 1 s of backward each, messages of 2 s + 0 s per byte: L's message
  // runs [1, 3), L-1 is ready at 2, so alone it runs [3, 5); merged, one message [2, 4)
  const layer_profile p{
      parse_profile_csv("name,numel,backward_seconds\nL-1,1,1\nL,1,1\n", "umbrella.csv"), 0.0};
  REQUIRE(p.size() == 2);
  CHECK(p.layers[1].name == "L");
  CHECK(p.layers[1].backward_seconds == 1.0);
  const cost_model m = cost_model::affine(2.0, 0.0);
  CHECK(t_iter_seconds(p, m, per_layer(2)) == 5.0);
  CHECK(t_iter_seconds(p, m, single(2)) == 4.0);
  const timeline t = simulate(p, m, per_layer(2));
  REQUIRE(t.groups.size() == 2);
  CHECK(t.groups[0].communicate_start_seconds == 1.0);
  CHECK(t.groups[1].communicate_start_seconds == 3.0);
  for (const strategy s : all_strategies) {
    CAPTURE(name(s));
    CHECK(strategy_from_name(name(s)) == s);
    CHECK(is_valid_grouping(plan(s, p, m), 2));
  }
  CHECK(plan(strategy::optimal, p, m) == single(2));
  CHECK(plan(strategy::dlgs_greedy, p, m) == single(2));
  CHECK(plan(strategy::per_layer, p, m) == per_layer(2));
  CHECK(message_format{.density = 0.5}.bytes(10) == 40);
  // Accordion's detector: a 60 % change of the gradient norm is critical at eta 0.5, 10 % is not
  critical_regime r(0.5);
  CHECK(r.observe(10.0));
  CHECK(r.observe(16.0));
  CHECK_FALSE(r.observe(17.6));
}

} // namespace schedule_test
