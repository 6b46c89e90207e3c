// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::error_feedback: one layer's compressor with its residual.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/source.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief DGC's momentum correction for error feedback (Lin et al. 2018, "Deep Gradient
//! Compression", eqs. 4-6): with momentum SGD, each worker keeps its own velocity
//! u = m u + grad and accumulates u (not grad) in the residual, and the velocity of every sent
//! element is zeroed (momentum factor masking); the optimizer then applies the averaged update
//! without momentum of its own. Momentum 0 switches it off (plain error feedback).
//!
//! `factor_masking = false` keeps every element's velocity when it is sent and clears only its
//! accumulation (the residual): the sum of everything a worker sends over a run is then exactly
//! the sum of its velocities, the update of momentum SGD, only delayed, so density 1 is momentum
//! SGD. With masking (DGC's choice, against stale momentum) an element sent every T iterations
//! gets the momentum amplification (1 - m^T) / (1 - m) instead of 1 / (1 - m): about 10 at
//! density 0.01 with m = 0.9 (T about 100), 1 at density 1 (plain SGD), which makes a density
//! warm-up step with a fraction of the effective learning rate (docs/fidelity.md). With masking
//! the velocity update is fused into the compressor's first pass; without it too where the
//! compressor models gradcomp::kept_velocity_compressor (every host compressor of the
//! library), else it is an extra pass over the layer. The setting is not part
//! of a checkpoint's state (residual and velocity mean the same under both): a run may resume
//! with either.
struct momentum_correction {
  double momentum = 0.0;      //!< m in [0, 1); 0 = off.
  bool factor_masking = true; //!< zero the velocity of sent elements (DGC); false keeps it.
};

namespace detail {

//! Checks that momentum correction `mc` can be used with compressor type C: momentum in [0, 1),
//! and 0 unless C models gradcomp::momentum_compressor.
//! @throws std::invalid_argument naming the momentum otherwise.
template <compressor C>
void check_momentum_correction(const momentum_correction& mc) {
  check_momentum(mc.momentum);
  if constexpr (!momentum_compressor<C>) {
    require(mc.momentum == 0.0, "momentum correction ", mc.momentum,
            " needs a compressor that models gradcomp::momentum_compressor");
  }
}

//! DGC's momentum correction on compressor `c` with factor masking on or off: C's own
//! compress_accumulate_momentum(..., factor_masking) where C models kept_velocity_compressor
//! (the velocity update fused into the first pass); otherwise with masking its
//! compress_accumulate_momentum, without it velocity = momentum x velocity + grad as its own
//! pass followed by compress_accumulate of the velocity (the velocity then stays as it is). The
//! same bits either way.
//! @throws std::invalid_argument naming the lengths if residual, velocity and grad differ
//! (nothing changed then); what C throws.
template <momentum_compressor C>
selection_stats compress_accumulate_momentum(C& c,
                                             std::span<float> residual,
                                             std::span<float> velocity,
                                             std::span<const float> grad,
                                             float momentum,
                                             bool factor_masking,
                                             sparse_message& out) {
  if constexpr (kept_velocity_compressor<C>) {
    return c.compress_accumulate_momentum(residual, velocity, grad, momentum, out, factor_masking);
  } else {
    if (factor_masking) {
      return c.compress_accumulate_momentum(residual, velocity, grad, momentum, out);
    }
    require(residual.size() == grad.size() && velocity.size() == grad.size(), "residual has ",
            residual.size(), " elements, velocity ", velocity.size(), ", gradient ", grad.size());
    check_momentum(momentum);
    update_velocity(velocity.data(), grad.data(), momentum, 0, grad.size());
    const std::span<const float> accumulated(velocity);
    return c.compress_accumulate(residual, accumulated, out);
  }
}

//! One error-feedback call of compressor `c` on external state: when `momentum` > 0 (then
//! `velocity` has the gradient's length), DGC's momentum correction with factor masking on or
//! off (compress_accumulate_momentum above); else compress_accumulate of the gradient. Shared by
//! error_feedback, any_compressor and the pipeline's per-group compression.
template <compressor C>
selection_stats compress_with_feedback(C& c,
                                       std::span<float> residual,
                                       std::span<float> velocity,
                                       std::span<const float> grad,
                                       float momentum,
                                       bool factor_masking,
                                       sparse_message& out) {
  if constexpr (momentum_compressor<C>) {
    if (momentum > 0.0f) {
      return detail::compress_accumulate_momentum(c, residual, velocity, grad, momentum,
                                                  factor_masking, out);
    }
  }
  return c.compress_accumulate(residual, grad, out);
}

} // namespace detail

namespace detail {
//! Reads a saved momentum-correction momentum (error_feedback's, the pipeline's) and checks
//! that it is `here`, bit for bit. @throws state_error naming both.
inline void expect_momentum(state_reader& r, std::string_view what, float here) {
  const float m = r.f32(what);
  if (std::bit_cast<std::uint32_t>(m) != std::bit_cast<std::uint32_t>(here)) {
    throw state_error(
        concat("gradcomp state: momentum correction ", m, " in the checkpoint, ", here, " here"));
  }
}
//! residual[i] += sent value of element i for every element of message `m` (length
//! residual.size()): gives the values a skipped step sent back to the residual they came from.
//! Exact: the residual of a sent element holds acc - sent exactly, so the sum is acc again.
//! Returns the number of elements. O(nnz).
inline std::size_t add_sent(std::span<float> residual, const sparse_message& m) noexcept {
  if (m.dense) {
    for (std::size_t i = 0; i < m.values.size(); ++i) {
      residual[i] += m.values[i];
    }
  } else {
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      residual[m.indices[j]] += m.values[j];
    }
  }
  return m.values.size();
}
//! residual[i] += sent value of element i for every element of message `m` whose index plus
//! `offset` is not in `selected` (ascending): gives back what a selecting transport (gTop-k)
//! did not sum. Returns how many. O(nnz + |selected|).
inline std::size_t add_unselected(std::span<float> residual,
                                  const sparse_message& m,
                                  std::span<const std::uint32_t> selected,
                                  std::uint64_t offset) noexcept {
  std::size_t returned = 0;
  std::size_t g = 0;
  const std::size_t nnz = m.values.size();
  for (std::size_t j = 0; j < nnz; ++j) {
    const std::uint64_t i = m.dense ? j : m.indices[j];
    while (g < selected.size() && selected[g] < i + offset) {
      ++g;
    }
    if (g == selected.size() || selected[g] != i + offset) {
      residual[static_cast<std::size_t>(i)] += m.values[j];
      ++returned;
    }
  }
  return returned;
}
//! Multiplies every element of `values` by `factor`. O(n).
inline void scale_in_place(std::span<float> values, float factor) noexcept {
  for (float& v : values) {
    v *= factor;
  }
}
} // namespace detail

//! @brief Error feedback (residual accumulation; S1 Algorithm 1 with the residual read as the
//! unsent part): per call, g = residual + grad; send C(g); residual = g - C(g).
//!
//! Conservation is exact: for every element, sent + new residual == old residual + grad, bit
//! for bit, because the split is a selection (sent elements leave a residual of exactly 0; a
//! value rounded to fp16 / bf16 leaves exactly its rounding error). Nothing is lost.
//! Holds one layer: the residual has the layer's length, fixed by the constructor, and the
//! compressor's state (a reused threshold, a sampling RNG) is this layer's. Use one object per
//! layer. Memory: 4n bytes (8n with momentum correction: the velocity). The accumulation is
//! fused into the compressor's first pass, so error feedback costs one extra read and write of
//! the residual per call (and of the velocity with momentum correction), not an extra pass.
//!
//! With gradcomp::momentum_correction (m > 0), each call first updates the layer's velocity
//! u = m u + grad and accumulates u instead of grad, and the velocity is zeroed where an element
//! was sent (unless factor_masking is false); conservation then holds for the residual against
//! u: sent + new residual == old residual + u, bit for bit.
//! @tparam Compressor a type modelling gradcomp::compressor (gradcomp::momentum_compressor for
//! momentum correction).
template <compressor Compressor>
class error_feedback {
public:
  //! @param numel     elements of the layer's gradient.
  //! @param c         the compressor (its state becomes this layer's).
  //! @param mc        DGC momentum correction (off by default).
  //! @throws std::invalid_argument if mc.momentum is outside [0, 1), or is not 0 and the
  //! compressor does not model gradcomp::momentum_compressor.
  explicit error_feedback(std::size_t numel,
                          Compressor c = Compressor{},
                          momentum_correction mc = {})
      : compressor_(std::move(c)), residual_(numel, 0.0f),
        momentum_(static_cast<float>(mc.momentum)), factor_masking_(mc.factor_masking) {
    detail::check_momentum_correction<Compressor>(mc);
    if (momentum_ > 0.0f) {
      velocity_.assign(numel, 0.0f);
    }
  }

  //! @brief Compresses grad (+ the residual; with momentum correction, the updated velocity
  //! instead of grad) into out and keeps the unsent part.
  //! @throws std::invalid_argument if grad's length differs from the layer's.
  template <host_float_tensor Grad>
  selection_stats compress(const Grad& grad, sparse_message& out) {
    const auto g = host_span(grad);
    detail::require(g.size() == residual_.size(), "gradient has ", g.size(),
                    " elements, this layer's residual has ", residual_.size());
    return detail::compress_with_feedback(compressor_, std::span<float>(residual_),
                                          std::span<float>(velocity_), g, momentum_,
                                          factor_masking_, out);
  }

  //! The unsent accumulation (n elements), read only.
  [[nodiscard]] std::span<const float> residual() const noexcept { return residual_; }
  //! The momentum-correction velocity (n elements; empty without momentum correction).
  [[nodiscard]] std::span<const float> velocity() const noexcept { return velocity_; }
  //! The momentum of the correction (0 = off).
  [[nodiscard]] float momentum() const noexcept { return momentum_; }
  //! Whether sent elements' velocities are zeroed (gradcomp::momentum_correction::factor_masking).
  [[nodiscard]] bool factor_masking() const noexcept { return factor_masking_; }
  //! @brief Switches factor masking from the next call on (e.g. off during a density warm-up,
  //! where masking would leave little momentum, on after it: gradcomp-train
  //! `--factor-masking-after-warmup`). The velocity and the residual are kept, so conservation
  //! stays exact. No effect without momentum correction. O(1).
  void set_factor_masking(bool on) noexcept { factor_masking_ = on; }
  //! Zeroes the residual and the velocity (e.g. after a learning-rate change or a checkpoint
  //! restore).
  void reset() noexcept {
    std::fill(residual_.begin(), residual_.end(), 0.0f);
    std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  }
  //! Multiplies the residual and the velocity by `factor`: keeps them in the units of a gradient
  //! whose loss scale changed by `factor` (loss_scale_step::factor). Exact (nothing lost) for a
  //! power of two while the products stay normal floats. O(n).
  void rescale(float factor) noexcept {
    detail::scale_in_place(residual_, factor);
    detail::scale_in_place(velocity_, factor);
  }
  //! Zeroes every NaN or infinity in the residual and the velocity and returns how many there
  //! were: after a step skipped for overflow (loss_scale), such values carry no information and a
  //! threshold compressor would never select them (NaN compares false). O(n).
  std::size_t drop_non_finite() noexcept {
    return detail::zero_non_finite(residual_) + detail::zero_non_finite(velocity_);
  }
  //! @brief Gives the values of `sent`, this layer's message of the last compress(), back to the
  //! residual (residual[i] += sent value, exactly: the residual is then the accumulation before
  //! sending), for a step that every rank skips (nonfinite_policy::skip_step, a loss-scale
  //! overflow), so that nothing it sent is lost. With momentum correction the sent elements'
  //! velocity stays as compress() left it (0 with factor masking); the residual holds their
  //! whole accumulation. O(nnz).
  //! @returns the number of elements given back.
  //! @throws std::invalid_argument if the message's dense length differs from the layer's, or
  //! an index is out of range (nothing changes then).
  std::size_t return_sent(const sparse_message& sent) {
    detail::require(sent.dense_length_elements == residual_.size(), "return_sent: the message has ",
                    sent.dense_length_elements, " elements, this layer's residual has ",
                    residual_.size());
    detail::require(sent.dense ? sent.values.size() == residual_.size()
                               : std::all_of(sent.indices.begin(), sent.indices.end(),
                                             [&](std::uint32_t i) { return i < residual_.size(); }),
                    "return_sent: the message does not fit this layer's ", residual_.size(),
                    " elements");
    return detail::add_sent(residual_, sent);
  }
  //! @brief Gives the values of `sent` (this layer's message of the last compress()) whose
  //! element, shifted by `offset`, is not in `selected` (ascending) back to the residual: error
  //! feedback on a global selection (pipeline_policy::selecting_transport, gTop-k), where only
  //! the selected elements were summed. Exact, as return_sent(). O(nnz + |selected|).
  //! @returns how many values were given back.
  //! @throws std::invalid_argument if the message's dense length differs from the layer's.
  std::size_t return_unselected(const sparse_message& sent,
                                std::span<const std::uint32_t> selected,
                                std::uint64_t offset = 0) {
    detail::require(sent.dense_length_elements == residual_.size(),
                    "return_unselected: the message has ", sent.dense_length_elements,
                    " elements, this layer's residual has ", residual_.size());
    return detail::add_unselected(residual_, sent, selected, offset);
  }
  //! @brief Checkpoint state (gradcomp::has_binary_state, where the compressor has one): the
  //! layer's length, the momentum of the correction, the compressor's state, the residual and
  //! the velocity, bit for bit. O(n). Deterministic.
  void save_state(state_writer& w) const requires has_binary_state<Compressor> {
    w.tag("error_feedback");
    w.u64(residual_.size());
    w.f32(momentum_);
    compressor_.save_state(w);
    w.floats(residual_);
    w.floats(velocity_);
  }
  //! @brief Restores what save_state() wrote, so that the next compress() continues exactly as
  //! the saved object would have (bit-identical messages and residuals). All or nothing. O(n).
  //! @throws state_error naming what differs (the layer's length, the momentum, the compressor
  //! or its options) or what is truncated; this object is then unchanged.
  void load_state(state_reader& r) requires has_binary_state<Compressor> {
    r.expect_tag("error_feedback");
    r.expect_u64("error_feedback layer length", residual_.size());
    detail::expect_momentum(r, "error_feedback momentum", momentum_);
    Compressor c = compressor_;
    c.load_state(r);
    std::vector<float> residual(residual_.size());
    r.floats_into("error_feedback residual", residual);
    std::vector<float> velocity(velocity_.size());
    r.floats_into("error_feedback velocity", velocity);
    compressor_ = std::move(c);
    residual_ = std::move(residual);
    velocity_ = std::move(velocity);
  }

  //! This layer's compressor (e.g. to set its density); its state is this layer's. O(1).
  [[nodiscard]] Compressor& compressor() noexcept { return compressor_; }
  //! Elements of the layer (the constructor's `numel`, the residual's length). O(1).
  [[nodiscard]] std::size_t numel() const noexcept { return residual_.size(); }

private:
  Compressor compressor_;
  std::vector<float> residual_;
  float momentum_;
  bool factor_masking_;
  std::vector<float> velocity_;
};

} // namespace gradcomp
