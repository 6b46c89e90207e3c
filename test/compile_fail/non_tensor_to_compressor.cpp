// SPDX-License-Identifier: Apache-2.0
// A type that is not a tensor (here a std::vector<float>*) must not compile as a gradient.
#include <gradcomp/gradcomp.hpp>

#include <vector>

void use(std::vector<float>& v) {
  gradcomp::exact_top_k c(0.01);
  gradcomp::sparse_message m;
#ifdef GRADCOMP_EXPECT_COMPILE_ERROR
  c.compress(&v, m);
#else
  c.compress(v, m);
#endif
}
