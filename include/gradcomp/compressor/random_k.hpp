// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::random_k: k elements chosen uniformly at random (Stich, Cordonnier, Jaggi,
//! "Sparsified SGD with Memory", NeurIPS 2018), with error feedback.
#pragma once

#include <gradcomp/checkpoint/state_stream.hpp>
#include <gradcomp/compressor/compressor.hpp>
#include <gradcomp/compressor/compressor_base.hpp>
#include <gradcomp/compressor/detail/rng_state.hpp>
#include <gradcomp/compressor/nonfinite_policy.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace gradcomp {

//! Options of gradcomp::random_k.
struct random_k_options {
  double density = 0.01;                //!< k / n, in (0, 1].
  std::uint64_t seed = 0;               //!< seeds the choice (the same seed: the same indices).
  value_type values = value_type::fp32; //!< type the sent values are rounded to.
  unsigned threads = 0;                 //!< threads for the base's O(k) pass; 0 = all.
  nonfinite_policy nonfinite = nonfinite_policy::propagate; //!< NaN / infinity handling.
};

//! @brief Random-k sparsification (Stich et al. 2018, "Sparsified SGD with Memory"; GRACE's
//! RandomK): each call sends k = k_for_density(n, density) distinct elements chosen uniformly
//! at random, whatever their magnitudes; with error feedback the unsent ones stay in the
//! residual, which is what makes it converge (Stich et al., Theorem 2.4).
//!
//! The choice is Floyd's algorithm over a seeded std::mt19937_64 that advances with every call
//! (k draws), so ranks with the same seed choose the same indices in every call (the shared-seed
//! form, where only the values would need to travel), and ranks with different seeds choose
//! independently. Indices ascending. Cost: O(n) to accumulate (error feedback) plus O(k log k)
//! to choose and O(n / 8) bytes of scratch (a bitmap); wire bytes (u32/fp32) 32 + 8k at most.
//! Deterministic for a given seed and call sequence, whatever the thread count. Checkpoints keep
//! the RNG (a resumed run chooses what an uninterrupted one would).
class random_k : public compressor_base<random_k, random_k_options> {
public:
  //! The name its checkpoint state carries (with the options, the density and the RNG).
  static constexpr std::string_view state_name = "random_k";
  //! @throws std::invalid_argument if the density is outside (0, 1].
  explicit random_k(options o = {}) : compressor_base(o), rng_(o.seed) {}
  //! Shorthand for `random_k(options{.density = density, .seed = seed})`.
  //! @throws std::invalid_argument if `density` is outside (0, 1].
  explicit random_k(double density, std::uint64_t seed = 0)
      : random_k(options{.density = density, .seed = seed}) {}

  //! @brief compressor_base's selection hook: materializes every element (the error-feedback
  //! sum), then chooses stats.k_target distinct indices uniformly (Floyd) and sends their values.
  //! Sets stats.threshold to 0. O(n + k log k); throws only std::bad_alloc.
  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    src.materialize(0, n);
    const std::size_t k = stats.k_target;
    chosen_.assign(n, false);
    out.indices.clear();
    out.indices.reserve(k);
    for (std::size_t j = n - k; j < n; ++j) { // Floyd: k distinct values of [0, n)
      const std::size_t t = std::uniform_int_distribution<std::size_t>(0, j)(rng_);
      const std::size_t pick = chosen_[t] ? j : t;
      chosen_[pick] = true;
      out.indices.push_back(static_cast<std::uint32_t>(pick));
    }
    std::sort(out.indices.begin(), out.indices.end());
    const float* x = src.materialized();
    out.values.resize(k);
    for (std::size_t j = 0; j < k; ++j) {
      out.values[j] = x[out.indices[j]];
    }
    stats.threshold = 0.0f;
  }

  //! compressor_base's checkpoint hook: the RNG's state. O(1).
  void save_extra(state_writer& w) const { detail::save_rng(w, "random_k rng", rng_); }
  //! compressor_base's checkpoint hook: restores the RNG's state.
  //! @throws state_error if the stored state is not a std::mt19937_64 state.
  void load_extra(state_reader& r) { rng_ = detail::load_rng(r, "random_k rng"); }

private:
  std::mt19937_64 rng_;
  std::vector<bool> chosen_; // scratch bitmap, n bits
};

static_assert(momentum_compressor<random_k>);
static_assert(density_compressor<random_k>);

} // namespace gradcomp
