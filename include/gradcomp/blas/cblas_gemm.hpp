// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::blas::cblas_gemm: a gradcomp::gemm_backend over the C interface of a BLAS
//! (cblas_sgemm). Needs <cblas.h> and linking a BLAS that exports it (CMake target
//! gradcomp::blas; on Debian libblas-dev, with libopenblas0-pthread selected as libblas.so.3 for
//! speed).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/linalg/gemm.hpp>

#include <cblas.h>
#include <climits>
#include <cstddef>

namespace gradcomp::blas {

//! @brief Runs a gemm_call with cblas_sgemm (CblasRowMajor). Stateless; thread safety and the
//! number of threads are the BLAS's (OpenBLAS: OPENBLAS_NUM_THREADS). Complexity: 2 m n k flops.
//! Results are deterministic for a given BLAS, thread count and sizes.
//! @throws std::invalid_argument if a size or leading dimension exceeds INT_MAX (CBLAS counts
//! are int) or a leading dimension is below its row length.
struct cblas_gemm {
  //! C = alpha op(A) op(B) + beta C as `call` describes, with one cblas_sgemm (nothing when m or
  //! n is 0). @throws std::invalid_argument as the struct says.
  void operator()(const gemm_call& call) const {
    gradcomp::check_gemm_call(call);
    for (std::size_t v : {call.m, call.n, call.k, call.lda, call.ldb, call.ldc}) {
      gradcomp::detail::require(v <= static_cast<std::size_t>(INT_MAX), "cblas_gemm: size ", v,
                                " exceeds CBLAS's int limit ", INT_MAX);
    }
    if (call.m == 0 || call.n == 0) {
      return;
    }
    const auto op = [](transpose t) { return t == transpose::yes ? CblasTrans : CblasNoTrans; };
    cblas_sgemm(CblasRowMajor, op(call.trans_a), op(call.trans_b), static_cast<int>(call.m),
                static_cast<int>(call.n), static_cast<int>(call.k), call.alpha, call.a,
                static_cast<int>(call.lda), call.b, static_cast<int>(call.ldb), call.beta, call.c,
                static_cast<int>(call.ldc));
  }
};

static_assert(gemm_backend<cblas_gemm>);

} // namespace gradcomp::blas
