// SPDX-License-Identifier: Apache-2.0
// The scheduler's cost model (schedule/cost_model.hpp): affine_cost, the message sizes of
// message_format worked by hand from its doc comment (dense fp32, index-value pairs at a
// density, quantized codes with and without a segment table), cost_model::affine and its checks.
#include <gradcomp/schedule/cost_model.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>

#include "../common/catch.hpp"

namespace schedule_cost_model_test {

using namespace gradcomp::schedule;
using Catch::Contains;

TEST_CASE("cost_model: affine_cost is fixed + per unit x units", "[schedule][cost_model]") {
  const affine_cost t{2e-5, 1e-9};
  CHECK(t(0) == 2e-5);
  CHECK(t(1'000'000) == Approx(2e-5 + 1e-3));
  CHECK(affine_cost{}(123) == 0.0);
  CHECK(affine_cost{0.5, 0.25}(4) == 1.5); // exact in binary
}

TEST_CASE("cost_model: message bytes, dense, at a density and quantized, by hand",
          "[schedule][cost_model]") {
  // dense fp32: 4 bytes per element
  CHECK(message_format{}.bytes(0) == 0);
  CHECK(message_format{}.bytes(1000) == 4000);
  // pairs of 8 bytes for k = ceil(D n) clamped to [1, n]
  const message_format one_percent{.density = 0.01};
  CHECK(one_percent.bytes(1000) == 8 * 10);
  CHECK(one_percent.bytes(1001) == 8 * 11); // ceil(10.01)
  CHECK(one_percent.bytes(5) == 8 * 1);     // at least one element
  CHECK(one_percent.bytes(0) == 0);
  CHECK(message_format{.density = 1.0}.bytes(7) == 8 * 7);
  CHECK(message_format{.density = 0.07}.bytes(100) == 8 * 7); // 0.07 x 100 counts as 7
  // quantized, one scale: 9 + ceil(n b / 8)
  CHECK(message_format{.quantized_bits = 5}.bytes(10) == 9 + 7);     // 50 bits
  CHECK(message_format{.quantized_bits = 1}.bytes(1001) == 9 + 126); // 1001 bits
  CHECK(message_format{.quantized_bits = 2}.bytes(0) == 9);
  // the bits take precedence over a density
  CHECK(message_format{.density = 0.01, .quantized_bits = 2}.bytes(100) == 9 + 25);
  // buckets of d = 4 over n = 10: full buckets 4, 4 and a rest of 2; table 4 + 3 x (1 + 4)
  CHECK(message_format{.quantized_bits = 5, .quantized_bucket_elements = 4}.bytes(10) ==
        9 + (4 + 3 * 5) + 7);
  // n divisible by d: no rest entry; 4 + 2 x 5
  CHECK(message_format{.quantized_bits = 5, .quantized_bucket_elements = 4}.bytes(8) ==
        9 + (4 + 2 * 5) + 5);
  // d = 200 takes a two-byte varint (>= 128): 1000 / 200 = 5 buckets, 4 + 5 x (2 + 4)
  CHECK(message_format{.quantized_bits = 5, .quantized_bucket_elements = 200}.bytes(1000) ==
        9 + (4 + 5 * 6) + 625);
  // d = 0, or d >= n: one scale, no table
  CHECK(message_format{.quantized_bits = 5, .quantized_bucket_elements = 0}.bytes(1000) == 9 + 625);
  CHECK(message_format{.quantized_bits = 5, .quantized_bucket_elements = 1000}.bytes(1000) ==
        9 + 625);
  CHECK_THROWS_WITH(message_format{.density = 0.0}.bytes(10), Contains("density 0"));
  // the wire's sparse formats: fp16 values with delta + varint indices at 5 %: k = 500 pairs of
  // 2 + (1 + 0.95^128 + ...) bytes, rounded up; u32 indices with fp16 values: 6 bytes a pair
  const double varint =
      gradcomp::expected_index_bytes(gradcomp::index_encoding::delta_varint, 0.05);
  CHECK(
      message_format{.density = 0.05,
                     .pairs = {.value_bytes = 2, .indices = gradcomp::index_encoding::delta_varint}}
          .bytes(10000) == static_cast<std::uint64_t>(std::ceil(500 * (2 + varint))));
  CHECK(message_format{.density = 0.05, .pairs = {.value_bytes = 2}}.bytes(10000) == 6 * 500);
  CHECK_THROWS_WITH((message_format{.density = 0.05, .pairs = {.value_bytes = 3}}.bytes(10)),
                    Contains("pairs.value_bytes 3 is not 1, 2 or 4"));
  CHECK_THROWS_WITH(message_format{.density = 1.5}.bytes(10), Contains("density 1.5"));
}

TEST_CASE("cost_model: affine builds T = alpha + beta bytes and s = a + b numel",
          "[schedule][cost_model]") {
  const cost_model plain = cost_model::affine(1e-4, 1e-9);
  REQUIRE(plain.communication_seconds);
  CHECK(plain.communication_seconds(1000) == Approx(1e-4 + 1e-6));
  CHECK_FALSE(plain.compression_seconds); // no compression step
  CHECK_FALSE(plain.message.density.has_value());
  CHECK(plain.placement == compression_placement::off_compute_stream);
  CHECK_NOTHROW(gradcomp::schedule::detail::validate(plain));

  const cost_model full = cost_model::affine(0.5, 0.25, affine_cost{0.125, 0.0625}, 0.5,
                                             compression_placement::on_compute_stream);
  CHECK(full.communication_seconds(8) == 2.5);
  REQUIRE(full.compression_seconds);
  CHECK(full.compression_seconds(16) == 1.125);
  CHECK(full.message.density == 0.5);
  CHECK(full.message.bytes(10) == 8 * 5);
  CHECK(full.placement == compression_placement::on_compute_stream);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(cost_model::affine(-1.0, 0.0), Contains("alpha -1 s"));
  CHECK_THROWS_WITH(cost_model::affine(nan, 0.0), Contains("alpha nan"));
  CHECK_THROWS_WITH(cost_model::affine(0.0, -2.0), Contains("beta -2 s/B"));
  CHECK_THROWS_WITH(cost_model::affine(0.0, std::numeric_limits<double>::infinity()),
                    Contains("beta inf"));
  CHECK_THROWS_WITH(cost_model::affine(0.0, 0.0, affine_cost{-1.0, 0.0}),
                    Contains("compression cost (-1, 0)"));
  CHECK_THROWS_WITH(cost_model::affine(0.0, 0.0, std::nullopt, 2.0), Contains("density 2"));

  // a model without a communication function, or with a bad density, is refused
  CHECK_THROWS_WITH(gradcomp::schedule::detail::validate(cost_model{}),
                    Contains("cost_model: communication_seconds is empty"));
  cost_model bad = plain;
  bad.message.density = -0.5;
  CHECK_THROWS_WITH(gradcomp::schedule::detail::validate(bad), Contains("density -0.5"));
  // a cost function's value must be finite and >= 0
  CHECK(gradcomp::schedule::detail::checked_cost(0.25, "T", 8) == 0.25);
  CHECK_THROWS_WITH(gradcomp::schedule::detail::checked_cost(-1.0, "T", 8),
                    Contains("T(8) = -1 s"));
  CHECK_THROWS_AS(gradcomp::schedule::detail::checked_cost(nan, "s", 3), std::invalid_argument);
}

} // namespace schedule_cost_model_test
