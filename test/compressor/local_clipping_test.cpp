// SPDX-License-Identifier: Apache-2.0
// DGC's local gradient clipping (gradcomp::clip_by_global_norm, local_clip_threshold) against a
// direct computation: the joint L2 norm in long double, each value times max_norm / norm, the
// threshold divided by sqrt(N); and clipping before error feedback conserves the clipped values.
#include <gradcomp/gradcomp.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace compressor_local_clipping_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

long double reference_norm(const std::vector<std::vector<float>>& tensors) {
  long double sum = 0.0L;
  for (const auto& t : tensors) {
    for (const float v : t) {
      sum += static_cast<long double>(v) * static_cast<long double>(v);
    }
  }
  return std::sqrt(sum);
}

std::vector<std::span<float>> spans_of(std::vector<std::vector<float>>& tensors) {
  return {tensors.begin(), tensors.end()};
}

} // namespace

TEST_CASE("local clipping threshold is the global one over sqrt(N)", "[local_clipping]") {
  CHECK(local_clip_threshold(2.0, 4) == 1.0);
  CHECK(local_clip_threshold(5.0, 1) == 5.0);
  CHECK(local_clip_threshold(1.0, 16) == 0.25);
  CHECK(local_clip_threshold(3.0, 2) == Approx(3.0 / 1.4142135623730951).epsilon(1e-15));
  REQUIRE_THROWS_WITH(local_clip_threshold(0.0, 4), Contains("global_max_norm 0 must be finite"));
  REQUIRE_THROWS_WITH(local_clip_threshold(-1.0, 4), Contains("global_max_norm -1"));
  REQUIRE_THROWS_WITH(local_clip_threshold(std::numeric_limits<double>::infinity(), 4),
                      Contains("global_max_norm inf"));
  REQUIRE_THROWS_WITH(local_clip_threshold(1.0, 0), Contains("workers 0 is below the minimum 1"));
}

TEST_CASE("clipping by the global norm scales every tensor by max_norm / norm",
          "[local_clipping]") {
  const auto dist = GENERATE(test::distribution::normal, test::distribution::heavy_tailed,
                             test::distribution::with_zeros);
  std::vector<std::vector<float>> tensors = {test::make_values(dist, 1000, 1, 0.1f),
                                             test::make_values(dist, 7, 2, 3.0f),
                                             {},
                                             test::make_values(dist, 5000, 3, 0.01f)};
  const std::vector<std::vector<float>> original = tensors;
  const long double norm = reference_norm(original);
  REQUIRE(norm > 1.0L);

  SECTION("above the threshold") {
    const double max_norm = static_cast<double>(norm) / 3.0;
    const clip_result r = clip_by_global_norm(spans_of(tensors), max_norm);
    CHECK(r.clipped);
    CHECK(r.norm == Approx(static_cast<double>(norm)).epsilon(1e-12));
    CHECK(r.scale == Approx(1.0 / 3.0).epsilon(1e-12));
    const auto factor = static_cast<float>(max_norm / static_cast<double>(norm));
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      for (std::size_t i = 0; i < tensors[t].size(); ++i) {
        REQUIRE(tensors[t][i] == Approx(original[t][i] * factor).epsilon(1e-6).margin(1e-30));
      }
    }
    CHECK(static_cast<double>(reference_norm(tensors)) == Approx(max_norm).epsilon(1e-5));
  }
  SECTION("at or below the threshold nothing changes") {
    const clip_result r = clip_by_global_norm(spans_of(tensors), static_cast<double>(norm) * 1.01);
    CHECK_FALSE(r.clipped);
    CHECK(r.scale == 1.0);
    CHECK(tensors == original);
  }
  SECTION("one tensor") {
    const long double one = reference_norm({original[0]});
    const clip_result r = clip_by_norm(tensors[0], 0.5);
    CHECK(r.clipped == (one > 0.5L));
    CHECK(static_cast<double>(reference_norm({tensors[0]})) ==
          Approx(std::min(0.5, static_cast<double>(one))).epsilon(1e-5));
    CHECK(tensors[1] == original[1]);
  }
}

TEST_CASE("clipping leaves non-finite gradients alone and names a bad threshold",
          "[local_clipping]") {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  const std::vector<float> before = g;
  const clip_result r = clip_by_norm(g, 0.1);
  CHECK_FALSE(r.clipped);
  CHECK(std::isinf(r.norm));
  CHECK(g == before);
  REQUIRE_THROWS_WITH(clip_by_norm(g, 0.0), Contains("max_norm 0 must be finite and > 0"));
  REQUIRE_THROWS_WITH(clip_by_norm(g, std::numeric_limits<double>::quiet_NaN()),
                      Contains("max_norm nan"));
  CHECK(g == before);
  std::vector<float> empty;
  CHECK(clip_by_norm(empty, 1.0).norm == 0.0);
}

TEST_CASE("clipping before error feedback: the residual accumulates the clipped gradient",
          "[local_clipping][error_feedback]") {
  const std::size_t n = 2000;
  const double max_norm = local_clip_threshold(1.0, 4); // 0.5 per worker
  error_feedback<exact_top_k> ef(n, exact_top_k(0.01));
  sparse_message m;
  std::vector<float> sent(n);
  for (int it = 0; it < 10; ++it) {
    auto g = test::make_values(test::distribution::normal, n, 50 + it, 0.1f);
    clip_by_norm(g, max_norm);
    CHECK(static_cast<double>(reference_norm({g})) <= max_norm * (1 + 1e-6));
    const std::vector<float> old(ef.residual().begin(), ef.residual().end());
    ef.compress(g, m);
    decompress(m, sent);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(std::bit_cast<std::uint32_t>(sent[i] + ef.residual()[i]) ==
              std::bit_cast<std::uint32_t>(old[i] + g[i] + 0.0f));
    }
  }
}

} // namespace compressor_local_clipping_test
