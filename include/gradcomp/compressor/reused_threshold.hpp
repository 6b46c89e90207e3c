// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::reused_threshold: S1's dynamic threshold reuse (exact every s calls).
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/estimated_select.hpp>
#include <gradcomp/compressor/detail/selection.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gradcomp {

//! @brief Options of reused_threshold: the density, the reuse interval s, the guard band, the
//! type the values are sent as, the threads.
struct reused_threshold_options {
  double density = 0.01;                //!< k / n, in (0, 1].
  std::uint64_t interval = 10;          //!< s >= 1: exact top-k every s calls.
  double guard_factor = 2.0;            //!< c in [1, 1e6]: accepted counts [k/c, c k].
  value_type values = value_type::fp32; //!< type the sent values are rounded to.
  unsigned threads = 0;                 //!< 0 = all hardware threads.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

namespace detail {
//! Checks the reuse interval s >= 1 (host and CUDA compressors).
//! @throws std::invalid_argument naming the value otherwise.
inline void check_interval(std::uint64_t interval) {
  require(interval >= 1, "interval ", interval, " is below the minimum 1");
}
} // namespace detail

//! @brief Reused threshold (S1, "dynamic" layer-wise sparsification): calls 0, s, 2s, ...
//! (counting from this object's first call, or from the first call after a set_density()) compute
//! the exact top-k and remember its threshold
//! H (the k-th largest magnitude); the calls between select |v| >= H in one filtering pass.
//!
//! Guard: a reused threshold selects roughly, not exactly, k values, and under error feedback
//! the count drifts (docs/compressors.md, "Reused threshold drift"). If the count leaves
//! [k/c, c k] the call falls back to exact top-k (stats.fallback) and the fallback's threshold
//! replaces H.
//! Use one object per layer: the remembered threshold is per layer (S1's list V = [H_1..H_L]).
//! Calls on empty gradients select nothing and do not count.
//! Cost: exact calls as exact_top_k; reuse calls one pass (with error feedback: read residual
//! and gradient, write residual), O(n). Wire bytes (u32/fp32): 32 + 8 x selected.
//! Deterministic given the sequence of inputs.
class reused_threshold : public compressor_base<reused_threshold, reused_threshold_options> {
public:
  //! The name its checkpoint state carries (compressor_base::save_state): with the options and
  //! the density, the position in the interval and the remembered threshold (save_extra), so a
  //! resumed run refreshes at the same calls and filters with the same threshold.
  static constexpr std::string_view state_name = "reused_threshold";
  //! @throws std::invalid_argument on density outside (0, 1], interval 0, guard_factor outside [1,
  //! 1e6].
  explicit reused_threshold(options o = {}) : compressor_base(o) {
    detail::check_interval(o.interval);
  }

  //! Calls made so far on non-empty gradients (the ones that count for the interval).
  [[nodiscard]] std::uint64_t calls() const noexcept { return calls_; }

  //! @brief compressor_base's density hook, called by set_density() when the density changed:
  //! the remembered threshold selects about the old k, so the next call computes the exact
  //! top-k at the new density (and restarts the interval from it). O(1); never throws.
  void density_changed() noexcept { refresh_ = true; }

  //! @brief compressor_base's selection hook: every `interval`-th call since construction (or
  //! since the last density change) computes the exact top-k and remembers its k-th magnitude;
  //! the calls between select every element at or above the remembered threshold in one
  //! materializing pass, accepted if the count lies in the guard band [k / c, c k], else an
  //! exact top-k (`stats.fallback`) whose threshold is remembered instead. Counts the call (see
  //! calls()). Sets `stats.threshold`, `exact`, `fallback`. O(n) over `threads`; deterministic
  //! for a given call sequence, whatever the thread count; throws only std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    if (refresh_) {
      refresh_ = false;
      phase_ = calls_;
    }
    const bool refresh = (calls_ - phase_) % options_.interval == 0;
    ++calls_;
    if (refresh) {
      threshold_key_ =
          detail::exact_top_k_select(src, true, n, stats.k_target, options_.threads, ws_, out);
      stats.exact = true;
      stats.threshold = detail::key_magnitude(threshold_key_);
      return;
    }
    const detail::estimate_policy policy{
        .guard_factor = options_.guard_factor, .max_adjust_rounds = 0, .threads = options_.threads};
    threshold_key_ =
        detail::estimated_select(src, true, n, stats.k_target,
                                 detail::key_magnitude(threshold_key_), policy, ws_, out, stats);
  }

  //! compressor_base's checkpoint hook: calls, the interval's phase, the pending refresh and
  //! the remembered threshold. O(1).
  void save_extra(state_writer& w) const {
    w.tag("reused_threshold interval");
    w.u64(calls_);
    w.u64(phase_);
    w.flag(refresh_);
    w.u32(threshold_key_);
  }
  //! compressor_base's checkpoint hook: restores what save_extra() wrote.
  //! @throws state_error if the phase lies after the calls or the refresh flag is not 0 or 1.
  void load_extra(state_reader& r) {
    r.expect_tag("reused_threshold interval");
    const std::uint64_t calls = r.u64("reused_threshold calls");
    const std::uint64_t phase = r.u64("reused_threshold phase");
    const bool refresh = r.flag("reused_threshold refresh");
    const std::uint32_t key = r.u32("reused_threshold threshold");
    if (phase > calls) {
      throw state_error(detail::concat("gradcomp state: reused_threshold phase ", phase,
                                       " lies after its calls ", calls));
    }
    calls_ = calls;
    phase_ = phase;
    refresh_ = refresh;
    threshold_key_ = key;
  }

private:
  std::uint64_t calls_ = 0;
  std::uint64_t phase_ = 0; // exact at calls phase_, phase_ + s, ... (moved by set_density)
  bool refresh_ = false;    // set_density() was called: the next call is exact
  std::uint32_t threshold_key_ = 0;
  detail::selection_workspace ws_;
};

static_assert(momentum_compressor<reused_threshold>);
static_assert(density_compressor<reused_threshold>);

} // namespace gradcomp
