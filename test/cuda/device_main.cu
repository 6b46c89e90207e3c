// SPDX-License-Identifier: Apache-2.0
// Catch2 main of the GPU tests: without a CUDA device it says so and exits 77, which ctest
// reports as skipped (SKIP_RETURN_CODE), not passed.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <cuda_runtime_api.h>

#include "../common/catch.hpp"

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): the GPU tests are skipped\n", cudaGetErrorString(status));
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("CUDA device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  return Catch::Session().run(argc, argv);
}
