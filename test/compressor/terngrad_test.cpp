// SPDX-License-Identifier: Apache-2.0
// gradcomp::terngrad (compressor/terngrad.hpp): {-s, 0, s} with s = max |x| at two bits,
// unbiased (the mean of many draws within 6 standard errors of the input), the same codes for
// the same seed.
#include <gradcomp/compressor/terngrad.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/quantizer_testing.hpp"
#include "../common/same_bits.hpp"

namespace compressor_terngrad_test {

using namespace gradcomp;
using Catch::Matchers::Contains;
using test::require_round_trip;
using test::require_unbiased;

TEST_CASE("terngrad: {-s, 0, s} with s = max |x|, unbiased, two bits", "[quantizer]") {
  std::vector<float> x = test::make_values(test::distribution::normal, 64, 5);
  terngrad c({.seed = 3});
  sparse_message m;
  c.compress(x, m);
  float max_abs = 0.0f;
  for (const float v : x) {
    max_abs = std::max(max_abs, std::abs(v));
  }
  CHECK(m.quantization_scale == max_abs);
  CHECK(m.quantization_levels == 1);
  require_round_trip(m, 2);
  require_unbiased(terngrad({.seed = 4}), x, 4000);
  // the same seed draws the same codes; another seed others
  terngrad a({.seed = 7}), b({.seed = 7}), other({.seed = 8});
  sparse_message ma, mb, mo;
  a.compress(x, ma);
  b.compress(x, mb);
  other.compress(x, mo);
  CHECK(test::same_bits(ma.values, mb.values));
  CHECK_FALSE(test::same_bits(ma.values, mo.values));
}

} // namespace compressor_terngrad_test
