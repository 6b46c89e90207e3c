// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A gradcomp::gemm_backend written as the textbook triple loop (sums in double), read
//! straight from gemm_call's description: the reference the GEMM backends are compared against,
//! and the backend of the core tests of PowerSGD (which need no BLAS).
#pragma once

#include <gradcomp/linalg/gemm.hpp>

#include <cstddef>

namespace gradcomp::test {

//! C = alpha op(A) op(B) + beta C, row-major with leading dimensions; beta == 0 writes C without
//! reading it. O(m n k).
struct naive_gemm {
  void operator()(const gemm_call& c) const {
    check_gemm_call(c);
    for (std::size_t i = 0; i < c.m; ++i) {
      for (std::size_t j = 0; j < c.n; ++j) {
        double sum = 0.0;
        for (std::size_t p = 0; p < c.k; ++p) {
          const float a = c.trans_a == transpose::no ? c.a[i * c.lda + p] : c.a[p * c.lda + i];
          const float b = c.trans_b == transpose::no ? c.b[p * c.ldb + j] : c.b[j * c.ldb + p];
          sum += static_cast<double>(a) * static_cast<double>(b);
        }
        float& out = c.c[i * c.ldc + j];
        const double old = c.beta == 0.0f ? 0.0 : static_cast<double>(c.beta) * out;
        out = static_cast<float>(static_cast<double>(c.alpha) * sum + old);
      }
    }
  }
};

static_assert(gemm_backend<naive_gemm>);

} // namespace gradcomp::test
