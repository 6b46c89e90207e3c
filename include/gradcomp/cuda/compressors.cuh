// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Every CUDA compressor: exact_top_k, sampled_threshold, gaussian_threshold,
//! lognormal_threshold, reused_threshold, batched_exact_top_k, batched_reused_threshold
//! (gradcomp::cuda, device_backend when compiled by nvcc; basic_* templates over any backend,
//! host_backend included).
#pragma once

#include <gradcomp/cuda/backend.cuh>
#include <gradcomp/cuda/batched_reused_threshold.cuh>
#include <gradcomp/cuda/batched_top_k.cuh>
#include <gradcomp/cuda/device_message.cuh>
#include <gradcomp/cuda/exact_top_k.cuh>
#include <gradcomp/cuda/fitted_threshold.cuh>
#include <gradcomp/cuda/reused_threshold.cuh>
#include <gradcomp/cuda/sampled_threshold.cuh>

#if defined(__CUDACC__)
#include <gradcomp/cuda/tensor.cuh>
#endif
