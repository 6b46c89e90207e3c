// SPDX-License-Identifier: Apache-2.0
// gradcomp::powersgd_layer (compressor/powersgd.hpp) on one worker with the triple-loop GEMM of
// test/common/naive_gemm.hpp (no BLAS, no MPI; the MPI allreduce of P and Q is tested in
// test/mpi/powersgd_allreduce_test.cpp): which layers compress (the formula counted by hand), the
// options' checks, Gram-Schmidt against hand-worked columns, one power step against the projection
// P P^T M computed in double, a rank-1 gradient recovered, error feedback's conservation, the warm
// start and the seeded starting Q, and the length checks.
#include <gradcomp/compressor/powersgd.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/naive_gemm.hpp"

namespace compressor_powersgd_test {

using namespace gradcomp;
using Catch::Contains;
using layer = powersgd_layer<test::naive_gemm>;

namespace {

std::vector<float> random_matrix(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> m(rows * cols);
  for (float& v : m) {
    v = normal(rng);
  }
  return m;
}

// one iteration on one worker (the allreduces of P and Q are identities): the average
std::vector<float> step(layer& l, const std::vector<float>& gradient, std::vector<float>& p) {
  p.assign(l.p_elements(), 0.0f);
  std::vector<float> q(l.q_elements());
  std::vector<float> average(gradient.size());
  l.compute_p(gradient, p);
  l.compute_q(p, q);
  l.finish(p, q, average);
  return average;
}

} // namespace

TEST_CASE("powersgd: which layers compress, worked by hand", "[powersgd]") {
  // rows x cols > rate x (rows + cols) x r, r = min(rank, rows, cols)
  CHECK(powersgd_compresses(10, 10, {.rank = 1}));       // 100 > 2 x 20 x 1
  CHECK_FALSE(powersgd_compresses(4, 4, {.rank = 2}));   // 16 > 2 x 8 x 2 is false
  CHECK(powersgd_compresses(9, 9, {.rank = 2}));         // 81 > 72
  CHECK_FALSE(powersgd_compresses(8, 8, {.rank = 2}));   // 64 > 64 is false
  CHECK_FALSE(powersgd_compresses(1, 100, {.rank = 1})); // a vector: 100 > 202 is false
  CHECK(powersgd_compresses(64, 64, {.rank = 4, .min_compression_rate = 7.9})); // 4096 > 4044.8
  CHECK_FALSE(powersgd_compresses(64, 64, {.rank = 4, .min_compression_rate = 8.0}));
  CHECK_FALSE(powersgd_compresses(100, 3, {.rank = 8, .min_compression_rate = 1.0})); // 300 > 309
  CHECK_FALSE(powersgd_compresses(100, 100, {.rank = 0}));                            // r = 0
}

TEST_CASE("powersgd: options are checked, naming the value", "[powersgd]") {
  CHECK_NOTHROW(check_powersgd_options({}));
  CHECK_THROWS_WITH(check_powersgd_options({.rank = 0}), Contains("powersgd: rank 0 is below 1"));
  CHECK_THROWS_WITH(check_powersgd_options({.min_compression_rate = 0.5}),
                    Contains("min_compression_rate 0.5 is below 1"));
  CHECK_THROWS_AS(
      check_powersgd_options({.min_compression_rate = std::numeric_limits<double>::quiet_NaN()}),
      std::invalid_argument);
  CHECK_THROWS_WITH(
      layer(4, 4, {.rank = 2}, 0),
      Contains("a 4 x 4 layer at rank 2 does not compress by min_compression_rate 2"));
  CHECK_THROWS_WITH(layer(10, 10, {.rank = 0}, 0), Contains("rank 0"));
  const layer l(20, 12, {.rank = 3}, 0);
  CHECK(l.rows() == 20);
  CHECK(l.cols() == 12);
  CHECK(l.rank() == 3);
  CHECK(l.p_elements() == 60);
  CHECK(l.q_elements() == 36);
  CHECK(l.residual().size() == 240);
  CHECK(std::all_of(l.residual().begin(), l.residual().end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("powersgd: Gram-Schmidt on hand-worked columns", "[powersgd]") {
  // columns (3, 4, 0) and (1, 1, 1): e = (0.6, 0.8, 0); (1, 1, 1) - 1.4 e = (0.16, -0.12, 1)
  std::vector<float> a{3, 1, 4, 1, 0, 1};
  layer::orthonormalize_columns(a, 3, 2);
  const double norm = std::sqrt(0.16 * 0.16 + 0.12 * 0.12 + 1.0);
  CHECK(a[0] == Approx(0.6));
  CHECK(a[2] == Approx(0.8));
  CHECK(a[4] == 0.0f);
  CHECK(a[1] == Approx(0.16 / norm));
  CHECK(a[3] == Approx(-0.12 / norm));
  CHECK(a[5] == Approx(1.0 / norm));
  // a dependent column and a zero column become 0
  std::vector<float> b{1, 2, 0, 2, 4, 0};
  layer::orthonormalize_columns(b, 2, 3);
  CHECK(b[0] == Approx(1 / std::sqrt(5.0)));
  CHECK(b[3] == Approx(2 / std::sqrt(5.0)));
  CHECK(b[1] == 0.0f);
  CHECK(b[4] == 0.0f);
  CHECK(b[2] == 0.0f);
  CHECK(b[5] == 0.0f);
}

TEST_CASE("powersgd: one step is the projection P P^T M, and error feedback keeps the rest",
          "[powersgd]") {
  const std::size_t rows = 24, cols = 16, rank = 3;
  layer l(rows, cols, {.rank = rank, .seed = 5}, 2);
  const std::vector<float> g = random_matrix(rows, cols, 1);
  std::vector<float> p;
  const std::vector<float> average = step(l, g, p);
  // P's columns are orthonormal
  for (std::size_t i = 0; i < rank; ++i) {
    for (std::size_t j = 0; j < rank; ++j) {
      double dot = 0.0;
      for (std::size_t r = 0; r < rows; ++r) {
        dot += static_cast<double>(p[r * rank + i]) * p[r * rank + j];
      }
      CHECK(dot == Approx(i == j ? 1.0 : 0.0).margin(1e-5));
    }
  }
  // the average is P P^T M (M = the gradient: the residual started at 0), in double
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      double projected = 0.0;
      for (std::size_t j = 0; j < rank; ++j) {
        double pt_m = 0.0; // (P^T M)[j][c]
        for (std::size_t s = 0; s < rows; ++s) {
          pt_m += static_cast<double>(p[s * rank + j]) * g[s * cols + c];
        }
        projected += static_cast<double>(p[r * rank + j]) * pt_m;
      }
      REQUIRE(average[r * cols + c] == Approx(projected).margin(1e-4));
      // residual = M - P Q^T, one rounding
      const float sum = l.residual()[r * cols + c] + average[r * cols + c];
      REQUIRE(std::abs(sum - g[r * cols + c]) <= 1e-6f * (1.0f + std::abs(g[r * cols + c])));
    }
  }
  // the next step starts from M = residual + gradient
  const std::vector<float> before(l.residual().begin(), l.residual().end());
  const std::vector<float> g2 = random_matrix(rows, cols, 2);
  const std::vector<float> average2 = step(l, g2, p);
  for (std::size_t i = 0; i < g2.size(); ++i) {
    const float sum = l.residual()[i] + average2[i];
    REQUIRE(std::abs(sum - (before[i] + g2[i])) <= 1e-5f * (1.0f + std::abs(before[i] + g2[i])));
  }
}

TEST_CASE("powersgd: a rank-1 gradient comes back after one step, the residual near 0",
          "[powersgd]") {
  const std::size_t rows = 12, cols = 10;
  const std::vector<float> u = random_matrix(rows, 1, 7), v = random_matrix(1, cols, 8);
  std::vector<float> g(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      g[r * cols + c] = u[r] * v[c];
    }
  }
  layer l(rows, cols, {.rank = 1}, 0);
  std::vector<float> p;
  const std::vector<float> average = step(l, g, p);
  for (std::size_t i = 0; i < g.size(); ++i) {
    REQUIRE(average[i] == Approx(g[i]).margin(1e-5));
    REQUIRE(std::abs(l.residual()[i]) <= 1e-5f);
  }
}

TEST_CASE("powersgd: warm start keeps Q; the starting Q is the seed's and the layer's",
          "[powersgd]") {
  const std::size_t rows = 16, cols = 12;
  const std::vector<float> g = random_matrix(rows, cols, 3);
  const layer a(rows, cols, {.rank = 2, .seed = 9}, 4), b(rows, cols, {.rank = 2, .seed = 9}, 4);
  const layer other_layer(rows, cols, {.rank = 2, .seed = 9}, 5);
  const layer other_seed(rows, cols, {.rank = 2, .seed = 10}, 4);
  const std::vector<float> qa(a.q().begin(), a.q().end());
  CHECK(qa == std::vector<float>(b.q().begin(), b.q().end()));
  CHECK(qa != std::vector<float>(other_layer.q().begin(), other_layer.q().end()));
  CHECK(qa != std::vector<float>(other_seed.q().begin(), other_seed.q().end()));

  for (const bool warm : {true, false}) {
    CAPTURE(warm);
    layer l(rows, cols, {.rank = 2, .warm_start = warm, .seed = 9}, 4);
    std::vector<float> p(l.p_elements()), q(l.q_elements()), average(rows * cols);
    l.compute_p(g, p);
    l.compute_q(p, q);
    l.finish(p, q, average);
    const std::vector<float> kept(l.q().begin(), l.q().end());
    CHECK((kept == q) == warm); // warm: the averaged Q; else a new random draw
    CHECK(kept != qa);
  }
}

TEST_CASE("powersgd: lengths that do not fit the layer are refused", "[powersgd]") {
  layer l(10, 10, {.rank = 2}, 0);
  std::vector<float> g(100), p(20), q(20), average(100);
  std::vector<float> short_g(99), short_p(19), short_q(21), short_average(101);
  CHECK_THROWS_WITH(l.compute_p(short_g, p),
                    Contains("gradient of 99 and P of 20 elements for a 10 x 10 layer at rank 2"));
  CHECK_THROWS_AS(l.compute_p(g, short_p), std::invalid_argument);
  CHECK_THROWS_WITH(l.compute_q(p, short_q), Contains("P of 20 and Q of 21 elements"));
  CHECK_THROWS_WITH(l.finish(p, q, short_average), Contains("average of 101"));
  CHECK_THROWS_AS(l.finish(short_p, q, average), std::invalid_argument);
}

} // namespace compressor_powersgd_test
