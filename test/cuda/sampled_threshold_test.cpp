// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::basic_sampled_threshold (cuda/sampled_threshold.cuh) on host_backend: the cases
// of sampled_threshold_cases.hpp, which device_backend_test.cu runs on a GPU.
#include "host_harness.hpp"
// the harness first: the cases are written over it
#include "sampled_threshold_cases.hpp"
