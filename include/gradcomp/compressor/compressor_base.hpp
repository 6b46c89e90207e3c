// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief CRTP base that gives every host compressor its public entry points (plain and with
//! fused error feedback, for any host float tensor) on top of one `run(source, n, out)`.
#pragma once

#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/detail/compressor_base.hpp>
#include <gradcomp/compressor/detail/source.hpp>
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>
#include <gradcomp/tensor/tensor.hpp>

#include <cstddef>
#include <span>
#include <type_traits>

namespace gradcomp::detail {

//! Derived must provide `template <class Source> void run(const Source&, std::size_t n,
//! selection_stats& stats, sparse_message& out)` (see source.hpp for the Source contract); it is
//! called with n >= 1 and stats.numel / stats.k_target already set. `Options` must have a
//! `values` member (gradcomp::value_type) and a `threads` member (0 = all hardware threads); a
//! `density` and a `guard_factor` member, if present,
//! are validated here, and k_target = k_for_density(n, density) unless Derived declares its own
//! `target_k(n)`.
template <class Derived, class Options>
class compressor_base {
public:
  using compressor_concept = compressor_tag;
  using options = Options;

  //! @throws std::invalid_argument if the density is outside (0, 1] or guard_factor outside [1,
  //! 1e6].
  explicit compressor_base(const Options& o) : options_(o) { check_common_options(o); }

  //! The options this compressor was built with.
  [[nodiscard]] const Options& get_options() const noexcept { return options_; }
  //! The type the sent values are rounded to (and encoded as).
  [[nodiscard]] value_type values_type() const noexcept { return options_.values; }

  //! k for an n-element gradient: ceil(density x n) clamped to [1, n] (0 when n == 0).
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

  //! @brief Compresses gradient `x` (n floats, host memory, read only) into `out`.
  //! @returns the call's selection_stats. @throws std::invalid_argument on bad input sizes.
  template <host_float_tensor Tensor>
  selection_stats compress(const Tensor& x, sparse_message& out) {
    const auto s = host_span(x);
    return dispatch(read_source{s.data()}, s.size(), out);
  }

  //! @brief Error feedback fused into compression: acc = residual + grad; out = C(acc);
  //! residual = acc - out (exactly: for every element, sent + new residual == acc bit for bit).
  //! @pre residual and grad have the same length (else std::invalid_argument).
  template <host_float_tensor Residual, host_float_tensor Grad>
  selection_stats compress_accumulate(Residual& residual, const Grad& grad, sparse_message& out) {
    const auto r = host_span(residual);
    const auto g = host_span(grad);
    static_assert(!std::is_const_v<std::remove_reference_t<decltype(r[0])>>,
                  "gradcomp: the residual must be writable");
    require(r.size() == g.size(), "residual has ", r.size(), " elements, gradient has ", g.size());
    return dispatch(accumulate_source{r.data(), g.data()}, g.size(), out);
  }

  //! @brief Error feedback with DGC's momentum correction fused into compression (Lin et al.
  //! 2018, eqs. 4-6): velocity = momentum x velocity + grad; acc = residual + velocity;
  //! out = C(acc); residual = acc - out; velocity = 0 where an element was sent (momentum
  //! factor masking). One pass reads grad, residual and velocity and writes residual and
  //! velocity. With momentum 0 the message and residual equal compress_accumulate's.
  //! @pre residual, velocity and grad have the same length; 0 <= momentum < 1.
  //! @throws std::invalid_argument naming the lengths or the momentum otherwise.
  template <host_float_tensor Residual, host_float_tensor Velocity, host_float_tensor Grad>
  selection_stats compress_accumulate_momentum(Residual& residual,
                                               Velocity& velocity,
                                               const Grad& grad,
                                               float momentum,
                                               sparse_message& out) {
    const auto r = host_span(residual);
    const auto u = host_span(velocity);
    const auto g = host_span(grad);
    static_assert(!std::is_const_v<std::remove_reference_t<decltype(r[0])>> &&
                      !std::is_const_v<std::remove_reference_t<decltype(u[0])>>,
                  "gradcomp: the residual and the velocity must be writable");
    require(r.size() == g.size() && u.size() == g.size(), "residual has ", r.size(),
            " elements, velocity ", u.size(), ", gradient ", g.size());
    check_momentum(momentum);
    return dispatch(momentum_accumulate_source{r.data(), u.data(), g.data(), momentum}, g.size(),
                    out);
  }

  //! Device-memory tensors are refused at compile time with this message.
  template <tensor Tensor>
  requires(!host_tensor<Tensor>) selection_stats compress(const Tensor&, sparse_message&) {
    static_assert(dependent_false_v<Tensor>,
                  "gradcomp: this is a host compressor and the tensor lives in device memory; "
                  "use the CUDA compressor of the same name from <gradcomp/cuda/...>");
    return {};
  }

protected:
  Options options_;

private:
  template <class Source>
  selection_stats dispatch(const Source& src, std::size_t n, sparse_message& out) {
    auto& self = static_cast<Derived&>(*this);
    out.clear(n);
    selection_stats stats;
    stats.numel = n;
    stats.k_target = self.target_k(n);
    if (n > 0) {
      self.run(src, n, stats, out);
    }
    out.values_type = self.values_type();
    parallel_chunks(out.nnz(), options_.threads, [&](std::size_t, std::size_t b, std::size_t e) {
      round_values_to(out.values_type, std::span<float>(out.values).subspan(b, e - b));
      src.finish(out, b, e);
    });
    stats.k_selected = out.nnz();
    return stats;
  }
};

} // namespace gradcomp::detail
