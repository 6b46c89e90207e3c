// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of gradcomp's core: tensors, sparse messages and their wire format,
//! every host compressor with error feedback, and compressor_base for writing your own. Needs
//! only the C++20 standard library (never includes MPI or CUDA headers).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/adaptive_density.hpp>
#include <gradcomp/compressor/any_compressor.hpp>
#include <gradcomp/compressor/by_name.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/dense.hpp>
#include <gradcomp/compressor/density_schedule.hpp>
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/compressor/gaussian_threshold.hpp>
#include <gradcomp/compressor/local_clipping.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/compressor/powersgd.hpp>
#include <gradcomp/compressor/qsgd.hpp>
#include <gradcomp/compressor/random_k.hpp>
#include <gradcomp/compressor/residual_monitor.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/compressor/sampled_threshold.hpp>
#include <gradcomp/compressor/scaled_sign.hpp>
#include <gradcomp/compressor/size_switch.hpp>
#include <gradcomp/compressor/terngrad.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/hybrid/column_split.hpp>
#include <gradcomp/hybrid/overlap_plan.hpp>
#include <gradcomp/hybrid/plan.hpp>
#include <gradcomp/linalg/gemm.hpp>
#include <gradcomp/optimizer/lars.hpp>
#include <gradcomp/optimizer/lr_schedule.hpp>
#include <gradcomp/precision/loss_scale.hpp>
#include <gradcomp/sparse/concatenate.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>
#include <gradcomp/sparse/wire.hpp>
#include <gradcomp/tensor/memory_space.hpp>
#include <gradcomp/tensor/tensor.hpp>
#include <gradcomp/tensor/tensor_view.hpp>
#include <gradcomp/version.hpp>
