// SPDX-License-Identifier: Apache-2.0
// Layer profiles (schedule/layer_profile.hpp): validate() accepts every value at its limits and
// refuses the first one past them (no layers, numel 0 or above 2^40, a time below 0, above 1e6 s
// or NaN), naming the layer's index and name.
#include <gradcomp/schedule/layer_profile.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "../common/catch.hpp"

namespace schedule_layer_profile_test {

using namespace gradcomp::schedule;
using Catch::Contains;

TEST_CASE("layer_profile: the limits are 2^40 elements and 1e6 seconds", "[schedule][profile]") {
  CHECK(max_layer_elements == 1099511627776ULL);
  CHECK(max_layer_seconds == 1e6);
  layer_profile p{{{"conv1", 1, 0.0}, {"", max_layer_elements, max_layer_seconds}},
                  max_layer_seconds};
  CHECK(p.size() == 2);
  CHECK_NOTHROW(validate(p));
  p.forward_seconds = 0.0;
  CHECK_NOTHROW(validate(p));
}

TEST_CASE("layer_profile: validate names the first offending layer", "[schedule][profile]") {
  const layer_profile good{{{"conv1", 100, 0.5}, {"fc", 10, 0.25}, {"bias", 10, 0.0}}, 1.0};
  REQUIRE_NOTHROW(validate(good));

  CHECK_THROWS_WITH(validate(layer_profile{}), Contains("layer profile has no layers"));
  layer_profile p = good;
  p.layers[1].numel = 0;
  CHECK_THROWS_WITH(validate(p), Contains("layer 1 ('fc'): numel 0 is outside [1, 2^40]"));
  p.layers[1].numel = max_layer_elements + 1;
  CHECK_THROWS_WITH(validate(p), Contains("layer 1 ('fc'): numel 1099511627777"));
  p = good;
  p.layers[2].backward_seconds = -0.001;
  CHECK_THROWS_WITH(validate(p), Contains("layer 2 ('bias'): backward_seconds -0.001 s"));
  p.layers[2].backward_seconds = 1e6 * 1.0000001;
  CHECK_THROWS_WITH(validate(p), Contains("outside [0, 1e6]"));
  p.layers[2].backward_seconds = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(validate(p), Contains("layer 2 ('bias'): backward_seconds nan"));
  // the first offending layer is named when two are
  p.layers[0].numel = 0;
  CHECK_THROWS_WITH(validate(p), Contains("layer 0 ('conv1')"));
  p = good;
  p.forward_seconds = -1.0;
  CHECK_THROWS_WITH(validate(p), Contains("forward_seconds -1 s is outside [0, 1e6]"));
  p.forward_seconds = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(validate(p), std::invalid_argument);
  p.forward_seconds = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(validate(p), std::invalid_argument);
}

} // namespace schedule_layer_profile_test
