// SPDX-License-Identifier: Apache-2.0
// every compressor of cuda/compressors.cuh (workspace reuse, bad input) on host_backend: the cases
// of compressors_cases.hpp, which device_backend_test.cu runs on a GPU.
#include "host_harness.hpp"
// the harness first: the cases are written over it
#include "compressors_cases.hpp"
