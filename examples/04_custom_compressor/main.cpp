// SPDX-License-Identifier: Apache-2.0
// Your own compressor, written outside the library: random-k sparsification (Stich et al. 2018,
// "Sparsified SGD with memory": k = ceil(density x n) elements drawn uniformly without
// replacement). Deriving from gradcomp::compressor_base and writing one run() gives it every
// entry point of a library compressor: gradcomp::error_feedback, DGC's momentum correction, any
// host tensor, set_density, and use in a gradcomp::pipeline (here over loopback_exchange).
// Checks, exit 1 on a failure: error feedback conserves every element bit for bit (sent + new
// residual == old residual + gradient), exactly k values are sent, and the pipeline's averages
// are what each layer sent. Needs only gradcomp::core; see docs/extending.md.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

namespace {

//! `density` and `seed` are random_k's own; compressor_base requires `values` and `threads`.
struct random_k_options {
  double density = 0.01;                                    //!< k / n, in (0, 1].
  std::uint64_t seed = 1;                                   //!< seed of the index draws.
  gradcomp::value_type values = gradcomp::value_type::fp32; //!< type the values are sent as.
  unsigned threads = 1;                                     //!< run() below is sequential.
};

//! Random-k by selection sampling (Knuth's Algorithm S): element i is kept with probability
//! (still needed) / (still left), so exactly k are kept, uniformly, with ascending indices.
//! O(n), one pass; deterministic for a seed and call sequence; never throws but bad_alloc.
class random_k : public gradcomp::compressor_base<random_k, random_k_options> {
public:
  explicit random_k(options o) : compressor_base(o), rng_(o.seed) {}

  //! The hook compressor_base calls: n >= 1, stats.k_target = ceil(density x n) already set.
  template <class Source>
  void run(const Source& src,
           std::size_t n,
           gradcomp::selection_stats& stats,
           gradcomp::sparse_message& out) {
    src.materialize(0, n);                     // every element once: with error feedback this
    const float* const v = src.materialized(); // computes residual + gradient in place
    std::size_t needed = stats.k_target;
    for (std::size_t i = 0; i < n && needed > 0; ++i) {
      const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53; // uniform in [0, 1)
      if (u * static_cast<double>(n - i) < static_cast<double>(needed)) {
        out.indices.push_back(static_cast<std::uint32_t>(i));
        out.values.push_back(v[i]); // the base rounds it and keeps the rest in the residual
        --needed;
      }
    }
  }

private:
  std::mt19937_64 rng_;
};

static_assert(gradcomp::compressor<random_k> && gradcomp::momentum_compressor<random_k> &&
              gradcomp::kept_velocity_compressor<random_k> &&
              gradcomp::density_compressor<random_k>);

std::vector<float> normal_gradient(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) {
    x = normal(rng);
  }
  return g;
}

} // namespace

int main() {
  std::mt19937 rng(7);
  bool ok = true;

  // 1. One layer with error feedback: every element, every call, conserved bit for bit.
  constexpr std::size_t n = 10000;
  gradcomp::error_feedback<random_k> layer(n, random_k({.density = 0.05, .seed = 42}));
  gradcomp::sparse_message message;
  std::vector<float> sent(n);
  for (int iteration = 0; iteration < 5; ++iteration) {
    const std::vector<float> grad = normal_gradient(n, rng);
    const std::vector<float> before(layer.residual().begin(), layer.residual().end());
    const gradcomp::selection_stats stats = layer.compress(grad, message);
    gradcomp::decompress(message, sent);
    for (std::size_t i = 0; i < n; ++i) {
      ok = ok && sent[i] + layer.residual()[i] == before[i] + grad[i];
    }
    ok = ok && stats.k_selected == 500 && message.nnz() == 500;
    std::printf("error feedback, iteration %d: sent %zu of %zu\n", iteration, stats.k_selected, n);
  }

  // 2. The same compressor in a pipeline: three layers in two groups (layer 2, then 1 and 0).
  const std::vector<std::size_t> numel = {4000, 30, 2000};
  gradcomp::loopback_exchange transport; // one worker: the average is what it sent
  gradcomp::pipeline pipe(
      numel,
      gradcomp::pipeline_policy::fixed_grouping{gradcomp::schedule::grouping_from_ends({1, 3}, 3)},
      random_k({.density = 0.1, .seed = 3}), transport);
  for (int iteration = 0; iteration < 4; ++iteration) {
    const double density = iteration < 2 ? 0.1 : 0.2; // set_density comes with compressor_base
    pipe.set_density(density);
    std::vector<std::vector<float>> grads, before;
    for (std::size_t l = 0; l < numel.size(); ++l) {
      grads.push_back(normal_gradient(numel[l], rng));
      before.emplace_back(pipe.residual(l).begin(), pipe.residual(l).end());
    }
    for (std::size_t l = numel.size(); l-- > 0;) { // backward order
      pipe.gradient_ready(l, grads[l]);
    }
    pipe.finish();
    for (std::size_t l = 0; l < numel.size(); ++l) {
      const std::span<const float> average = pipe.averaged(l);
      const std::span<const float> after = pipe.residual(l);
      std::size_t nonzeros = 0;
      for (std::size_t i = 0; i < numel[l]; ++i) {
        ok = ok && average[i] + after[i] == before[l][i] + grads[l][i];
        nonzeros += average[i] != 0.0f ? 1 : 0;
      }
      const std::size_t k = gradcomp::k_for_density(numel[l], density);
      ok = ok && nonzeros == k && pipe.last_stats().layers[l].k_selected == k;
    }
    std::printf("pipeline, iteration %d: density %.2f, sent %zu of %zu\n", iteration, density,
                pipe.last_stats().selected, pipe.last_stats().numel);
  }

  std::printf(ok ? "ok: conservation and k hold for random_k\n" : "FAILED: a check failed\n");
  return ok ? 0 : 1;
}
