// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief CRTP base of the CUDA compressors: their public entry points (plain, with error
//! feedback, with DGC momentum correction; raw pointers or tensors of the backend's memory
//! space), validation, the error-feedback accumulation, and the finishing pass (rounding to the
//! wire type, residual and velocity updates at the sent indices).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/compressor_base.hpp>
#include <gradcomp/cuda/detail/functors.cuh>
#include <gradcomp/cuda/detail/select.cuh>
#include <gradcomp/cuda/device_message.cuh>
#include <gradcomp/error.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <type_traits>

namespace gradcomp::cuda {

//! @brief A tensor of floats in `Backend`'s memory space (device memory for device_backend):
//! gradcomp::tensor_view<float, cuda_device_space>, thrust::device_vector<float> (with
//! <gradcomp/cuda/tensor.cuh>), or any type adapted through gradcomp's tensor customization.
template <class T, class Backend>
concept backend_float_tensor = tensor<T> && std::same_as < tensor_memory_space_t<T>,
typename Backend::memory_space > &&std::same_as<tensor_value_t<T>, float>;

namespace detail {

//! @throws std::invalid_argument when `what` (a gradient, residual or velocity of n elements) has
//! n > 2^32 (32-bit message indices) or is a null pointer with n > 0. O(1).
inline void check_pointer(const void* p, std::size_t n, const char* what) {
  gradcomp::detail::require(n <= max_sparse_dense_length_elements, what, " has ", n,
                            " elements, above the 32-bit index limit ",
                            max_sparse_dense_length_elements);
  gradcomp::detail::require(p != nullptr || n == 0, what, " is a null pointer with ", n,
                            " elements");
}

//! The source of a read-only call on x[0, n), validated (check_pointer). @throws as check_pointer.
inline value_source checked_source(const float* x, std::size_t n) {
  check_pointer(x, n, "gradient");
  return {x, nullptr, nullptr, 0.0f};
}

//! The source of an error-feedback call (residual += grad), validated. @throws as
//! check_pointer.
inline value_source checked_source(float* residual, const float* grad, std::size_t n) {
  check_pointer(residual, n, "residual");
  check_pointer(grad, n, "gradient");
  return {grad, residual, nullptr, 0.0f};
}

//! The source of a call with DGC momentum correction, validated. @throws as check_pointer, and
//! std::invalid_argument naming a momentum outside [0, 1).
inline value_source
checked_source(float* residual, float* velocity, const float* grad, std::size_t n, float momentum) {
  check_pointer(residual, n, "residual");
  check_pointer(velocity, n, "velocity");
  check_pointer(grad, n, "gradient");
  check_momentum(momentum);
  return {grad, residual, velocity, momentum};
}

//! Derived provides `std::size_t run(const call<Backend>& c, selection_stats&)`: materializes
//! c.src (materialize() or a fused form) in its first pass, selects from c.src.values()[0, c.n)
//! (n >= 1, Backend memory) into c.indices / c.values, ascending, and returns how many it
//! wrote. Options as for the host compressors (`threads` is ignored).
template <class Derived, class Options, class Backend>
class compressor_base {
public:
  using compressor_concept = compressor_tag;
  using options = Options;
  using backend_type = Backend;
  using stream_type = typename Backend::stream_type;
  using message_type = basic_device_message<Backend>;

  //! @throws std::invalid_argument if the density is outside (0, 1], guard_factor outside [1,
  //! 1e6] or `nonfinite` is not propagate (no device check yet).
  explicit compressor_base(const Options& o) : options_(o) {
    gradcomp::detail::check_device_options(o);
  }

  [[nodiscard]] const Options& get_options() const noexcept { return options_; }
  [[nodiscard]] value_type values_type() const noexcept { return options_.values; }
  //! k for an n-element gradient: ceil(density x n) clamped to [1, n] (0 when n == 0).
  [[nodiscard]] std::size_t target_k(std::size_t n) const {
    return k_for_density(n, options_.density);
  }

  //! @brief Compresses x[0, n) (Backend memory, read only) into `out`, ordered on `stream`.
  //! Returns when the message is complete (its size had to reach the host).
  //! @throws std::invalid_argument on n > 2^32 or a null pointer with n > 0; cuda_error or
  //! thrust::system_error on a CUDA failure.
  selection_stats
  compress(const float* x, std::size_t n, message_type& out, stream_type stream = {}) {
    return dispatch(checked_source(x, n), n, out, stream);
  }

  //! @brief Error feedback fused into compression: residual += grad; out = C(residual);
  //! residual -= sent (exactly 0 where sent unchanged, the rounding error where rounded).
  //! Traffic: reads grad and residual, writes residual (12 bytes per element), then selects.
  //! @throws as compress().
  selection_stats compress_accumulate(float* residual,
                                      const float* grad,
                                      std::size_t n,
                                      message_type& out,
                                      stream_type stream = {}) {
    return dispatch(checked_source(residual, grad, n), n, out, stream);
  }

  //! @brief DGC momentum correction and error feedback (Lin et al. 2018, eqs. 4-6): velocity =
  //! momentum x velocity + grad; residual += velocity; out = C(residual); residual -= sent;
  //! velocity = 0 where sent. @pre 0 <= momentum < 1. @throws as compress(), and
  //! std::invalid_argument naming a bad momentum.
  selection_stats compress_accumulate_momentum(float* residual,
                                               float* velocity,
                                               const float* grad,
                                               std::size_t n,
                                               float momentum,
                                               message_type& out,
                                               stream_type stream = {}) {
    return dispatch(checked_source(residual, velocity, grad, n, momentum), n, out, stream);
  }

  //! @brief compress() on a tensor of the backend's memory space.
  template <backend_float_tensor<Backend> X>
  selection_stats compress(const X& x, message_type& out, stream_type stream = {}) {
    return compress(tensor_data(x), tensor_size(x), out, stream);
  }

  //! @brief compress_accumulate() on tensors. @throws std::invalid_argument naming both lengths
  //! when they differ.
  template <backend_float_tensor<Backend> R, backend_float_tensor<Backend> G>
  selection_stats
  compress_accumulate(R& residual, const G& grad, message_type& out, stream_type stream = {}) {
    gradcomp::detail::require(tensor_size(residual) == tensor_size(grad), "residual has ",
                              tensor_size(residual), " elements, gradient has ", tensor_size(grad));
    return compress_accumulate(tensor_data(residual), tensor_data(grad), tensor_size(grad), out,
                               stream);
  }

  //! @brief compress_accumulate_momentum() on tensors. @throws std::invalid_argument naming the
  //! lengths when they differ.
  template <backend_float_tensor<Backend> R,
            backend_float_tensor<Backend> V,
            backend_float_tensor<Backend> G>
  selection_stats compress_accumulate_momentum(R& residual,
                                               V& velocity,
                                               const G& grad,
                                               float momentum,
                                               message_type& out,
                                               stream_type stream = {}) {
    gradcomp::detail::require(tensor_size(residual) == tensor_size(grad) &&
                                  tensor_size(velocity) == tensor_size(grad),
                              "residual has ", tensor_size(residual), " elements, velocity ",
                              tensor_size(velocity), ", gradient ", tensor_size(grad));
    return compress_accumulate_momentum(tensor_data(residual), tensor_data(velocity),
                                        tensor_data(grad), tensor_size(grad), momentum, out,
                                        stream);
  }

protected:
  Options options_;
  workspace<Backend> ws_;

private:
  selection_stats
  dispatch(const value_source& src, std::size_t n, message_type& out, stream_type stream) {
    auto& self = static_cast<Derived&>(*this);
    selection_stats stats;
    stats.numel = n;
    stats.k_target = self.target_k(n);
    std::size_t capacity = stats.k_target;
    if constexpr (requires { options_.guard_factor; }) {
      capacity = std::max(capacity, guard_capacity(stats.k_target, options_.guard_factor) + 1);
    }
    out.prepare(n, capacity);
    std::size_t nnz = 0;
    if (n > 0) {
      const context<Backend> ctx{Backend{stream}, ws_};
      nnz = self.run(call<Backend>{ctx, src, n, out.index_storage(), out.value_storage()}, stats);
      finish_selection(ctx, out.index_storage(), out.value_storage(), nnz, src, options_.values);
    }
    out.set_result(nnz, options_.values);
    stats.k_selected = nnz;
    return stats;
  }
};

} // namespace detail
} // namespace gradcomp::cuda
