// SPDX-License-Identifier: Apache-2.0
// Cost of the non-finite check (gradcomp::nonfinite_policy) on finite gradients, the common
// case: compress_accumulate (error feedback fused into the first pass) of each host compressor
// under propagate (no check), raise (each tile checked after it is accumulated) and skip_step
// (each tile's gradient checked before too), side by side per compressor and size so that the
// ratio compares neighbours. Data: i.i.d. normal x 1e-3 gradients; the residual starts every call
// from the same second draw, restored outside the timed region. Density 0.01.
//
//   build/benchmark/gradcomp_bench_nonfinite --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
// docs/testing.md ("Non-finite gradients") has the results.
#include <gradcomp/gradcomp.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> draw(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> x(n);
  for (float& v : x) {
    v = normal(rng);
  }
  return x;
}

template <class Compressor>
void run_case(benchmark::State& state, Compressor c, std::size_t n) {
  const std::vector<float> g = draw(n, 1);
  const std::vector<float> r0 = draw(n, 2);
  std::vector<float> r = r0;
  gradcomp::sparse_message m;
  c.compress_accumulate(r, g, m); // warm-up: buffers sized, state settled
  for (auto _ : state) {
    state.PauseTiming();
    r = r0;
    state.ResumeTiming();
    benchmark::DoNotOptimize(c.compress_accumulate(r, g, m));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

template <class Make>
void register_method(const std::string& method, Make make) {
  for (const unsigned log2_n : {20u, 24u}) {
    for (const auto policy :
         {gradcomp::nonfinite_policy::propagate, gradcomp::nonfinite_policy::raise,
          gradcomp::nonfinite_policy::skip_step}) {
      const std::size_t n = std::size_t{1} << log2_n;
      const std::string name =
          method + "/" + std::to_string(log2_n) + "/" + std::string(gradcomp::to_string(policy));
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& s) { run_case(s, make(policy), n); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  using namespace gradcomp;
  const double d = 0.01;
  register_method("exact_top_k",
                  [=](nonfinite_policy p) { return exact_top_k({.density = d, .nonfinite = p}); });
  register_method("sampled_threshold", [=](nonfinite_policy p) {
    return sampled_threshold({.density = d, .nonfinite = p});
  });
  register_method("gaussian_threshold", [=](nonfinite_policy p) {
    return gaussian_threshold({.density = d, .nonfinite = p});
  });
  register_method("reused_threshold", [=](nonfinite_policy p) {
    return reused_threshold({.density = d, .interval = 5, .nonfinite = p});
  });
  register_method("dense_fp16", [=](nonfinite_policy p) {
    return dense({.values = value_type::fp16, .nonfinite = p});
  });
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
