// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::basic_batched_reused_threshold (cuda/batched_reused_threshold.cuh) on
// host_backend: the cases of batched_reused_threshold_cases.hpp, which device_backend_test.cu runs
// on a GPU.
#include "host_harness.hpp"
// the harness first: the cases are written over it
#include "batched_reused_threshold_cases.hpp"
