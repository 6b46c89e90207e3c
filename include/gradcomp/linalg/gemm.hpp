// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::gemm_call and the gradcomp::gemm_backend concept (the linear algebra
//! folder, gradcomp/linalg/): the one dense matrix product that PowerSGD
//! (gradcomp::powersgd_layer) and the model-parallel layers (gradcomp::mpi::column_parallel_linear)
//! need, handed to a BLAS of the user's choice (CBLAS in gradcomp/blas/cblas_gemm.hpp, LibTorch in
//! the example program). Standard library only.
#pragma once

#include <gradcomp/error.hpp>

#include <concepts>
#include <cstddef>

namespace gradcomp {

//! @brief Whether a gemm_call operand is used as stored or transposed.
enum class transpose : bool {
  no,  //!< op(X) = X.
  yes, //!< op(X) = X^T.
};

//! @brief One single-precision GEMM on row-major matrices, BLAS's sgemm:
//! C = alpha op(A) op(B) + beta C, with op(A) m x k, op(B) k x n, C m x n.
//!
//! Row-major storage with leading dimensions (elements between the starts of two rows):
//! A is m x k (lda >= k) when trans_a == no and k x m (lda >= m) when yes; likewise B is k x n
//! (ldb >= n) or n x k (ldb >= k); C is m x n (ldc >= n). beta == 0 means C is written without
//! being read (BLAS's rule: NaNs in C are not propagated). A call with m, n or k equal to 0 is
//! valid (k == 0 scales C by beta).
struct gemm_call {
  transpose trans_a = transpose::no; //!< op(A).
  transpose trans_b = transpose::no; //!< op(B).
  std::size_t m = 0;                 //!< rows of C and of op(A).
  std::size_t n = 0;                 //!< columns of C and of op(B).
  std::size_t k = 0;                 //!< the contracted dimension.
  float alpha = 1.0f;                //!< scale of the product.
  const float* a = nullptr;          //!< A, row-major (see above).
  std::size_t lda = 0;               //!< elements between rows of A.
  const float* b = nullptr;          //!< B, row-major.
  std::size_t ldb = 0;               //!< elements between rows of B.
  float beta = 0.0f;                 //!< scale of C's old value (0: not read).
  float* c = nullptr;                //!< C, row-major, written.
  std::size_t ldc = 0;               //!< elements between rows of C.
};

//! @brief A type that runs a gemm_call: `g(call)` computes C = alpha op(A) op(B) + beta C as
//! gemm_call describes. May throw (e.g. std::invalid_argument for a size its BLAS cannot
//! represent); must not keep pointers past the call. Its rounding is the BLAS's own (blocked
//! sums: not bit-identical to another BLAS, or to the same BLAS with another thread count).
template <class G>
concept gemm_backend = std::copy_constructible<G> && requires(const G& g, const gemm_call& call) {
  g(call);
};

//! @brief A gemm_backend that computes nothing (C is left as it was): for timing the
//! communication of a model-parallel layer alone (mpi::calibrate_model_parallel_fixed_seconds,
//! the hybrid benchmark). Its results are meaningless.
struct no_gemm {
  //! Does nothing: C, and everything else, is left as it was. O(1); never throws.
  void operator()(const gemm_call&) const noexcept {}
};

//! @brief Checks the leading dimensions of `call` (lda, ldb, ldc at least the row lengths,
//! BLAS's condition); every GEMM backend (gradcomp::cblas_gemm, a user's LibTorch or cuBLAS one)
//! calls it first. O(1).
//! @throws std::invalid_argument naming the dimension, its value and its minimum.
inline void check_gemm_call(const gemm_call& call) {
  const std::size_t a_row = call.trans_a == transpose::no ? call.k : call.m;
  const std::size_t b_row = call.trans_b == transpose::no ? call.n : call.k;
  detail::require(call.lda >= a_row && call.lda >= 1, "gemm: lda ", call.lda,
                  " is below the row length ", a_row);
  detail::require(call.ldb >= b_row && call.ldb >= 1, "gemm: ldb ", call.ldb,
                  " is below the row length ", b_row);
  detail::require(call.ldc >= call.n && call.ldc >= 1, "gemm: ldc ", call.ldc,
                  " is below the row length ", call.n);
}

} // namespace gradcomp
