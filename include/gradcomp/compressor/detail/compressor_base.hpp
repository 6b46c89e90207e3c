// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Option checks shared by the host compressor base
//! (gradcomp/compressor/compressor_base.hpp) and the CUDA compressor bases
//! (gradcomp/cuda/detail/*compressor_base.cuh).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

namespace gradcomp::detail {

template <class T>
inline constexpr bool dependent_false_v = false;

//! Validates the options every compressor shares.
inline void check_guard_factor(double guard_factor) {
  require(guard_factor >= 1.0 && guard_factor <= 1e6, "guard_factor ", guard_factor,
          " is outside [1, 1e6]");
}

//! Validates the options every compressor may have (host and CUDA): `density` in (0, 1],
//! `guard_factor` in [1, 1e6] and `values` not value_type::quantized (only the quantizing
//! compressors make it), where Options has them.
//! @throws std::invalid_argument naming the value otherwise.
template <class Options>
void check_common_options(const Options& o) {
  if constexpr (requires { o.values; }) {
    require(o.values != value_type::quantized,
            "values quantized is made by the quantizing compressors (scaled_sign, terngrad, "
            "qsgd); a compressor rounds to fp32, fp16 or bf16");
  }
  if constexpr (requires { o.density; }) {
    check_density(o.density);
  }
  if constexpr (requires { o.guard_factor; }) {
    check_guard_factor(o.guard_factor);
  }
}

//! Validates what the CUDA compressors (gradcomp/cuda/) cannot do yet: they have no device
//! check for non-finite values, so an Options::nonfinite other than `propagate` is refused rather
//! than silently ignored.
//! @throws std::invalid_argument naming the policy otherwise.
template <class Options>
void check_device_options(const Options& o) {
  check_common_options(o);
  if constexpr (requires { o.nonfinite; }) {
    require(o.nonfinite == nonfinite_policy::propagate, "nonfinite policy ", to_string(o.nonfinite),
            " is not supported by the CUDA compressors (only propagate); check the gradient "
            "on the device before the call, or compress on the host");
  }
}

} // namespace gradcomp::detail
