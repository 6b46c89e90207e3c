// SPDX-License-Identifier: Apache-2.0
// gradcomp::scaled_sign (compressor/scaled_sign.hpp): +-mean |x| (or the root mean square) at one
// bit per element, each value checked against its definition, the wire round trip at 32 + 9 +
// ceil(n / 8) bytes; all zeros at two bits.
#include <gradcomp/compressor/scaled_sign.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/quantizer_testing.hpp"
#include "../common/same_bits.hpp"

namespace compressor_scaled_sign_test {

using namespace gradcomp;
using Catch::Matchers::Contains;
using test::direct_mean_abs;
using test::direct_norm;
using test::require_levels;
using test::require_round_trip;

TEST_CASE("scaled_sign: +-mean |x| at one bit per element", "[quantizer]") {
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 1001, 3);
  scaled_sign c;
  sparse_message m;
  const selection_stats s = c.compress(x, m);
  require_levels(m);
  CHECK(m.quantization_levels == 1);
  CHECK(m.quantization_scale == static_cast<float>(direct_mean_abs(x)));
  CHECK(s.k_selected == x.size());
  CHECK(s.threshold == m.quantization_scale);
  for (std::size_t i = 0; i < x.size(); ++i) {
    REQUIRE(m.values[i] == (x[i] >= 0.0f ? m.quantization_scale : -m.quantization_scale));
  }
  require_round_trip(m, 1);
  // DeepSpeed's scale: the root mean square
  scaled_sign rms({.scale = sign_scale::rms});
  rms.compress(x, m);
  CHECK(m.quantization_scale ==
        static_cast<float>(direct_norm(x) / std::sqrt(static_cast<double>(x.size()))));
  // every value 0: scale 1, codes 0, two bits each
  const std::vector<float> zeros(77, 0.0f);
  c.compress(zeros, m);
  CHECK(m.quantization_scale == 1.0f);
  for (const float v : m.values) {
    REQUIRE(std::bit_cast<std::uint32_t>(v) == 0u);
  }
  require_round_trip(m, 2);
}

} // namespace compressor_scaled_sign_test
