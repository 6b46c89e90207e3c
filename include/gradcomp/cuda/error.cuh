// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::cuda_error and the check that turns a CUDA runtime status into it.
//! Needs the CUDA runtime (compile with nvcc).
#pragma once

#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace gradcomp::cuda {

//! @brief A CUDA runtime call failed: what() names the call and the runtime's error string.
class cuda_error : public std::runtime_error {
public:
  //! @param status the runtime's status (cudaGetErrorName and cudaGetErrorString go in what()).
  //! @param what   the failed call, e.g. "cudaMemcpyAsync".
  cuda_error(cudaError_t status, const std::string& what)
      : std::runtime_error("gradcomp: " + what + " failed: " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")"),
        status_(status) {}
  //! The runtime's status code.
  [[nodiscard]] cudaError_t status() const noexcept { return status_; }

private:
  cudaError_t status_;
};

//! @brief Throws cuda_error naming `what` unless `status` is cudaSuccess. O(1).
inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw cuda_error(status, what);
  }
}

} // namespace gradcomp::cuda
