// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Where a compressor's first pass reads its values from: a read-only gradient, the
//! error-feedback accumulation `residual += grad` fused into that pass, or the same with DGC's
//! momentum correction (`velocity = m velocity + grad; residual += velocity`).
//!
//! Contract for compressor implementations: run() calls `materialize(begin, end)` exactly once
//! for every element, all in its first pass (which may be split across threads by chunk and
//! tile, see for_each_tile), and reads `materialized()[i]` only after element i was
//! materialized; before that it may only `peek(i)`. Accumulating sources also offer
//! `scan_first_pass(b, e, key, limit, hits)`: materialize [b, e) and append its threshold hits
//! (the fused filter of selection.hpp).
#pragma once

#include <gradcomp/compressor/detail/scan_kernel.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace gradcomp::detail {

//! Elements per tile: the first pass materializes a tile (it stays in L1) and then scans it.
inline constexpr std::size_t tile_elements = 2048;

//! Calls fn(begin, end) over [b, e) in tiles, materializing each tile first when `first_pass`.
template <class Source, class Fn>
void for_each_tile(const Source& src, bool first_pass, std::size_t b, std::size_t e, Fn&& fn) {
  for (std::size_t t = b; t < e; t += tile_elements) {
    const std::size_t end = std::min(e, t + tile_elements);
    if (first_pass) {
      src.materialize(t, end);
    }
    fn(t, end);
  }
}

//! Compression without error feedback: the values are the gradient itself.
struct read_source {
  const float* x;
  void materialize(std::size_t, std::size_t) const noexcept {}
  [[nodiscard]] float peek(std::size_t i) const noexcept { return x[i]; }
  [[nodiscard]] const float* materialized() const noexcept { return x; }
  static constexpr bool accumulates = false;
  void finish(const sparse_message&, std::size_t, std::size_t) const noexcept {}
};

//! Error feedback: the values are acc = residual + grad, computed once and stored in residual.
struct accumulate_source {
  float* residual;
  const float* grad;
  //! residual[i] += grad[i] for i in [begin, end): a plain loop the compiler vectorises.
  void materialize(std::size_t begin, std::size_t end) const noexcept {
    float* const r = residual;
    const float* const g = grad;
    for (std::size_t i = begin; i < end; ++i) {
      r[i] = r[i] + g[i];
    }
  }
  [[nodiscard]] float peek(std::size_t i) const noexcept { return residual[i] + grad[i]; }
  [[nodiscard]] const float* materialized() const noexcept { return residual; }
  static constexpr bool accumulates = true;
  //! Materializes [b, e) and appends the elements whose magnitude key reaches `key`.
  void scan_first_pass(
      std::size_t b, std::size_t e, std::uint32_t key, std::size_t limit, hit_list& hits) const {
    scan_hits<true>(residual, grad, b, e, key, limit, hits);
  }

  //! residual = acc - sent for the sent elements at message positions [begin, end): exactly 0
  //! where the value went out unchanged, the rounding error where it was rounded to fp16/bf16.
  void finish(const sparse_message& m, std::size_t begin, std::size_t end) const noexcept {
    for (std::size_t j = begin; j < end; ++j) {
      const std::size_t i = m.dense ? j : m.indices[j];
      const float acc = residual[i];
      const float sent = m.values[j];
      residual[i] = residual_after_sending(acc, sent);
    }
  }
};

//! Error feedback with DGC's momentum correction (Lin et al. 2018, "Deep Gradient Compression",
//! eqs. 4-6): velocity = momentum x velocity + grad, then acc = residual + velocity, both
//! computed once per element and stored in place. finish() also applies momentum factor
//! masking: the velocity of every sent element becomes 0.
//! DGC's velocity update of one element, momentum x velocity + grad, with a result below
//! FLT_MIN in magnitude (a subnormal) stored as 0. An element whose gradient stays 0 (a dead
//! unit) decays as momentum^t and turns subnormal after about 800 iterations at momentum 0.9;
//! on x86 every later multiply-add on it then takes a microcode assist (~100x slower), which
//! tripled the compression time of a 1.66 M-value layer in training. What is flushed is below
//! 1.2e-38 per element and iteration, far under any value fp32 training can resolve.
[[nodiscard]] inline float decayed_velocity(float momentum, float velocity, float grad) noexcept {
  const float v = momentum * velocity + grad;
  return std::abs(v) < std::numeric_limits<float>::min() ? 0.0f : v;
}

//! DGC's velocity update: velocity[i] = decayed_velocity(momentum, velocity[i], grad[i]) for i
//! in [begin, end). Shared by momentum_accumulate_source and momentum correction without factor
//! masking.
inline void update_velocity(float* const velocity,
                            const float* const grad,
                            const float momentum,
                            const std::size_t begin,
                            const std::size_t end) noexcept {
  for (std::size_t i = begin; i < end; ++i) {
    velocity[i] = decayed_velocity(momentum, velocity[i], grad[i]);
  }
}

struct momentum_accumulate_source {
  float* residual;
  float* velocity;
  const float* grad;
  float momentum;
  //! Momentum factor masking: finish() zeroes the velocity of every sent element (DGC); false
  //! keeps it (the velocity update still fused into the first pass).
  bool factor_masking = true;

  //! velocity[i] = momentum x velocity[i] + grad[i] for i in [begin, end).
  void update_velocity(std::size_t begin, std::size_t end) const noexcept {
    detail::update_velocity(velocity, grad, momentum, begin, end);
  }
  void materialize(std::size_t begin, std::size_t end) const noexcept {
    update_velocity(begin, end);
    accumulate_source{residual, velocity}.materialize(begin, end);
  }
  [[nodiscard]] float peek(std::size_t i) const noexcept {
    return residual[i] + decayed_velocity(momentum, velocity[i], grad[i]);
  }
  [[nodiscard]] const float* materialized() const noexcept { return residual; }
  static constexpr bool accumulates = true;
  //! Per tile (it stays in L1): the velocity update, then the fused accumulate-and-filter.
  void scan_first_pass(
      std::size_t b, std::size_t e, std::uint32_t key, std::size_t limit, hit_list& hits) const {
    for_each_tile(*this, false, b, e, [&](std::size_t t, std::size_t end) {
      update_velocity(t, end);
      scan_hits<true>(residual, velocity, t, end, key, limit, hits);
    });
  }
  //! The residual as accumulate_source::finish, and with factor_masking velocity = 0 where sent.
  void finish(const sparse_message& m, std::size_t begin, std::size_t end) const noexcept {
    accumulate_source{residual, velocity}.finish(m, begin, end);
    if (!factor_masking) {
      return;
    }
    for (std::size_t j = begin; j < end; ++j) {
      velocity[m.dense ? j : m.indices[j]] = 0.0f;
    }
  }
};

//! A source with the non-finite check of nonfinite_policy::raise / skip_step fused into the
//! first pass: each tile is checked right after it is materialized (while it is in L1), and
//! the OR of the checks lands in `*seen` (one atomic OR per materialize / scan call, so
//! disjoint ranges may still be materialized from different threads). With
//! `zero_nonfinite_gradient` (skip_step) each tile's gradient is checked before it is
//! accumulated too (it is read into L1 for the accumulation anyway), and a tile that holds a
//! non-finite gradient value takes an element-wise path that accumulates that value as 0, so
//! the residual and velocity keep their finite values. Accumulating sources only (a read-only
//! gradient is checked before run()).
template <class Source>
struct checked_source : Source {
  std::atomic<std::uint32_t>* seen;
  bool zero_nonfinite_gradient;

  //! Element i with its gradient value taken as 0.
  void accumulate_zero(std::size_t i) const noexcept {
    if constexpr (requires { this->velocity; }) {
      this->velocity[i] = decayed_velocity(this->momentum, this->velocity[i], 0.0f);
      this->residual[i] = this->residual[i] + this->velocity[i];
    } else {
      this->residual[i] = this->residual[i] + 0.0f;
    }
  }
  //! With zero_nonfinite_gradient, a tile [t, e) whose gradient holds a NaN or an infinity is
  //! materialized element-wise (those values as 0): returns true, else does nothing.
  bool zeroed_tile(std::size_t t, std::size_t e) const noexcept {
    if (!zero_nonfinite_gradient || nonfinite_bits(this->grad + t, e - t) == 0) {
      return false;
    }
    for (std::size_t i = t; i < e; ++i) {
      if (nonfinite_bits(this->grad + i, 1) != 0) {
        accumulate_zero(i);
      } else {
        Source::materialize(i, i + 1);
      }
    }
    return true;
  }
  void materialize(std::size_t begin, std::size_t end) const noexcept {
    std::uint32_t bits = 0;
    for (std::size_t t = begin; t < end; t += tile_elements) {
      const std::size_t e = std::min(end, t + tile_elements);
      if (zeroed_tile(t, e)) {
        bits |= 0x80000000u;
      } else {
        Source::materialize(t, e);
      }
      bits |= nonfinite_bits(this->materialized() + t, e - t);
    }
    seen->fetch_or(bits, std::memory_order_relaxed);
  }
  void scan_first_pass(
      std::size_t b, std::size_t e, std::uint32_t key, std::size_t limit, hit_list& hits) const {
    std::uint32_t bits = 0;
    for (std::size_t t = b; t < e; t += tile_elements) {
      const std::size_t end = std::min(e, t + tile_elements);
      if (zeroed_tile(t, end)) {
        bits |= 0x80000000u;
        scan_hits<false>(this->residual, nullptr, t, end, key, limit, hits);
      } else {
        Source::scan_first_pass(t, end, key, limit, hits);
      }
      bits |= nonfinite_bits(this->materialized() + t, end - t);
    }
    seen->fetch_or(bits, std::memory_order_relaxed);
  }
  //! skip_step after a detection: how many gradient values of [0, n) were non-finite (taken as
  //! 0), plus the accumulated values that still are (an overflowing sum, a residual that was
  //! already non-finite), which it zeroes (with their velocity, under momentum correction).
  std::size_t drop_nonfinite(std::size_t n) const noexcept {
    if constexpr (requires { this->velocity; }) {
      zero_non_finite({this->velocity, n});
    }
    return scan_nonfinite({this->grad, n}).count + zero_non_finite({this->residual, n});
  }
};
} // namespace gradcomp::detail
