// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::scaled_sign: one bit per element and one scale (EF-signSGD, Karimireddy et
//! al. 2019; the 1-bit compression of DeepSpeed's 1-bit Adam), with error feedback.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/quantizer_base.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gradcomp {

//! How gradcomp::scaled_sign chooses its scale.
enum class sign_scale : std::uint8_t {
  //! ||x||_1 / n, the mean magnitude (EF-signSGD, Karimireddy et al. 2019, Algorithm 1: the
  //! scale that makes s sign(x) closest to x in L2).
  mean_abs = 0,
  //! ||x||_2 / sqrt(n), the root mean square (DeepSpeed's 1-bit Adam / 1-bit LAMB compression).
  rms = 1,
};

//! Options of gradcomp::scaled_sign.
struct scaled_sign_options {
  sign_scale scale = sign_scale::mean_abs; //!< how the scale is computed.
  unsigned threads = 0;                    //!< threads for the base's O(n) residual pass; 0 = all.
  std::uint32_t bucket_elements = 0;       //!< values per scale; 0: one scale per call.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief Scaled sign compression, 1 bit per element (Karimireddy, Rebjock, Stich, Jaggi, "Error
//! Feedback Fixes SignSGD and other Gradient Compression Schemes", ICML 2019, Algorithm 1
//! (EF-signSGD): send s sign(p) with s = ||p||_1 / n and keep p - s sign(p) in the error
//! feedback; Seide et al. 2014's 1-bit SGD and DeepSpeed's 1-bit Adam use the same form with
//! another scale, sign_scale::rms).
//!
//! Every element is sent as +s (x >= 0, zeros included) or -s: a dense message of
//! value_type::quantized at 1 level. Wire bytes: 32 + 9 + ceil(n / 8) (1 bit per element; 2 bits
//! if the scale is 0, every value then 0). Without error feedback the compression is biased
//! and signSGD can diverge; use it with error feedback (gradcomp::error_feedback, the pipeline).
//! Momentum: every element is sent each call, so DGC's momentum correction zeroes every
//! velocity (no momentum is left); use the optimizer's momentum on the averaged update
//! instead. O(n); deterministic (no randomness). Non-finite values: see
//! detail::quantizer_base. Throws only std::bad_alloc (and what the base throws).
class scaled_sign : public detail::quantizer_base<scaled_sign, scaled_sign_options> {
public:
  //! The name its checkpoint state carries (compressor_base::save_state; no state of its own).
  static constexpr std::string_view state_name = "scaled_sign";
  //! @throws nothing but std::bad_alloc.
  explicit scaled_sign(options o = {}) : quantizer_base(o) {}

  //! One level: every value is +scale or -scale.
  [[nodiscard]] std::uint32_t levels() const noexcept { return 1; }
  //! The call's scale (sign_scale) over the n elements, non-finite ones counted as 0. O(n).
  [[nodiscard]] float scale_of(std::span<const float> x) const noexcept {
    const detail::magnitudes m = detail::finite_magnitudes(x);
    const auto n = static_cast<double>(x.size());
    return static_cast<float>(
        options_.scale == sign_scale::mean_abs ? m.sum_abs / n : std::sqrt(m.sum_squares / n));
  }
  //! +1 for x >= 0, else -1.
  [[nodiscard]] std::int32_t code_of(float x, float) const noexcept { return x >= 0.0f ? 1 : -1; }
};

static_assert(momentum_compressor<scaled_sign>);
static_assert(!density_compressor<scaled_sign>);

} // namespace gradcomp
