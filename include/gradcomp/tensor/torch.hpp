// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Checked views of LibTorch tensors: a CPU `torch::Tensor` as a gradcomp::host_view for
//! the host compressors, a CUDA one as a gradcomp::device_view for the CUDA compressors
//! (`<gradcomp/cuda/compressors.cuh>`).
//!
//! A tensor's memory space is part of its type in gradcomp (host compressors refuse device
//! memory at compile time), but a `torch::Tensor`'s device, dtype and layout are run-time
//! properties. So LibTorch tensors are not adapted through `as_tensor_view` (which would have to
//! pick one memory space for every tensor); instead these functions check the properties and
//! return the view of the right space, or throw. Needs LibTorch (this header is not included by
//! `<gradcomp/gradcomp.hpp>`); no CUDA toolkit is needed to build against it, since a device view
//! is only a pointer and a length.
//!
//! ```cpp
//! #include <gradcomp/tensor/torch.hpp>
//! layer.compress(gradcomp::torch_host_view(param.grad()), message);        // CPU tensor
//! topk.compress_accumulate(gradcomp::torch_device_view(residual),         // CUDA tensors
//!                          gradcomp::torch_device_view(param.grad()), msg, stream);
//! ```
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/tensor/tensor_view.hpp>

#include <torch/types.h>

#include <cstddef>
#include <sstream>
#include <string>

namespace gradcomp {

namespace detail {

// The tensor's device as LibTorch prints it ("cpu", "cuda:0").
inline std::string torch_device_name(const at::Tensor& t) {
  std::ostringstream s;
  s << t.device();
  return s.str();
}

// Checks what every view needs: a defined, strided, contiguous float32 tensor on `want` devices.
inline void check_torch_view(const at::Tensor& t, bool want_cuda, const char* function) {
  require(t.defined(), function, ": the tensor is undefined (an empty torch::Tensor())");
  require(t.layout() == at::kStrided, function, ": the tensor's layout is ", t.layout(),
          ", gradcomp reads dense (strided) tensors; call .to_dense() first");
  require(t.scalar_type() == at::kFloat, function, ": the tensor's dtype is ",
          c10::toString(t.scalar_type()), ", gradcomp's compressors take Float (float32)");
  require(t.is_contiguous(), function, ": the tensor is not contiguous (sizes ", t.sizes(),
          ", strides ", t.strides(), "); call .contiguous() first");
  require(want_cuda ? t.is_cuda() : t.is_cpu(), function, ": the tensor is on device ",
          torch_device_name(t), ", this view needs ", want_cuda ? "a CUDA device" : "the CPU");
}

} // namespace detail

//! @brief The elements of a CPU, dense, contiguous, float32 tensor as a writable host view of
//! `t.numel()` floats (any shape; row-major order). O(1); the view aliases the tensor's storage
//! (keep the tensor alive while the view is used). Writes through the view bypass autograd's
//! version counter: write only into tensors autograd does not track (e.g. residuals, or
//! `.grad` outside of backward).
//! @throws std::invalid_argument naming the property and its value if `t` is undefined, not
//! strided (sparse, MKLDNN), not float32, not contiguous or not on the CPU.
[[nodiscard]] inline host_view<float> torch_host_view(const at::Tensor& t) {
  detail::check_torch_view(t, false, "torch_host_view");
  return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
}

//! @brief The elements of a CUDA, dense, contiguous, float32 tensor as a device view of
//! `t.numel()` floats, for the CUDA compressors. O(1); aliases the tensor's storage. The view
//! carries no device index: make `t`'s device current before compressing (e.g.
//! `c10::cuda::CUDAGuard guard(t.device())`), since the compressors run on the current device,
//! and order the compressor's stream after the work that produced the tensor (e.g. pass
//! `at::cuda::getCurrentCUDAStream()`). Writes through the view bypass autograd, as for
//! torch_host_view.
//! @throws std::invalid_argument naming the property and its value if `t` is undefined, not
//! strided, not float32, not contiguous or not on a CUDA device.
[[nodiscard]] inline device_view<float> torch_device_view(const at::Tensor& t) {
  detail::check_torch_view(t, true, "torch_device_view");
  return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
}

} // namespace gradcomp
