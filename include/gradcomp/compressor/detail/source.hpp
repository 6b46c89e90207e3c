// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Where a compressor's first pass reads its values from: a read-only gradient, or the
//! error-feedback accumulation `residual += grad` fused into that pass.
//!
//! Contract for compressor implementations: run() calls `load(i)` exactly once for every
//! i in [0, n), all in its first pass (which may be split across threads by chunk); before that
//! pass it may only `peek(i)`; after it, it reads `materialized()`.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>

namespace gradcomp::detail {

//! Compression without error feedback: the values are the gradient itself.
struct read_source {
  const float* x;
  [[nodiscard]] float load(std::size_t i) const noexcept { return x[i]; }
  [[nodiscard]] float peek(std::size_t i) const noexcept { return x[i]; }
  [[nodiscard]] const float* materialized() const noexcept { return x; }
  static constexpr bool accumulates = false;
  void finish(const sparse_message&) const noexcept {}
};

//! Error feedback: the values are acc = residual + grad, computed once and stored in residual.
struct accumulate_source {
  float* residual;
  const float* grad;
  [[nodiscard]] float load(std::size_t i) const noexcept {
    const float v = residual[i] + grad[i];
    residual[i] = v;
    return v;
  }
  [[nodiscard]] float peek(std::size_t i) const noexcept { return residual[i] + grad[i]; }
  [[nodiscard]] const float* materialized() const noexcept { return residual; }
  static constexpr bool accumulates = true;

  //! residual = acc - sent for every sent element: exactly 0 where the value went out
  //! unchanged, the rounding error where it was rounded to fp16/bf16.
  void finish(const sparse_message& m) const noexcept {
    auto settle = [this](std::size_t i, float sent) {
      const float acc = residual[i];
      residual[i] = acc == sent ? 0.0f : acc - sent;
    };
    if (m.dense) {
      for (std::size_t i = 0; i < m.values.size(); ++i) {
        settle(i, m.values[i]);
      }
    } else {
      for (std::size_t j = 0; j < m.indices.size(); ++j) {
        settle(m.indices[j], m.values[j]);
      }
    }
  }
};

} // namespace gradcomp::detail
