// SPDX-License-Identifier: Apache-2.0
// gradcomp::cuda::basic_exact_top_k (cuda/exact_top_k.cuh) on host_backend: the cases of
// exact_top_k_cases.hpp, which device_backend_test.cu runs on a GPU.
#include "host_harness.hpp"
// the harness first: the cases are written over it
#include "exact_top_k_cases.hpp"
