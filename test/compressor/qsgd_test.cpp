// SPDX-License-Identifier: Apache-2.0
// gradcomp::qsgd (compressor/qsgd.hpp): s levels of the L2 norm at 1 + bit_width(s) bits,
// unbiased (the mean of many draws within 6 standard errors of the input), the wire size of one
// scale, the levels' limits.
#include <gradcomp/compressor/qsgd.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/quantizer_testing.hpp"
#include "../common/same_bits.hpp"

namespace compressor_qsgd_test {

using namespace gradcomp;
using Catch::Matchers::Contains;
using test::direct_norm;
using test::require_levels;
using test::require_round_trip;
using test::require_unbiased;

TEST_CASE("qsgd: s levels of the L2 norm, unbiased, 1 + bit_width(s) bits", "[quantizer]") {
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 64, 6);
  for (const std::uint32_t levels : {1u, 4u, 15u, 127u}) {
    INFO("levels " << levels);
    qsgd c(levels, 1);
    sparse_message m;
    c.compress(x, m);
    require_levels(m);
    CHECK(m.quantization_levels == levels);
    CHECK(m.quantization_scale == static_cast<float>(direct_norm(x)));
    const bool zero = std::any_of(m.values.begin(), m.values.end(), [](float v) { return v == 0; });
    require_round_trip(m, quantized_code_bits(levels, zero));
    require_unbiased(qsgd(levels, 2), x, 3000);
  }
  // 15 levels, one scale: 5 bits per element (buckets: mpi/detail/shards_test.cpp)
  const std::vector<float> big = test::make_values(test::distribution::normal, 10000, 1);
  sparse_message m;
  qsgd({.levels = 15, .bucket_elements = 0}).compress(big, m);
  CHECK(m.quantization_segments.empty());
  CHECK(encoded_size_bytes(m) == 32 + 9 + (10000 * 5 + 7) / 8);
  CHECK_THROWS_WITH(qsgd(0), Contains("qsgd: levels 0 outside [1, 32768]"));
  CHECK_THROWS_WITH(qsgd(40000), Contains("levels 40000 outside [1, 32768]"));
}

} // namespace compressor_qsgd_test
