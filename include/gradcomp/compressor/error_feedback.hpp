// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::error_feedback: one layer's compressor with its residual.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief Error feedback (residual accumulation; S1 Algorithm 1 with the residual read as the
//! unsent part): per call, g = residual + grad; send C(g); residual = g - C(g).
//!
//! Conservation is exact: for every element, sent + new residual == old residual + grad, bit
//! for bit, because the split is a selection (sent elements leave a residual of exactly 0; a
//! value rounded to fp16 / bf16 leaves exactly its rounding error). Nothing is lost.
//! Holds one layer: the residual has the layer's length, fixed by the constructor, and the
//! compressor's state (a reused threshold, a sampling RNG) is this layer's. Use one object per
//! layer. Memory: 4n bytes. The accumulation is fused into the compressor's first pass, so error
//! feedback costs one extra read and write of the residual per call, not an extra pass.
//! @tparam Compressor a type modelling gradcomp::compressor.
template <compressor Compressor>
class error_feedback {
public:
  //! @param numel     elements of the layer's gradient.
  //! @param c         the compressor (its state becomes this layer's).
  explicit error_feedback(std::size_t numel, Compressor c = Compressor{})
      : compressor_(std::move(c)), residual_(numel, 0.0f) {}

  //! @brief Compresses grad (+ the residual) into out and keeps the unsent part.
  //! @throws std::invalid_argument if grad's length differs from the layer's.
  template <host_float_tensor Grad>
  selection_stats compress(const Grad& grad, sparse_message& out) {
    const auto g = host_span(grad);
    detail::require(g.size() == residual_.size(), "gradient has ", g.size(),
                    " elements, this layer's residual has ", residual_.size());
    return compressor_.compress_accumulate(residual_, g, out);
  }

  //! The unsent accumulation (n elements), read only.
  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }
  //! Zeroes the residual (e.g. after a learning-rate change or a checkpoint restore).
  void reset() noexcept { std::fill(residual_.begin(), residual_.end(), 0.0f); }
  [[nodiscard]] Compressor& compressor() noexcept { return compressor_; }
  [[nodiscard]] std::size_t numel() const noexcept { return residual_.size(); }

private:
  Compressor compressor_;
  std::vector<float> residual_;
};

} // namespace gradcomp
