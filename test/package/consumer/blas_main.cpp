// SPDX-License-Identifier: Apache-2.0
// A consumer of gradcomp::blas: one GEMM through cblas_sgemm, checked by hand.
#include <gradcomp/blas/cblas_gemm.hpp>

#include <cstdio>

int main() {
  const float a[4] = {1, 2, 3, 4}; // 2 x 2, row-major
  const float b[4] = {5, 6, 7, 8};
  float c[4] = {0, 0, 0, 0};
  gradcomp::gemm_call call;
  call.m = call.n = call.k = 2;
  call.a = a;
  call.lda = 2;
  call.b = b;
  call.ldb = 2;
  call.c = c;
  call.ldc = 2;
  gradcomp::blas::cblas_gemm{}(call);
  const bool ok = c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50;
  std::printf("consumer_blas: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
