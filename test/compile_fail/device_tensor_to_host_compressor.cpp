// SPDX-License-Identifier: Apache-2.0
// A host compressor given a tensor in CUDA device memory must not compile.
#include <gradcomp/gradcomp.hpp>

void use(float* p, std::size_t n) {
  gradcomp::exact_top_k c(0.01);
  gradcomp::sparse_message m;
#ifdef GRADCOMP_EXPECT_COMPILE_ERROR
  c.compress(gradcomp::device_view<float>(p, n), m);
#else
  c.compress(gradcomp::host_view<float>(p, n), m);
#endif
}
