// SPDX-License-Identifier: Apache-2.0
// the Gaussian and lognormal thresholds (cuda/fitted_threshold.cuh) on host_backend: the cases of
// fitted_threshold_cases.hpp, which device_backend_test.cu runs on a GPU.
#include "host_harness.hpp"
// the harness first: the cases are written over it
#include "fitted_threshold_cases.hpp"
