// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::cuda_error and check (cuda/error.cuh, nvcc only): what() names the failed call,
// the runtime's error name and string; status() keeps the code; check passes cudaSuccess.
#include <gradcomp/cuda/error.cuh>

#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

#include "../common/catch.hpp"

namespace cuda_error_test {

using gradcomp::cuda::check;
using gradcomp::cuda::cuda_error;

TEST_CASE("cuda_error: names the call and the runtime's error", "[cuda][errors]") {
  const cuda_error e(cudaErrorInvalidValue, "cudaMemcpyAsync");
  CHECK(std::string(e.what()) ==
        "gradcomp: cudaMemcpyAsync failed: cudaErrorInvalidValue (invalid argument)");
  CHECK(e.status() == cudaErrorInvalidValue);
  const std::runtime_error& base = e; // callers may catch std::runtime_error
  CHECK(std::string(base.what()).find("cudaMemcpyAsync") != std::string::npos);
}

TEST_CASE("cuda check: throws cuda_error unless the status is cudaSuccess", "[cuda][errors]") {
  CHECK_NOTHROW(check(cudaSuccess, "cudaMalloc"));
  CHECK_THROWS_AS(check(cudaErrorMemoryAllocation, "cudaMalloc"), cuda_error);
  CHECK_THROWS_WITH(check(cudaErrorMemoryAllocation, "cudaMalloc"),
                    "gradcomp: cudaMalloc failed: cudaErrorMemoryAllocation (out of memory)");
}

} // namespace cuda_error_test
