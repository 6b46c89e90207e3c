// SPDX-License-Identifier: Apache-2.0
// gradcomp::blas::cblas_gemm (blas/cblas_gemm.hpp) against the triple-loop reference of
// test/common/naive_gemm.hpp: every orientation, padded leading dimensions, alpha and beta, over
// random sizes; BLAS's rules (beta == 0 does not read C, k == 0 scales C, m or n == 0 does
// nothing); sizes past CBLAS's int and leading dimensions below their rows refused.
#include <gradcomp/blas/cblas_gemm.hpp>

#include <climits>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "../common/catch.hpp"
#include "../common/gemm_by_hand.hpp"
#include "../common/naive_gemm.hpp"

using namespace gradcomp;
using Catch::Contains;

static_assert(gemm_backend<blas::cblas_gemm>);

TEST_CASE("cblas_gemm equals the triple loop in every orientation", "[blas][gemm]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::size_t> size(1, 37);
  std::uniform_int_distribution<std::size_t> padding(0, 3);
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t m = size(rng), n = size(rng), k = size(rng);
    for (const transpose ta : {transpose::no, transpose::yes}) {
      for (const transpose tb : {transpose::no, transpose::yes}) {
        const std::size_t lda = (ta == transpose::no ? k : m) + padding(rng);
        const std::size_t ldb = (tb == transpose::no ? n : k) + padding(rng);
        const std::size_t ldc = n + padding(rng);
        std::vector<float> a((ta == transpose::no ? m : k) * lda);
        std::vector<float> b((tb == transpose::no ? k : n) * ldb);
        std::vector<float> c(m * ldc);
        for (auto* v : {&a, &b, &c}) {
          for (float& x : *v) {
            x = normal(rng);
          }
        }
        const float alpha = trial % 3 == 0 ? 1.0f : normal(rng);
        const float beta = trial % 2 == 0 ? 0.0f : normal(rng);
        std::vector<float> expected = c;
        const gemm_call call{.trans_a = ta,
                             .trans_b = tb,
                             .m = m,
                             .n = n,
                             .k = k,
                             .alpha = alpha,
                             .a = a.data(),
                             .lda = lda,
                             .b = b.data(),
                             .ldb = ldb,
                             .beta = beta,
                             .c = c.data(),
                             .ldc = ldc};
        blas::cblas_gemm{}(call);
        gemm_call reference = call;
        reference.c = expected.data();
        test::naive_gemm{}(reference);
        CAPTURE(trial, m, n, k, ta == transpose::yes, tb == transpose::yes);
        for (std::size_t i = 0; i < c.size(); ++i) {
          // float rounding of k products: within k ulps of the magnitudes involved
          REQUIRE(std::abs(c[i] - expected[i]) <=
                  1e-5f * static_cast<float>(k + 1) * (1.0f + std::abs(expected[i])));
        }
      }
    }
  }
}

TEST_CASE("cblas_gemm follows BLAS's rules for beta == 0, k == 0 and empty results",
          "[blas][gemm]") {
  test::check_blas_rules_by_hand(blas::cblas_gemm{});
}

TEST_CASE("cblas_gemm reproduces the products worked by hand", "[blas][gemm]") {
  test::check_products_by_hand(blas::cblas_gemm{});
}

TEST_CASE("cblas_gemm refuses sizes past CBLAS's int and short leading dimensions",
          "[blas][gemm]") {
  const std::size_t too_big = static_cast<std::size_t>(INT_MAX) + 1;
  const gemm_call huge{.m = 1, .n = 1, .k = too_big, .lda = too_big, .ldb = 1, .ldc = 1};
  CHECK_THROWS_WITH(blas::cblas_gemm{}(huge),
                    Contains("cblas_gemm: size 2147483648 exceeds CBLAS's int limit 2147483647"));
  const gemm_call short_lda{.m = 2, .n = 2, .k = 3, .lda = 2, .ldb = 2, .ldc = 2};
  CHECK_THROWS_WITH(blas::cblas_gemm{}(short_lda), Contains("lda 2 is below the row length 3"));
}
