// SPDX-License-Identifier: Apache-2.0
// gradcomp::gemm_call and gemm_backend (linalg/gemm.hpp): the layout gemm_call describes
// (row-major, leading dimensions, op() = as stored or transposed, alpha and beta, beta == 0 not
// reading C, k
// == 0 scaling C) worked by hand through the triple-loop reference of test/common/naive_gemm.hpp,
// against the same product computed here element by element from plain matrices; the concept;
// no_gemm leaving C alone; check_gemm_call's limits for every operand in both orientations.
#include <gradcomp/linalg/gemm.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "../common/catch.hpp"
#include "../common/gemm_by_hand.hpp"
#include "../common/naive_gemm.hpp"

namespace linalg_gemm_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

struct not_copyable {
  not_copyable() = default;
  not_copyable(const not_copyable&) = delete;
  void operator()(const gemm_call&) const {}
};

static_assert(gemm_backend<no_gemm>);
static_assert(gemm_backend<test::naive_gemm>);
static_assert(!gemm_backend<not_copyable>);
static_assert(!gemm_backend<int>);

// element (r, c) of a rows x cols matrix stored row-major with leading dimension ld
float& at(std::vector<float>& storage, std::size_t ld, std::size_t r, std::size_t c) {
  return storage[r * ld + c];
}

} // namespace

TEST_CASE("gemm: a 2 x 3 by 3 x 2 product worked by hand", "[linalg][gemm]") {
  test::check_products_by_hand(test::naive_gemm{});
}

TEST_CASE("gemm: BLAS's rules for beta == 0, k == 0 and empty results, worked by hand",
          "[linalg][gemm]") {
  test::check_blas_rules_by_hand(test::naive_gemm{});
}

TEST_CASE("gemm: every orientation with padded leading dimensions against plain matrices",
          "[linalg][gemm]") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-4, 4); // integers: every sum exact
  const std::size_t m = 3, n = 4, k = 5, pad = 2;
  // plain matrices X (m x k) and Y (k x n), and their product by the definition
  std::vector<float> x(m * k), y(k * n), product(m * n, 0.0f);
  for (float& v : x) {
    v = static_cast<float>(small(rng));
  }
  for (float& v : y) {
    v = static_cast<float>(small(rng));
  }
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t p = 0; p < k; ++p) {
        product[i * n + j] += x[i * k + p] * y[p * n + j];
      }
    }
  }
  for (const transpose ta : {transpose::no, transpose::yes}) {
    for (const transpose tb : {transpose::no, transpose::yes}) {
      CAPTURE(ta == transpose::yes, tb == transpose::yes);
      // A holds X (m x k) or X^T (k x m), B holds Y (k x n) or Y^T (n x k), rows padded
      const std::size_t lda = (ta == transpose::no ? k : m) + pad;
      const std::size_t ldb = (tb == transpose::no ? n : k) + pad;
      const std::size_t ldc = n + pad;
      std::vector<float> a((ta == transpose::no ? m : k) * lda, 99.0f);
      std::vector<float> b((tb == transpose::no ? k : n) * ldb, 99.0f);
      std::vector<float> c(m * ldc, -7.0f);
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t p = 0; p < k; ++p) {
          (ta == transpose::no ? at(a, lda, i, p) : at(a, lda, p, i)) = x[i * k + p];
        }
      }
      for (std::size_t p = 0; p < k; ++p) {
        for (std::size_t j = 0; j < n; ++j) {
          (tb == transpose::no ? at(b, ldb, p, j) : at(b, ldb, j, p)) = y[p * n + j];
        }
      }
      test::naive_gemm{}({.trans_a = ta,
                          .trans_b = tb,
                          .m = m,
                          .n = n,
                          .k = k,
                          .a = a.data(),
                          .lda = lda,
                          .b = b.data(),
                          .ldb = ldb,
                          .c = c.data(),
                          .ldc = ldc});
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < ldc; ++j) {
          // the product in C's rows, the padding untouched
          REQUIRE(at(c, ldc, i, j) == (j < n ? product[i * n + j] : -7.0f));
        }
      }
    }
  }
}

TEST_CASE("gemm: no_gemm leaves C as it was", "[linalg][gemm]") {
  const std::vector<float> a{1, 2}, b{3, 4};
  std::vector<float> c{5, 6, 7, 8};
  no_gemm{}({.m = 2,
             .n = 2,
             .k = 1,
             .a = a.data(),
             .lda = 1,
             .b = b.data(),
             .ldb = 2,
             .c = c.data(),
             .ldc = 2});
  CHECK(c == std::vector<float>{5, 6, 7, 8});
  // even a call that check_gemm_call refuses
  no_gemm{}(gemm_call{});
  CHECK(c == std::vector<float>{5, 6, 7, 8});
}

TEST_CASE("gemm: check_gemm_call names the leading dimension below its row length",
          "[linalg][gemm]") {
  const gemm_call ok{.m = 3, .n = 4, .k = 5, .lda = 5, .ldb = 4, .ldc = 4};
  CHECK_NOTHROW(check_gemm_call(ok));
  gemm_call c = ok;
  c.lda = 4;
  CHECK_THROWS_WITH(check_gemm_call(c), Contains("gemm: lda 4 is below the row length 5"));
  c.trans_a = transpose::yes; // A is k x m: rows of m = 3
  CHECK_NOTHROW(check_gemm_call(c));
  c.lda = 2;
  CHECK_THROWS_WITH(check_gemm_call(c), Contains("lda 2 is below the row length 3"));
  c = ok;
  c.ldb = 3;
  CHECK_THROWS_WITH(check_gemm_call(c), Contains("gemm: ldb 3 is below the row length 4"));
  c.trans_b = transpose::yes; // B is n x k: rows of k = 5
  CHECK_THROWS_WITH(check_gemm_call(c), Contains("ldb 3 is below the row length 5"));
  c.ldb = 5;
  CHECK_NOTHROW(check_gemm_call(c));
  c = ok;
  c.ldc = 3;
  CHECK_THROWS_WITH(check_gemm_call(c), Contains("gemm: ldc 3 is below the row length 4"));
  // empty sizes are valid, but a leading dimension is at least 1
  CHECK_NOTHROW(check_gemm_call({.lda = 1, .ldb = 1, .ldc = 1}));
  CHECK_THROWS_WITH(check_gemm_call(gemm_call{}), Contains("lda 0 is below the row length 0"));
  // the defaults: as stored, alpha 1, beta 0
  CHECK(ok.trans_a == transpose::no);
  CHECK(ok.alpha == 1.0f);
  CHECK(ok.beta == 0.0f);
}

} // namespace linalg_gemm_test
