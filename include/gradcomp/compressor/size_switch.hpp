// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::size_switch: one compressor for small layers, another for large ones (DGC's
//! practice of not sparsifying small tensors such as biases, whose few values cost little on
//! the wire but whose delay through error feedback slows training).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <cstddef>
#include <utility>

namespace gradcomp {

//! @brief A compressor that hands gradients of fewer than `min_large_elements` elements to
//! `Small` and the others to `Large`. A layer's length never changes, so with one object per
//! layer (error_feedback, the pipeline) each layer always uses the same one. Typical use:
//! `size_switch(1024, dense(), reused_threshold({.density = 0.01}))`.
//!
//! Wire bytes, cost, determinism and exceptions: those of the compressor chosen for the length.
//! Both are stored (their per-layer state included); only the chosen one is called.
//! @tparam Small the compressor of gradients with n < min_large_elements.
//! @tparam Large the compressor of the others.
template <compressor Small, compressor Large>
class size_switch {
public:
  //! Opts in to gradcomp::compressor.
  using compressor_concept = compressor_tag;

  //! Keeps both compressors (moved in). O(1); throws what moving them throws.
  //! @param min_large_elements the smallest length handed to `large` (0: always `large`).
  //! @param small the compressor of gradients with fewer than `min_large_elements` elements.
  //! @param large the compressor of the others.
  size_switch(std::size_t min_large_elements, Small small, Large large)
      : min_large_(min_large_elements), small_(std::move(small)), large_(std::move(large)) {}

  //! Compresses x with the compressor for its length (see the class).
  template <host_float_tensor Tensor>
  selection_stats compress(const Tensor& x, sparse_message& out) {
    const auto s = host_span(x);
    return s.size() < min_large_ ? small_.compress(s, out) : large_.compress(s, out);
  }

  //! Error feedback fused into the selection, with the compressor for grad's length.
  template <host_float_tensor Residual, host_float_tensor Grad>
  selection_stats compress_accumulate(Residual& residual, const Grad& grad, sparse_message& out) {
    const auto g = host_span(grad);
    return g.size() < min_large_ ? small_.compress_accumulate(residual, g, out)
                                 : large_.compress_accumulate(residual, g, out);
  }

  //! Error feedback with momentum correction, with the compressor for grad's length (only when
  //! both model gradcomp::momentum_compressor).
  template <host_float_tensor Residual, host_float_tensor Velocity, host_float_tensor Grad>
  requires momentum_compressor<Small> && momentum_compressor<Large>
      selection_stats compress_accumulate_momentum(Residual& residual,
                                                   Velocity& velocity,
                                                   const Grad& grad,
                                                   float momentum,
                                                   sparse_message& out) {
    const auto g = host_span(grad);
    return g.size() < min_large_
               ? small_.compress_accumulate_momentum(residual, velocity, g, momentum, out)
               : large_.compress_accumulate_momentum(residual, velocity, g, momentum, out);
  }
  //! The same with momentum factor masking on or off (gradcomp::kept_velocity_compressor; only
  //! when both compressors model it).
  template <host_float_tensor Residual, host_float_tensor Velocity, host_float_tensor Grad>
  requires kept_velocity_compressor<Small> && kept_velocity_compressor<Large>
      selection_stats compress_accumulate_momentum(Residual& residual,
                                                   Velocity& velocity,
                                                   const Grad& grad,
                                                   float momentum,
                                                   sparse_message& out,
                                                   bool factor_masking) {
    const auto g = host_span(grad);
    return g.size() < min_large_
               ? small_.compress_accumulate_momentum(residual, velocity, g, momentum, out,
                                                     factor_masking)
               : large_.compress_accumulate_momentum(residual, velocity, g, momentum, out,
                                                     factor_masking);
  }

  //! The large compressor's density (gradcomp::density_compressor; layers below
  //! min_large_elements() go to `Small`, whatever this says). O(1).
  [[nodiscard]] double density() const noexcept requires density_compressor<Large> {
    return large_.density();
  }
  //! Sets the density of the large compressor, and of the small one if it has a density too.
  //! @throws std::invalid_argument naming `d` if it is outside (0, 1]; nothing changes then.
  void set_density(double d) requires density_compressor<Large> {
    check_density(d);
    large_.set_density(d);
    if constexpr (density_compressor<Small>) {
      small_.set_density(d);
    }
  }

  //! @brief Checkpoint state (gradcomp::has_binary_state, where both compressors have one):
  //! min_large_elements, then the small and the large compressor's states. O(1) plus theirs.
  void
  save_state(state_writer& w) const requires has_binary_state<Small> && has_binary_state<Large> {
    w.tag("size_switch");
    w.u64(min_large_);
    small_.save_state(w);
    large_.save_state(w);
  }
  //! @brief Restores what save_state() wrote (all or nothing).
  //! @throws state_error if min_large_elements differs, or as the compressors' load_state.
  void load_state(state_reader& r) requires has_binary_state<Small> && has_binary_state<Large> {
    r.expect_tag("size_switch");
    r.expect_u64("size_switch min_large_elements", min_large_);
    Small small = small_;
    Large large = large_;
    small.load_state(r);
    large.load_state(r);
    small_ = std::move(small);
    large_ = std::move(large);
  }

  //! The smallest length handed to the large compressor (the constructor's). O(1).
  [[nodiscard]] std::size_t min_large_elements() const noexcept { return min_large_; }
  //! The compressor of gradients with n < min_large_elements() (its state included). O(1).
  [[nodiscard]] Small& small() noexcept { return small_; }
  //! The compressor of gradients with n >= min_large_elements() (its state included). O(1).
  [[nodiscard]] Large& large() noexcept { return large_; }

private:
  std::size_t min_large_;
  Small small_;
  Large large_;
};

} // namespace gradcomp
