// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::detail::quantizer_base: what the quantizing compressors (scaled_sign,
//! terngrad, qsgd) share: a dense message of value_type::quantized, one scale per call, and the
//! stochastic rounding of qsgd and terngrad.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/rng_state.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>

namespace gradcomp::detail {

//! A uniform float in [0, 1) from the top 24 bits of one draw (every value k / 2^24 equally
//! likely; exact in float, the same on every platform). O(1).
[[nodiscard]] inline float uniform_unit(std::mt19937_64& rng) noexcept {
  return static_cast<float>(rng() >> 40) * 0x1p-24f;
}

//! The stochastic rounding of QSGD (Alistarh et al. 2017, eq. 1) and TernGrad: the magnitude
//! level of |x| in units of scale / levels, floor(r) + [u < r - floor(r)] with r = |x| / scale
//! x levels, clamped to levels (float rounding of the scale can put r a hair above it).
//! Unbiased: E[level] = r. @pre scale > 0 and finite, x finite, u in [0, 1). O(1).
[[nodiscard]] inline std::uint32_t
stochastic_level(float x, float scale, std::uint32_t levels, float u) noexcept {
  const double r =
      std::abs(static_cast<double>(x)) / static_cast<double>(scale) * static_cast<double>(levels);
  const double low = std::floor(r);
  const double level = low + (static_cast<double>(u) < r - low ? 1.0 : 0.0);
  return level >= static_cast<double>(levels) ? levels : static_cast<std::uint32_t>(level);
}

//! The signed code of a magnitude level: -level for a negative x, else level.
[[nodiscard]] inline std::int32_t signed_code(float x, std::uint32_t level) noexcept {
  return x < 0.0f ? -static_cast<std::int32_t>(level) : static_cast<std::int32_t>(level);
}

//! @brief Base of the quantizing compressors: every call sends a dense message of
//! value_type::quantized (every element, as quantized_value(scale, j, levels)).
//!
//! Derived supplies `std::uint32_t levels() const`, `float scale_of(std::span<const float> x)`
//! (the scale of a run of values to send, non-finite values left out; may return 0) and
//! `std::int32_t code_of(float x, float scale)` (|j| <= levels; called once per finite element,
//! in order, so a Derived with an RNG draws from it deterministically). Options has
//! `bucket_elements`: 0 (or >= n) quantizes the call's n values with one scale; B splits them
//! into buckets of B consecutive values (the last one shorter), each with its own scale_of (a
//! message with quantization segments; QSGD's bucketing, Alistarh et al. 2017 section 3.1) at
//! 4 bytes plus 6 per bucket on the wire for 128 <= B < 16384 (5 below 128). A non-finite value is
//! sent as itself (the message is then not encodable: gradcomp::encode names it; under
//! nonfinite_policy::skip_step the base sends it as 0). A scale below min_quantization_scale
//! (2^-111; 0 when every value is 0) or above FLT_MAX is sent as scale 1 with every code 0 (with
//! error feedback the values stay in the residual); per bucket with buckets.
//!
//! With error feedback the residual keeps acc - sent rounded to float (not exact as for the
//! selecting compressors: |acc - (sent + residual)| <= ulp(residual) / 2). O(n), sequential
//! (the base's O(n) residual pass uses `threads`).
template <class Derived, class Options>
class quantizer_base : public compressor_base<Derived, Options> {
public:
  using compressor_base<Derived, Options>::compressor_base;

  //! Every element is sent: k = n.
  [[nodiscard]] std::size_t target_k(std::size_t n) const noexcept { return n; }
  //! The messages' value type: value_type::quantized.
  [[nodiscard]] value_type values_type() const noexcept { return value_type::quantized; }
  //! Values per scale: Options::bucket_elements (0: one scale per call).
  [[nodiscard]] std::uint32_t bucket_elements() const noexcept {
    return this->options_.bucket_elements;
  }

  //! @brief compressor_base's selection hook: materializes every element, computes the scale of
  //! each bucket (or of the whole) and quantizes every element (stats.threshold = the largest
  //! scale, 0 when every value is 0). O(n); throws only std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    src.materialize(0, n);
    const std::span<const float> x(src.materialized(), n);
    const std::size_t bucket = bucket_elements();
    out.dense = true;
    out.values.resize(n);
    out.quantization_levels = static_cast<Derived&>(*this).levels();
    out.quantization_segments.clear();
    if (bucket == 0 || bucket >= n) {
      const run_scale r = quantize_run(x, 0, out);
      out.quantization_scale = r.scale;
      stats.threshold = r.valid ? r.scale : 0.0f;
      return;
    }
    float largest = 0.0f;
    for (std::size_t b = 0; b < n; b += bucket) {
      const std::size_t e = std::min(n, b + bucket);
      const run_scale r = quantize_run(x.subspan(b, e - b), b, out);
      out.quantization_segments.push_back(quantization_segment{e - b, r.scale});
      largest = r.valid ? std::max(largest, r.scale) : largest;
    }
    out.quantization_scale = 0.0f;
    stats.threshold = largest;
  }

private:
  struct run_scale {
    float scale; // the scale the run's values were quantized with
    bool valid;  // false: scale_of gave no valid scale (scale 1, every code 0)
  };

  // Quantizes the run x (written to out.values[first..]) with its own scale.
  run_scale quantize_run(std::span<const float> x, std::size_t first, sparse_message& out) {
    auto& self = static_cast<Derived&>(*this);
    const std::uint32_t levels = out.quantization_levels;
    const float computed = self.scale_of(x);
    const bool valid = valid_quantization_scale(computed);
    const float scale = valid ? computed : 1.0f;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      out.values[first + i] =
          std::isfinite(v) ? quantized_value(scale, valid ? self.code_of(v, scale) : 0, levels) : v;
    }
    return {scale, valid};
  }
};

//! @brief A quantizer_base with stochastic rounding (terngrad, qsgd): a std::mt19937_64 seeded
//! from Options::seed, one 24-bit uniform per finite element and call, kept in checkpoints (the
//! compressor_base hooks save_extra / load_extra), so ranks with the same seed round alike and a
//! resumed run draws what an uninterrupted one would.
template <class Derived, class Options>
class seeded_quantizer_base : public quantizer_base<Derived, Options> {
public:
  //! Keeps `o` (as compressor_base) and seeds the RNG with o.seed.
  explicit seeded_quantizer_base(const Options& o)
      : quantizer_base<Derived, Options>(o), rng_(o.seed) {}

  //! compressor_base's checkpoint hook: the RNG's state. O(1).
  void save_extra(state_writer& w) const { save_rng(w, "quantizer rng", rng_); }
  //! compressor_base's checkpoint hook. @throws state_error if the state is not an RNG state.
  void load_extra(state_reader& r) { rng_ = load_rng(r, "quantizer rng"); }

protected:
  //! sign(x) times |x| / scale x levels rounded stochastically (stochastic_level; one draw).
  [[nodiscard]] std::int32_t stochastic_code(float x, float scale, std::uint32_t levels) {
    return signed_code(x, stochastic_level(x, scale, levels, uniform_unit(rng_)));
  }

private:
  std::mt19937_64 rng_;
};

//! Sum of |x| and of x^2 over the finite elements, in double, in order; and the largest finite
//! |x|. O(n).
struct magnitudes {
  double sum_abs = 0.0;
  double sum_squares = 0.0;
  float max_abs = 0.0f;
};
[[nodiscard]] inline magnitudes finite_magnitudes(std::span<const float> x) noexcept {
  magnitudes m;
  for (const float v : x) {
    if (std::isfinite(v)) {
      const double a = std::abs(static_cast<double>(v));
      m.sum_abs += a;
      m.sum_squares += a * a;
      m.max_abs = std::max(m.max_abs, std::abs(v));
    }
  }
  return m;
}

} // namespace gradcomp::detail
