// SPDX-License-Identifier: Apache-2.0
// pipeline<C, T, G> requires T to model gradcomp::pipeline_policy::transport (start, test,
// wait); the diagnostic names the transport concept.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

struct not_a_transport {
  void start(const gradcomp::sparse_message&, std::span<float>) {}
};

#ifdef GRADCOMP_EXPECT_COMPILE_ERROR
using wrong = gradcomp::pipeline<gradcomp::exact_top_k, not_a_transport>;
[[maybe_unused]] constexpr std::size_t size = sizeof(wrong);
#else
using right = gradcomp::pipeline<gradcomp::exact_top_k, gradcomp::loopback_exchange>;
[[maybe_unused]] constexpr std::size_t size = sizeof(right);
#endif
