// SPDX-License-Identifier: Apache-2.0
// gradcomp::sampled_threshold (compressor/sampled_threshold.hpp): the selection is exactly what
// the sampled threshold says (checked by scanning the input), within the guard band, on every
// input shape; reproducible for a seed; k is hit on smooth data; options are validated.
#include <gradcomp/compressor/sampled_threshold.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/estimator_testing.hpp"
#include "../common/generators.hpp"

namespace compressor_sampled_threshold_test {

using namespace gradcomp;
using test::distribution;
using test::run_static;

TEST_CASE("sampled_threshold selects exactly what its threshold says, within the guard band",
          "[estimators]") {
  const auto dist = GENERATE(distribution::normal, distribution::heavy_tailed,
                             distribution::constant, distribution::tied, distribution::with_zeros);
  const std::size_t n = GENERATE(0, 1, 7, 1000, 200000);
  const double d = GENERATE(0.001, 0.01, 0.1);
  CAPTURE(test::name(dist), n, d);
  run_static(sampled_threshold({.density = d, .seed = n}), dist, n, n + 3);
}

TEST_CASE("sampled threshold is reproducible for a seed and hits k on smooth data",
          "[estimators]") {
  const auto x = test::make_values(distribution::heavy_tailed, 1 << 20, 4);
  sampled_threshold a({.density = 0.01, .seed = 9});
  sampled_threshold b({.density = 0.01, .seed = 9});
  sparse_message ma, mb;
  const auto sa = a.compress(x, ma);
  b.compress(x, mb);
  CHECK(ma.indices == mb.indices);
  CHECK_FALSE(sa.fallback);
  CHECK(std::abs(static_cast<double>(sa.k_selected) / sa.k_target - 1.0) < 0.3);
}

TEST_CASE("sampled threshold options are validated", "[estimators]") {
  CHECK_THROWS_AS(sampled_threshold({.density = 0.01, .sample_fraction = 0.0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(sampled_threshold({.density = 0.01, .min_samples = 0}), std::invalid_argument);
}

} // namespace compressor_sampled_threshold_test
