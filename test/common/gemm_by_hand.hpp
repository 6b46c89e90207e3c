// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Products worked by hand that every gradcomp::gemm_backend must reproduce exactly (small
//! integers: every sum is exact in float and in double): as stored and transposed operands,
//! alpha and beta, beta == 0 not reading C (NaNs in C), k == 0 scaling C by beta, m or n == 0
//! doing nothing. The linalg tests run them on the triple-loop reference, the BLAS tests on
//! cblas_gemm.
#pragma once

#include <gradcomp/linalg/gemm.hpp>

#include <limits>
#include <vector>

#include "catch.hpp"

namespace gradcomp::test {

//! The products of A (2 x 3) and B (3 x 2): A B, 2 A B - C, A^T A, A A^T, and k = 0.
template <gemm_backend Gemm>
void check_products_by_hand(Gemm gemm) {
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: A B = [58 64; 139 154]
  const std::vector<float> a{1, 2, 3, 4, 5, 6};
  const std::vector<float> b{7, 8, 9, 10, 11, 12};
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN()); // beta 0: not read
  gemm({.m = 2,
        .n = 2,
        .k = 3,
        .a = a.data(),
        .lda = 3,
        .b = b.data(),
        .ldb = 2,
        .c = c.data(),
        .ldc = 2});
  CHECK(c == std::vector<float>{58, 64, 139, 154});
  // alpha 2, beta -1: 2 A B - C
  gemm({.m = 2,
        .n = 2,
        .k = 3,
        .alpha = 2.0f,
        .a = a.data(),
        .lda = 3,
        .b = b.data(),
        .ldb = 2,
        .beta = -1.0f,
        .c = c.data(),
        .ldc = 2});
  CHECK(c == std::vector<float>{58, 64, 139, 154});
  // A^T A (3 x 3): A stored as is, 2 x 3, trans_a
  std::vector<float> ata(9);
  gemm({.trans_a = transpose::yes,
        .m = 3,
        .n = 3,
        .k = 2,
        .a = a.data(),
        .lda = 3,
        .b = a.data(),
        .ldb = 3,
        .c = ata.data(),
        .ldc = 3});
  CHECK(ata == std::vector<float>{17, 22, 27, 22, 29, 36, 27, 36, 45});
  // A A^T (2 x 2): trans_b
  std::vector<float> aat(4);
  gemm({.trans_b = transpose::yes,
        .m = 2,
        .n = 2,
        .k = 3,
        .a = a.data(),
        .lda = 3,
        .b = a.data(),
        .ldb = 3,
        .c = aat.data(),
        .ldc = 2});
  CHECK(aat == std::vector<float>{14, 32, 32, 77});
  // k = 0 scales C by beta
  std::vector<float> scaled{1, 2, 3, 4};
  gemm({.m = 2,
        .n = 2,
        .k = 0,
        .a = a.data(),
        .lda = 1,
        .b = b.data(),
        .ldb = 2,
        .beta = 0.5f,
        .c = scaled.data(),
        .ldc = 2});
  CHECK(scaled == std::vector<float>{0.5f, 1, 1.5f, 2});
}

//! BLAS's rules on [1 2; 3 4] [5 6; 7 8]: beta == 0 does not read C, k == 0 scales C, an empty
//! result (m or n == 0) leaves C alone.
template <gemm_backend Gemm>
void check_blas_rules_by_hand(Gemm gemm) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<float> c{nan, nan, nan, nan};
  gemm({.m = 2,
        .n = 2,
        .k = 2,
        .a = a.data(),
        .lda = 2,
        .b = b.data(),
        .ldb = 2,
        .c = c.data(),
        .ldc = 2});
  CHECK(c == std::vector<float>{19, 22, 43, 50}); // [1 2; 3 4] [5 6; 7 8], C's NaNs not read
  gemm({.m = 2,
        .n = 2,
        .k = 0,
        .a = a.data(),
        .lda = 1,
        .b = b.data(),
        .ldb = 2,
        .beta = 0.5f,
        .c = c.data(),
        .ldc = 2});
  CHECK(c == std::vector<float>{9.5f, 11, 21.5f, 25}); // k = 0: C = beta C
  gemm({.m = 0,
        .n = 2,
        .k = 2,
        .a = a.data(),
        .lda = 2,
        .b = b.data(),
        .ldb = 2,
        .c = c.data(),
        .ldc = 2});
  gemm({.m = 2,
        .n = 0,
        .k = 2,
        .a = a.data(),
        .lda = 2,
        .b = b.data(),
        .ldb = 1,
        .c = c.data(),
        .ldc = 1});
  CHECK(c == std::vector<float>{9.5f, 11, 21.5f, 25}); // nothing to compute
}

} // namespace gradcomp::test
