// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::qsgd: QSGD's stochastic quantization to s levels of the L2 norm (Alistarh et
//! al. 2017), 1 + bit_width(s) bits per element, with error feedback.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/quantizer_base.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace gradcomp {

//! Options of gradcomp::qsgd.
struct qsgd_options {
  std::uint32_t levels = 15; //!< s, quantization levels per sign, [1, 2^15] (15: 5 bits).
  std::uint64_t seed = 0;    //!< seeds the stochastic rounding.
  unsigned threads = 0;      //!< threads for the base's O(n) residual pass; 0 = all.
  std::uint32_t bucket_elements =
      512; //!< values per scale (QSGD's bucket d); 0: one scale per call.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief QSGD (Alistarh, Grubic, Li, Tomioka, Vojnovic, "QSGD: Communication-Efficient SGD via
//! Gradient Quantization and Encoding", NeurIPS 2017, eq. 1): with the L2 norm ||x|| as the
//! scale and s levels, element i is sent as ||x|| sign(x_i) l_i / s, where l_i is |x_i| / ||x||
//! x s rounded down or up at random, up with probability equal to the fraction (unbiased:
//! E[sent] = x; variance at most min(n / s^2, sqrt(n) / s) ||x||^2, the paper's Lemma 3.1).
//! x is each bucket of d = options::bucket_elements consecutive values (512 by default; the
//! paper's section 3.1 bucketing, which bounds the variance by min(d / s^2, sqrt(d) / s) of the
//! bucket's norm: with one scale for a 1.6M-element merge group at s = 15, training diverged)
//! or, with d = 0, the whole call.
//!
//! A dense message of value_type::quantized at s levels; wire bytes 32 + 9 + ceil(n (1 +
//! bit_width(s)) / 8), plus at most 4 + 6 ceil(n / d) for the buckets' scales when n > d (128 <= d
//! < 16384): s = 15 (the default) 5 bits per element (5.09 with d = 512), s = 1 2 bits, s = 127 8
//! bits. The paper's Elias coding of the levels is not used (a fixed width keeps encoding O(n) and
//! branch-free; at s = sqrt(n) Elias coding would save more). Seeded std::mt19937_64 (one
//! 24-bit uniform per finite element per call), kept in checkpoints. With error feedback (the
//! paper has none; QSGD is unbiased without) the residual keeps what was not sent. O(n);
//! deterministic for a given seed and call sequence, whatever the thread count. Non-finite
//! values: see detail::quantizer_base.
class qsgd : public detail::seeded_quantizer_base<qsgd, qsgd_options> {
public:
  //! The name its checkpoint state carries (with the options and the RNG).
  static constexpr std::string_view state_name = "qsgd";
  //! @throws std::invalid_argument naming `levels` if it is outside [1, 2^15].
  explicit qsgd(options o = {}) : seeded_quantizer_base(o) {
    detail::require(o.levels >= 1 && o.levels <= max_quantization_levels, "qsgd: levels ", o.levels,
                    " outside [1, ", max_quantization_levels, "]");
  }
  //! Shorthand for `qsgd(options{.levels = levels, .seed = seed})`.
  //! @throws std::invalid_argument as the options constructor.
  explicit qsgd(std::uint32_t levels, std::uint64_t seed = 0)
      : qsgd(options{.levels = levels, .seed = seed}) {}

  //! s, from the options.
  [[nodiscard]] std::uint32_t levels() const noexcept { return options_.levels; }
  //! The L2 norm of the finite elements of one bucket (in double, rounded to float once). O(n).
  [[nodiscard]] float scale_of(std::span<const float> x) const noexcept {
    return static_cast<float>(std::sqrt(detail::finite_magnitudes(x).sum_squares));
  }
  //! sign(x) times |x| / scale x s rounded stochastically (one draw).
  [[nodiscard]] std::int32_t code_of(float x, float scale) {
    return stochastic_code(x, scale, options_.levels);
  }
};

static_assert(momentum_compressor<qsgd>);

} // namespace gradcomp
