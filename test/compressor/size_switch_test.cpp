// SPDX-License-Identifier: Apache-2.0
// gradcomp::size_switch hands each length to the right compressor, with and without error
// feedback, and its results equal the chosen compressor's.
#include <gradcomp/gradcomp.hpp>

#include <random>
#include <vector>

#include "../common/catch.hpp"

namespace compressor_size_switch_test {

using namespace gradcomp;

namespace {
std::vector<float> normal_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) {
    x = d(rng);
  }
  return v;
}
} // namespace

TEST_CASE("size_switch sends short gradients with Small and long ones with Large",
          "[size_switch]") {
  size_switch c(100, dense(), exact_top_k(0.1));
  static_assert(compressor<decltype(c)>);
  sparse_message m, reference;
  const auto short_grad = normal_values(99, 1);
  const auto long_grad = normal_values(100, 2);
  c.compress(short_grad, m);
  CHECK(m.dense);
  CHECK(m.values == short_grad);
  const selection_stats s = c.compress(long_grad, m);
  exact_top_k(0.1).compress(long_grad, reference);
  CHECK_FALSE(m.dense);
  CHECK(s.k_selected == 10);
  CHECK(m.indices == reference.indices);
  CHECK(m.values == reference.values);
}

TEST_CASE("size_switch under error_feedback keeps the chosen compressor's residual",
          "[size_switch]") {
  const auto g = normal_values(1000, 3);
  error_feedback<size_switch<dense, exact_top_k>> small_threshold(
      1000, size_switch(2000, dense(), exact_top_k(0.01)));
  error_feedback<size_switch<dense, exact_top_k>> large_threshold(
      1000, size_switch(10, dense(), exact_top_k(0.01)));
  error_feedback<exact_top_k> reference(1000, exact_top_k(0.01));
  sparse_message a, b, r;
  for (int it = 0; it < 3; ++it) {
    small_threshold.compress(g, a);
    large_threshold.compress(g, b);
    reference.compress(g, r);
    CHECK(a.dense);
    CHECK(a.values == g); // dense fp32: nothing is left behind
    CHECK(b.indices == r.indices);
    CHECK(b.values == r.values);
  }
  for (float x : small_threshold.residual()) {
    REQUIRE(x == 0.0f);
  }
  CHECK(std::vector<float>(large_threshold.residual().begin(), large_threshold.residual().end()) ==
        std::vector<float>(reference.residual().begin(), reference.residual().end()));
}

} // namespace compressor_size_switch_test
