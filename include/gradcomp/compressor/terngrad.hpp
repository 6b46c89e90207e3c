// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::terngrad: ternary gradients {-s, 0, +s} by stochastic rounding (Wen et al.
//! 2017), 2 bits per element, with error feedback.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/quantizer_base.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gradcomp {

//! Options of gradcomp::terngrad.
struct terngrad_options {
  std::uint64_t seed = 0; //!< seeds the stochastic rounding (the same seed: the same codes).
  unsigned threads = 0;   //!< threads for the base's O(n) residual pass; 0 = all.
  std::uint32_t bucket_elements =
      0; //!< values per scale; 0: one scale per call (the paper's layer-wise scale).
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief TernGrad (Wen, Xu, Yan, Wu, Wang, Chen, Li, "TernGrad: Ternary Gradients to Reduce
//! Communication in Distributed Deep Learning", NeurIPS 2017, eq. 2): with s = max_i |x_i|
//! (the layer's L-infinity norm, one scale per call as in the paper's layer-wise scaling), each
//! element is sent as s sign(x_i) b_i with b_i ~ Bernoulli(|x_i| / s): unbiased, E[sent] = x.
//! TernGrad's gradient clipping (at 2.5 standard deviations) is not part of it: clip the
//! gradient first if wanted (e.g. gradcomp::clip_by_global_norm).
//!
//! A dense message of value_type::quantized at 1 level; wire bytes 32 + 9 + ceil(n / 4) (2 bits
//! per element). The Bernoulli draws come from a seeded std::mt19937_64 (24-bit uniforms, one
//! per finite element per call, in order), so ranks with the same seed draw the same and a
//! checkpoint keeps the RNG (a resumed run draws what an uninterrupted one would). With error
//! feedback (the paper's TernGrad has none; it is unbiased without) the residual keeps what was
//! not sent. O(n); deterministic for a given seed and call sequence, whatever the thread count.
//! Non-finite values: see detail::quantizer_base. Throws only std::bad_alloc.
class terngrad : public detail::seeded_quantizer_base<terngrad, terngrad_options> {
public:
  //! The name its checkpoint state carries (with the options and the RNG).
  static constexpr std::string_view state_name = "terngrad";
  //! @throws nothing but std::bad_alloc.
  explicit terngrad(options o = {}) : seeded_quantizer_base(o) {}

  //! One level: values -s, 0, +s.
  [[nodiscard]] std::uint32_t levels() const noexcept { return 1; }
  //! The largest finite magnitude. O(n).
  [[nodiscard]] float scale_of(std::span<const float> x) const noexcept {
    return detail::finite_magnitudes(x).max_abs;
  }
  //! sign(x) with probability |x| / scale, else 0 (one draw).
  [[nodiscard]] std::int32_t code_of(float x, float scale) { return stochastic_code(x, scale, 1); }
};

static_assert(momentum_compressor<terngrad>);

} // namespace gradcomp
