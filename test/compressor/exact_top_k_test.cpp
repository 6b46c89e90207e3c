// SPDX-License-Identifier: Apache-2.0
// exact_top_k equals sort-and-truncate (|v| descending, ties by lower index) on random,
// heavy-tailed, constant, tied and zero-heavy inputs of every small size and large sizes,
// for any thread count.
#include <gradcomp/compressor/exact_top_k.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "../common/catch.hpp"
#include "../common/first_failure.hpp"
#include "../common/generators.hpp"

namespace compressor_exact_top_k_test {

using namespace gradcomp;
using test::distribution;

namespace {
// `expected_indices`: reference_top_k(x, k) for this density's k, when the caller has it (one sort
// shared by several thread counts).
void check_against_reference(const std::vector<float>& x,
                             double density,
                             unsigned threads,
                             const std::vector<std::uint32_t>* expected_indices = nullptr) {
  exact_top_k c({.density = density, .threads = threads});
  sparse_message m;
  const selection_stats s = c.compress(x, m);
  const std::size_t k = k_for_density(x.size(), density);
  REQUIRE(s.numel == x.size());
  REQUIRE(s.k_target == k);
  REQUIRE(s.k_selected == k);
  REQUIRE(s.exact == !x.empty()); // nothing is computed for an empty gradient
  REQUIRE_FALSE(s.fallback);
  REQUIRE(m.dense_length_elements == x.size());
  REQUIRE_FALSE(m.dense);
  REQUIRE(test::ascending_unique_in_range(m));
  const auto expected = expected_indices ? *expected_indices : test::reference_top_k(x, k);
  REQUIRE(m.indices == expected);
  REQUIRE(test::first_failure(m.nnz(), [&](std::size_t j) {
            return std::bit_cast<std::uint32_t>(m.values[j]) ==
                   std::bit_cast<std::uint32_t>(x[m.indices[j]]);
          }) == m.nnz());
  if (k > 0) {
    float smallest = INFINITY;
    for (float v : m.values) {
      smallest = std::min(smallest, std::abs(v));
    }
    REQUIRE(s.threshold == smallest);
  }
}
} // namespace

TEST_CASE("exact top-k equals sort-and-truncate on small inputs of every size", "[exact_top_k]") {
  const auto dist = GENERATE(distribution::normal, distribution::heavy_tailed,
                             distribution::constant, distribution::tied, distribution::with_zeros);
  for (std::size_t n = 0; n <= 70; ++n) {
    for (double density : {0.01, 0.1, 0.5, 0.999, 1.0}) {
      CAPTURE(test::name(dist), n, density);
      check_against_reference(test::make_values(dist, n, n + 1), density, 1);
    }
  }
}

TEST_CASE("exact top-k equals sort-and-truncate on multi-chunk inputs", "[exact_top_k]") {
  const auto dist = GENERATE(distribution::normal, distribution::heavy_tailed,
                             distribution::constant, distribution::tied, distribution::with_zeros);
  const std::size_t n = GENERATE(65535, 65536, 65537, 300001);
  const double density = GENERATE(0.001, 0.01, 0.1);
  CAPTURE(test::name(dist), n, density);
  const auto x = test::make_values(dist, n, 17 * n);
  const auto expected = test::reference_top_k(x, k_for_density(n, density));
  for (const unsigned threads : {1u, 2u, 0u}) {
    CAPTURE(threads);
    check_against_reference(x, density, threads, &expected);
  }
}

TEST_CASE("k = n selects everything, k = 1 the largest", "[exact_top_k]") {
  const auto x = test::make_values(distribution::heavy_tailed, 1000, 3);
  check_against_reference(x, 1.0, 0);
  exact_top_k c(1e-9);
  sparse_message m;
  c.compress(x, m);
  REQUIRE(m.nnz() == 1);
  for (float v : x) {
    CHECK(std::abs(v) <= std::abs(m.values[0]));
  }
}

TEST_CASE("exact top-k handles magnitudes that differ only in low bits", "[exact_top_k]") {
  // all values in one top-level radix bucket: the refinement passes decide everything
  std::vector<float> x(5000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::bit_cast<float>(0x3f800000u + static_cast<std::uint32_t>((i * 7919) % 1024));
    if (i % 2) {
      x[i] = -x[i];
    }
  }
  for (double d : {0.001, 0.01, 0.3}) {
    CAPTURE(d);
    check_against_reference(x, d, 0);
  }
}

TEST_CASE("infinities and NaN are ordered above every finite magnitude", "[exact_top_k]") {
  std::vector<float> x(100, 1.0f);
  x[10] = -INFINITY;
  x[20] = std::numeric_limits<float>::quiet_NaN();
  x[30] = 5.0f;
  exact_top_k c(0.03);
  sparse_message m;
  c.compress(x, m);
  CHECK(m.indices == std::vector<std::uint32_t>{10, 20, 30});
}

TEST_CASE("an empty gradient gives an empty message", "[exact_top_k]") {
  exact_top_k c(0.5);
  sparse_message m;
  m.indices = {1, 2};
  m.values = {1, 2};
  const auto s = c.compress(std::vector<float>{}, m);
  CHECK(s.k_target == 0);
  CHECK(m.nnz() == 0);
  CHECK(m.indices.empty());
  CHECK(m.dense_length_elements == 0);
}

TEST_CASE("selected values are rounded to the requested wire type", "[exact_top_k]") {
  const auto x = test::make_values(distribution::normal, 1000, 5);
  exact_top_k c({.density = 0.1, .values = value_type::bf16});
  sparse_message m;
  c.compress(x, m);
  REQUIRE(m.values_type == value_type::bf16);
  for (std::size_t j = 0; j < m.nnz(); ++j) {
    CHECK(m.values[j] == round_to(value_type::bf16, x[m.indices[j]]));
  }
}

TEST_CASE("invalid options are rejected", "[exact_top_k]") {
  CHECK_THROWS_AS(exact_top_k(0.0), std::invalid_argument);
  CHECK_THROWS_AS(exact_top_k(1.01), std::invalid_argument);
}

namespace {
// An input on which the sample-guided fast path is misled: every sampled position (the
// stride's midpoints) holds a large value, so the sample's threshold admits fewer than k
// candidates and the full radix select must take over.
std::vector<float> sample_misleading_input(std::size_t n) {
  const std::size_t stride = n / gradcomp::detail::top_k_sample_elements;
  std::vector<float> x(n, 0.5f);
  for (std::size_t i = stride / 2; i < n; i += stride) {
    x[i] = 1.0f;
  }
  for (std::size_t i = 3; i < n; i += 97) {
    x[i] = 2.0f + static_cast<float>(i % 13);
  }
  return x;
}
} // namespace

TEST_CASE("exact top-k is exact when the sample misleads the fast path", "[exact_top_k]") {
  const auto x = sample_misleading_input(std::size_t{1} << 17);
  check_against_reference(x, 0.1, 0);
  check_against_reference(x, 0.01, 0);
}

TEST_CASE("exact top-k with error feedback is exact when the sample misleads", "[exact_top_k]") {
  const auto g = sample_misleading_input(std::size_t{1} << 17);
  std::vector<float> residual(g.size(), 0.0f);
  exact_top_k c(0.1);
  sparse_message m;
  c.compress_accumulate(residual, g, m);
  CHECK(m.indices == test::reference_top_k(g, k_for_density(g.size(), 0.1)));
  std::vector<float> sent(g.size());
  decompress(m, sent);
  for (std::size_t i = 0; i < g.size(); ++i) {
    REQUIRE(sent[i] + residual[i] == g[i]); // accumulated exactly once
  }
}

} // namespace compressor_exact_top_k_test
