// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::compressor_base: the CRTP base that gives a host compressor every public
//! entry point (compress, compress_accumulate, compress_accumulate_momentum for any host float
//! tensor; density / set_density) from one selection hook, `run(source, n, stats, out)`. Every
//! host compressor of the library derives from it, and a user's own compressor can too
//! (examples/04_custom_compressor, docs/extending.md).
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/compressor_base.hpp>
#include <gradcomp/compressor/detail/option_state.hpp>
#include <gradcomp/compressor/detail/source.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <atomic>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace gradcomp {

//! @brief Base of a host compressor: derive `class my : public compressor_base<my, my_options>`
//! and write the selection once, in `run()`; the base supplies everything gradcomp::compressor,
//! gradcomp::momentum_compressor and (with a `density` option) gradcomp::density_compressor ask
//! for, error feedback and DGC's momentum correction included, for any host float tensor
//! (std::vector, std::span, gradcomp::host_view, a user type through tensor_traits).
//!
//! **Options** (a plain struct, kept by value, readable as the protected member `options_`):
//! * required: `value_type values` (the type the sent values are rounded to, e.g.
//!   value_type::fp32; or, instead, a Derived `value_type values_type() const` that hides the
//!   base's, as the quantizers' detail::quantizer_base does) and `unsigned threads` (threads
//!   for the base's O(nnz) pass; 0 = all hardware threads; run() may use it too);
//! * optional: `double density` (k / n in (0, 1]; validated by the constructor; gives
//!   target_k(n) = k_for_density(n, density), density() and set_density()), `double
//!   guard_factor` (validated to [1, 1e6]), `nonfinite_policy nonfinite` (what a NaN or an
//!   infinity does: gradcomp::nonfinite_policy; the base applies it around run(), which needs
//!   nothing for it); any other member is the Derived class's to check.
//!
//! **The hook**, which Derived must declare (public, or private with `friend class
//! gradcomp::compressor_base<Derived, Options>;`):
//! @code
//! template <class Source>
//! void run(const Source& src, std::size_t n, gradcomp::selection_stats& stats,
//!          gradcomp::sparse_message& out);
//! @endcode
//! * It is called once per compression call, with n >= 1 (a 0-element gradient never reaches
//!   it), on the caller's thread.
//! * `stats.numel == n` and `stats.k_target == target_k(n)` are already set; run() may set
//!   `threshold`, `exact`, `fallback` and `adjust_rounds`; the base sets `k_selected =
//!   out.nnz()` afterwards.
//! * `out` arrives cleared: dense length n, sparse layout, no pairs (capacity kept). run() must
//!   leave either sparse pairs, indices strictly ascending and below n with `values[j]` the
//!   source's value of element `indices[j]` (see below), or `out.dense = true` with n values,
//!   the source's values in order. Leave `values_type` alone, and do not round: the base
//!   rounds every value to `values` afterwards and keeps the rounding error in the residual.
//! * `src` (a read-only view; never store it) says where the values come from: the gradient
//!   itself (compress), the error-feedback sum residual + grad (compress_accumulate), or
//!   residual + (momentum x velocity + grad) (compress_accumulate_momentum). Its public surface:
//!   - `src.materialize(b, e)`: computes the values of elements [b, e) (with error feedback it
//!     writes residual[i] += grad[i] in place, so it is not idempotent). Call it exactly once
//!     for every element of [0, n), before reading them; disjoint ranges may be materialized
//!     from different threads at the same time.
//!   - `src.materialized()`: `const float*` to the n values; element i may be read only after
//!     it was materialized.
//!   - `src.peek(i)`: element i's value without materializing it (e.g. to sample before the
//!     pass); O(1), any time before materialize() covers i.
//!   - `Source::accumulates`: `static constexpr bool`, true with error feedback.
//!   Its other members (`finish`, `scan_first_pass`) are for the base and the library's kernels.
//!   A one-pass compressor calls `src.materialize(0, n)` and then reads `src.materialized()`.
//!
//! **Customisation points**, found on Derived by name:
//! * `std::size_t target_k(std::size_t n) const`: hides the base's (k_for_density(n, density))
//!   to give stats.k_target another meaning (gradcomp::dense: n); required when Options has no
//!   `density`.
//! * `void density_changed()`: called by set_density() after the density changed (not when it
//!   is set to its current value), to refresh state that depends on it (reused_threshold
//!   forgets its remembered threshold).
//!
//! **What the base guarantees** on top of run(): with error feedback, for every element, sent +
//! new residual == old residual + grad bit for bit when run() follows the rules above (sent
//! elements keep only their rounding error in the residual; unsent ones keep the sum), and with
//! momentum correction the velocity of every sent element becomes 0; the message satisfies
//! sparse_message's invariants when run()'s output does.
//!
//! **Complexity**: run()'s cost, plus O(nnz) for rounding and the residual update (parallel over
//! `threads`), plus O(1) for the checks. No allocation beyond what `out` and run() need.
//! **Determinism**: the base adds none of its own nondeterminism; a Derived compressor models
//! gradcomp::compressor only if run() is deterministic for a given input, state and seed,
//! whatever the thread count (the pipeline and the MPI transports rely on it for identical
//! results across ranks).
//! **Throws**: std::invalid_argument from the constructor (density outside (0, 1], guard_factor
//! outside [1, 1e6]), from compress_accumulate / compress_accumulate_momentum (lengths differ,
//! momentum outside [0, 1)) and from set_density (density outside (0, 1]), each naming the
//! value and its limit; gradcomp::nonfinite_error from a compression call under
//! nonfinite_policy::raise when a value is NaN or infinite; whatever run() throws propagates (the
//! message is then unspecified, and a residual may already hold the accumulated values of the
//! elements run() materialized). A device-memory tensor passed to compress() does not compile.
//! @tparam Derived the compressor class itself (CRTP).
//! @tparam Options its options struct, as above.
template <class Derived, class Options>
class compressor_base {
public:
  //! Opts in to gradcomp::compressor (the concept also checks the entry points below).
  using compressor_concept = compressor_tag;
  //! The options struct (`Derived::options o{...}` in constructors).
  using options = Options;

  //! @brief Keeps a copy of `o` and validates `density` and `guard_factor` where Options has
  //! them; Derived's constructor checks its own members. O(1).
  //! @throws std::invalid_argument if the density is outside (0, 1] or guard_factor outside [1,
  //! 1e6].
  explicit compressor_base(const Options& o) : options_(o) { detail::check_common_options(o); }

  //! The options this compressor was built with (the density as set_density() last set it).
  //! O(1).
  [[nodiscard]] const Options& get_options() const noexcept { return options_; }
  //! The type the sent values are rounded to (and encoded as): `get_options().values`. O(1).
  [[nodiscard]] value_type values_type() const noexcept { return options_.values; }

  //! @brief k for an n-element gradient: ceil(density x n) clamped to [1, n] (0 when n == 0),
  //! the value stats.k_target gets before run(). O(1). Derived may hide it with its own
  //! `target_k(n)` (then this one is never instantiated: required where Options has no density).
  [[nodiscard]] std::size_t target_k(std::size_t n) const {
    return k_for_density(n, options_.density);
  }

  //! The density the next call selects at (k = k_for_density(n, density())). O(1).
  [[nodiscard]] double density() const noexcept requires requires(const Options& o) { o.density; }
  { return options_.density; }

  //! @brief Sets the density of the following calls (gradcomp::density_compressor): a density
  //! schedule's step (density_warmup) or a layer's adaptive density (adaptive_densities). State
  //! that depends on the density (reused_threshold's remembered threshold) is refreshed at the
  //! next call; setting the density it already has changes nothing. O(1).
  //! @throws std::invalid_argument naming `d` if it is outside (0, 1] (NaN included); nothing
  //! changes then.
  void set_density(double d) requires requires(const Options& o) { o.density; }
  {
    check_density(d);
    if (d == options_.density) {
      return;
    }
    options_.density = d;
    if constexpr (requires(Derived & self) { self.density_changed(); }) {
      static_cast<Derived&>(*this).density_changed();
    }
  }

  //! @brief Compresses gradient `x` (n floats, host memory, read only) into `out` (overwritten;
  //! its capacity is reused): run() on the gradient's values, then rounding to values_type().
  //! Cost: run()'s plus O(nnz). Deterministic when run() is.
  //! @returns the call's selection_stats (numel, k_target, k_selected = out.nnz(), and what
  //! run() set).
  //! @throws whatever run() throws.
  template <host_float_tensor Tensor>
  selection_stats compress(const Tensor& x, sparse_message& out) {
    const auto s = host_span(x);
    return dispatch(detail::read_source{s.data()}, s.size(), out);
  }

  //! @brief Error feedback fused into compression: acc = residual + grad; out = C(acc);
  //! residual = acc - out (exactly: for every element, sent + new residual == acc bit for bit).
  //! run() sees an accumulating source: its first pass computes acc in place in `residual`.
  //! Cost: run()'s plus O(nnz). Deterministic when run() is.
  //! @pre residual and grad have the same length.
  //! @throws std::invalid_argument naming both lengths if they differ (nothing changed then);
  //! whatever run() throws.
  template <host_float_tensor Residual, host_float_tensor Grad>
  selection_stats compress_accumulate(Residual& residual, const Grad& grad, sparse_message& out) {
    const auto r = host_span(residual);
    const auto g = host_span(grad);
    static_assert(!std::is_const_v<std::remove_reference_t<decltype(r[0])>>,
                  "gradcomp: the residual must be writable");
    detail::require(r.size() == g.size(), "residual has ", r.size(), " elements, gradient has ",
                    g.size());
    return dispatch(detail::accumulate_source{r.data(), g.data()}, g.size(), out);
  }

  //! @brief Error feedback with DGC's momentum correction fused into compression (Lin et al.
  //! 2018, eqs. 4-6): velocity = momentum x velocity + grad; acc = residual + velocity;
  //! out = C(acc); residual = acc - out; with `factor_masking` (the default) velocity = 0 where
  //! an element was sent (momentum factor masking), without it the velocity is kept (see
  //! gradcomp::momentum_correction). One pass reads grad, residual and velocity and writes
  //! residual and velocity; the results are bit for bit those of the velocity update as its own
  //! pass followed by compress_accumulate(residual, velocity) (plus the masking). With momentum
  //! 0 the message and residual equal compress_accumulate's.
  //! @pre residual, velocity and grad have the same length; 0 <= momentum < 1.
  //! @throws std::invalid_argument naming the lengths or the momentum otherwise.
  template <host_float_tensor Residual, host_float_tensor Velocity, host_float_tensor Grad>
  selection_stats compress_accumulate_momentum(Residual& residual,
                                               Velocity& velocity,
                                               const Grad& grad,
                                               float momentum,
                                               sparse_message& out,
                                               bool factor_masking = true) {
    const auto r = host_span(residual);
    const auto u = host_span(velocity);
    const auto g = host_span(grad);
    static_assert(!std::is_const_v<std::remove_reference_t<decltype(r[0])>> &&
                      !std::is_const_v<std::remove_reference_t<decltype(u[0])>>,
                  "gradcomp: the residual and the velocity must be writable");
    detail::require(r.size() == g.size() && u.size() == g.size(), "residual has ", r.size(),
                    " elements, velocity ", u.size(), ", gradient ", g.size());
    check_momentum(momentum);
    return dispatch(
        detail::momentum_accumulate_source{r.data(), u.data(), g.data(), momentum, factor_masking},
        g.size(), out);
  }

  //! Device-memory tensors are refused at compile time with this message (a host compressor
  //! cannot read them; the CUDA compressors of <gradcomp/cuda/...> can).
  template <tensor Tensor>
  requires(!host_tensor<Tensor>) selection_stats compress(const Tensor&, sparse_message&) {
    static_assert(detail::dependent_false_v<Tensor>,
                  "gradcomp: this is a host compressor and the tensor lives in device memory; "
                  "use the CUDA compressor of the same name from <gradcomp/cuda/...>");
    return {};
  }

  //! @brief Writes this compressor's state for a checkpoint: Derived::state_name, the density
  //! (where Options has one), the options that decide its selections (values type, and each of
  //! guard_factor, interval, sample_fraction, min_samples, max_adjust_rounds, seed that Options
  //! has; not threads), then Derived's own state through its optional `save_extra(state_writer&)
  //! const` hook (reused_threshold's interval position and threshold, sampled_threshold's RNG).
  //! O(1) plus the hook. Needs `static constexpr std::string_view state_name` in Derived (a
  //! compressor without one does not compile where its state is saved or loaded).
  void save_state(state_writer& w) const {
    static_assert(has_state_name, "gradcomp: declare `static constexpr std::string_view "
                                  "state_name` in the compressor to save or load its state");
    w.tag("compressor");
    w.string(Derived::state_name);
    if constexpr (requires(const Options& o) { o.density; }) {
      w.f64(options_.density);
    }
    detail::write_checked_options(w, options_);
    if constexpr (requires(const Derived& d) { d.save_extra(w); }) {
      static_cast<const Derived&>(*this).save_extra(w);
    }
  }

  //! @brief Restores the state save_state() wrote: checks the compressor name and every checked
  //! option against this compressor's, restores the density and Derived's own state (through its
  //! optional `load_extra(state_reader&)` hook). All or nothing: the state is read into a copy,
  //! which replaces this compressor only when everything was read. Costs a copy of the
  //! compressor (its selection workspace included: up to O(n) for the last gradient's length)
  //! plus the hook.
  //! @throws state_error naming the compressor and the option (with both values) on a
  //! difference, or what is truncated or invalid; this compressor is then unchanged.
  void load_state(state_reader& r) {
    static_assert(has_state_name, "gradcomp: declare `static constexpr std::string_view "
                                  "state_name` in the compressor to save or load its state");
    r.expect_tag("compressor");
    const std::string name = r.string("compressor name");
    if (name != Derived::state_name) {
      throw state_error(detail::concat("gradcomp state: the checkpoint holds a '", name,
                                       "' compressor, this one is '", Derived::state_name, "'"));
    }
    Derived copy(static_cast<const Derived&>(*this));
    if constexpr (requires(const Options& o) { o.density; }) {
      const double d = r.f64("density");
      if (!(d > 0.0 && d <= 1.0)) {
        throw state_error(
            detail::concat("gradcomp state: ", name, " density ", d, " is outside (0, 1]"));
      }
      static_cast<compressor_base&>(copy).options_.density = d;
    }
    detail::check_checked_options(r, options_, Derived::state_name);
    if constexpr (requires(Derived & d) { d.load_extra(r); }) {
      copy.load_extra(r);
    }
    static_cast<Derived&>(*this) = std::move(copy);
  }

protected:
  //! The options, for run() and Derived's members (set_density() changes `density`).
  Options options_;

private:
  // whether Derived names its checkpoint state (checked where the state is saved or loaded:
  // Derived is complete there)
  static constexpr bool has_state_name = requires { Derived::state_name; };

  template <class Source>
  selection_stats dispatch(const Source& src, std::size_t n, sparse_message& out) {
    auto& self = static_cast<Derived&>(*this);
    out.clear(n);
    selection_stats stats;
    stats.numel = n;
    stats.k_target = self.target_k(n);
    const nonfinite_policy policy = detail::nonfinite_of(options_);
    if (n > 0 && policy == nonfinite_policy::propagate) {
      self.run(src, n, stats, out);
    } else if (n > 0) {
      bool seen = false;
      if constexpr (Source::accumulates) {
        std::atomic<std::uint32_t> bits{0};
        const detail::checked_source<Source> checked{src, &bits,
                                                     policy == nonfinite_policy::skip_step};
        self.run(checked, n, stats, out);
        seen = bits.load(std::memory_order_relaxed) != 0;
        if (seen && policy == nonfinite_policy::skip_step) {
          stats.nonfinite = checked.drop_nonfinite(n);
        }
      } else {
        seen = detail::nonfinite_bits(src.materialized(), n) != 0;
        self.run(src, n, stats, out);
        if (seen && policy == nonfinite_policy::skip_step) {
          stats.nonfinite = detail::scan_nonfinite({src.materialized(), n}).count;
        }
      }
      if (seen) {
        handle_nonfinite(src.materialized(), n, policy, out);
      }
    }
    out.values_type = self.values_type();
    detail::parallel_chunks(
        out.nnz(), options_.threads, [&](std::size_t, std::size_t b, std::size_t e) {
          round_values_to(out.values_type, std::span<float>(out.values).subspan(b, e - b));
          src.finish(out, b, e);
        });
    stats.k_selected = out.nnz();
    return stats;
  }

  // After run() saw a non-finite value: raise throws (message cleared, nothing to send);
  // skip_step zeroes the message's non-finite values (the accumulation was already cleaned;
  // without error feedback they are the gradient's own).
  static void handle_nonfinite(const float* values,
                               std::size_t n,
                               nonfinite_policy policy,
                               sparse_message& out) {
    if (policy == nonfinite_policy::raise) {
      const detail::nonfinite_scan s = detail::scan_nonfinite({values, n});
      out.clear(n);
      throw nonfinite_error(detail::concat("gradcomp: non-finite value ", s.value, " at index ",
                                           s.first, " of ", n, " (", s.count,
                                           " non-finite values; nonfinite_policy::raise)"),
                            s.first, s.value, s.count);
    }
    for (float& v : out.values) {
      if (detail::nonfinite_bits(&v, 1) != 0) {
        v = 0.0f;
      }
    }
  }
};

} // namespace gradcomp
