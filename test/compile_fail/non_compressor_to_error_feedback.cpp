// SPDX-License-Identifier: Apache-2.0
// error_feedback<C> requires C to model gradcomp::compressor (the opt-in tag included).
#include <gradcomp/gradcomp.hpp>

struct not_a_compressor {
  gradcomp::selection_stats compress(std::span<const float>, gradcomp::sparse_message&) {
    return {};
  }
};

#ifdef GRADCOMP_EXPECT_COMPILE_ERROR
gradcomp::error_feedback<not_a_compressor> layer(10);
#else
gradcomp::error_feedback<gradcomp::exact_top_k> layer(10);
#endif
