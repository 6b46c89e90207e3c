// SPDX-License-Identifier: Apache-2.0
// Throughput of every gradcomp host compressor, plain (compress) and with fused error feedback
// (compress_accumulate), the reused threshold also with DGC's momentum correction keeping the
// velocity (its update fused into the first pass, and as its own pass), side by side in one run
// with the baselines on the same buffers:
// std::nth_element on a copy of |x|, LibTorch's torch::topk(x.abs(), k) (only when built with
// GRADCOMP_BENCH_WITH_TORCH), and two memory floors run on gradcomp's own thread pool: a
// vectorised sum reduction (one read of x) and r[i] += g[i] (read g and r, write r).
//
// Cases are named <method>/<distribution>/<log2 n>[/<density>] and registered n-major, so that
// the cases a ratio compares run next to each other. Data: i.i.d. normal or Student-t (nu = 3)
// gradients times 1e-3, seeded per 64 Ki chunk (identical for any thread count); the
// error-feedback residual starts each call from a second, independent draw, restored outside the
// timed region. Compressors and messages persist across Google Benchmark's repeated runs of a case
// and are warmed up by one untimed call, so timed calls are steady state (no allocation).
// Items/s count gradient elements; bytes/s count the minimum traffic: 4n for compress and for the
// read floor, 12n for error feedback and its floor, 20n with momentum correction.
// benchmark/run_compressor_table.py runs this and writes docs/benchmarks.md.
#include <gradcomp/detail/parallel.hpp>
#include <gradcomp/gradcomp.hpp>

#include <benchmark/benchmark.h>
#ifdef GRADCOMP_BENCH_WITH_TORCH
#include <torch/torch.h>
#include <torch/version.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using gradcomp::detail::chunk_count;
using gradcomp::detail::parallel_chunks;

constexpr std::array<unsigned, 6> log2_sizes = {16, 18, 20, 22, 24, 26};
constexpr std::array<double, 3> densities = {0.1, 0.01, 0.001};
constexpr float gradient_scale = 1e-3f;
constexpr std::uint32_t gradient_seed = 20240601u;
constexpr std::uint32_t residual_seed = 20240602u;

enum class distribution : std::size_t { normal = 0, student_t3 = 1 };
constexpr std::array<distribution, 2> distributions = {distribution::normal,
                                                       distribution::student_t3};

const char* name_of(distribution d) {
  return d == distribution::normal ? "normal" : "student_t3";
}

// ---- data ----------------------------------------------------------------------------------

// Fills x with i.i.d. draws of `d` times gradient_scale. Chunk c of the thread pool draws from
// its own engine seeded with (seed, distribution, c), so the data never depend on thread count.
// Student-t with nu = 3 is z / sqrt(chi2_3 / 3), chi2_3 a sum of three squared normals.
void fill_gradient(std::vector<float>& x, distribution d, std::uint32_t seed) {
  parallel_chunks(x.size(), 0, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::seed_seq seq{seed, static_cast<std::uint32_t>(d), static_cast<std::uint32_t>(c)};
    std::mt19937_64 rng(seq);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = b; i < e; ++i) {
      float v = normal(rng);
      if (d == distribution::student_t3) {
        float chi2 = 0.0f;
        for (int j = 0; j < 3; ++j) {
          const float z = normal(rng);
          chi2 += z * z;
        }
        v /= std::sqrt(chi2 / 3.0f);
      }
      x[i] = gradient_scale * v;
    }
  });
}

// The buffers of the current size; regenerated (and the old ones freed) when n changes.
struct data_store {
  std::size_t n = 0;
  std::array<std::vector<float>, 2> gradients;
  std::array<std::vector<float>, 2> initial_residuals;
  std::vector<float> residual; // error-feedback state, restored before every timed call
  std::vector<float> velocity; // momentum-correction state, restored likewise
  std::vector<float> scratch;  // the |x| copy std::nth_element works on

  static data_store& of_size(std::size_t n) {
    static data_store s;
    if (s.n != n) {
      s = data_store{};
      s.n = n;
    }
    return s;
  }
};

const std::vector<float>& gradient(std::size_t n, distribution d) {
  auto& g = data_store::of_size(n).gradients[static_cast<std::size_t>(d)];
  if (g.size() != n) {
    g.resize(n);
    fill_gradient(g, d, gradient_seed);
  }
  return g;
}

const std::vector<float>& initial_residual(std::size_t n, distribution d) {
  auto& r = data_store::of_size(n).initial_residuals[static_cast<std::size_t>(d)];
  if (r.size() != n) {
    r.resize(n);
    fill_gradient(r, d, residual_seed);
  }
  return r;
}

std::vector<float>& working_buffer(std::vector<float> data_store::*member, std::size_t n) {
  auto& v = data_store::of_size(n).*member;
  if (v.size() != n) {
    v.assign(n, 0.0f); // touch every page before timing
  }
  return v;
}

// ---- per-case state ------------------------------------------------------------------------

// The state (compressor, message) of the case now running. Google Benchmark calls a case's
// function several times while it sizes the iteration count; keeping the state here makes every
// timed call a warm, steady-state call without holding all cases' buffers at once.
template <class T, class Make>
T& case_state(std::size_t case_id, Make&& make) {
  static std::size_t owner = std::numeric_limits<std::size_t>::max();
  static std::shared_ptr<void> state;
  if (owner != case_id) {
    state.reset(); // free the previous case's buffers before allocating this one's
    state = std::make_shared<T>(make());
    owner = case_id;
  }
  return *static_cast<T*>(state.get());
}

template <class Compressor>
struct compressor_case {
  Compressor compressor;
  gradcomp::sparse_message out;
  bool warm = false;
};

// Wall time of every timed call. Google Benchmark reports their mean; the minimum and the median
// are added as counters (min_ms, median_ms), since the machine may be shared and noisy.
class call_timer {
public:
  void start() { start_ = clock::now(); }
  void stop() {
    times_ms_.push_back(std::chrono::duration<double, std::milli>(clock::now() - start_).count());
  }

  // Sets the counters and the throughput (items: n per call; bytes: bytes_per_element x n).
  void report(benchmark::State& state, std::size_t n, std::size_t bytes_per_element) {
    const auto iterations = static_cast<std::int64_t>(state.iterations());
    state.SetItemsProcessed(iterations * static_cast<std::int64_t>(n));
    state.SetBytesProcessed(iterations * static_cast<std::int64_t>(n * bytes_per_element));
    if (times_ms_.empty()) {
      return;
    }
    const auto middle = times_ms_.begin() + static_cast<std::ptrdiff_t>(times_ms_.size() / 2);
    std::nth_element(times_ms_.begin(), middle, times_ms_.end());
    state.counters["median_ms"] = *middle;
    state.counters["min_ms"] = *std::min_element(times_ms_.begin(), times_ms_.end());
  }

private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_;
  std::vector<double> times_ms_;
};

void restore_residual(benchmark::State& state,
                      const std::vector<float>& from,
                      std::vector<float>& to) {
  state.PauseTiming();
  std::copy(from.begin(), from.end(), to.begin());
  state.ResumeTiming();
}

// What a case calls: compress(x, out); compress_accumulate(residual, x, out); DGC's momentum
// correction with the velocity kept (no factor masking), the velocity update fused into the
// compressor's first pass (compress_accumulate_momentum(..., false)), or as its own pass before
// compress_accumulate of the velocity (what error feedback does for a compressor without the
// flag: the same bits).
enum class call_kind { compress, error_feedback, momentum_kept, momentum_kept_separate };

// Bytes of minimum traffic per element: read x; read g and r, write r; read g, u and r, write
// u and r.
constexpr std::size_t traffic_bytes(call_kind k) {
  return k == call_kind::compress ? 4 : k == call_kind::error_feedback ? 12 : 20;
}

// One case's calls, the residual (and velocity) reset to the same initial draw before every
// call. Reports the mean achieved k / k and the fractions of calls that ran an exact selection
// and that fell back to exact top-k.
template <call_kind kind, class Compressor, class Make>
void run_compressor(
    benchmark::State& state, std::size_t case_id, std::size_t n, distribution d, Make make) {
  constexpr bool error_feedback = kind != call_kind::compress;
  constexpr bool momentum =
      kind == call_kind::momentum_kept || kind == call_kind::momentum_kept_separate;
  const auto& g = gradient(n, d);
  const std::vector<float>* r0 = nullptr;
  std::vector<float>* r = nullptr;
  std::vector<float>* u = nullptr;
  if constexpr (error_feedback) {
    r0 = &initial_residual(n, d);
    r = &working_buffer(&data_store::residual, n);
  }
  if constexpr (momentum) {
    u = &working_buffer(&data_store::velocity, n);
  }
  auto& c = case_state<compressor_case<Compressor>>(case_id, [&] {
    return compressor_case<Compressor>{make(), {}, false};
  });
  auto call = [&] {
    if constexpr (kind == call_kind::momentum_kept) {
      return c.compressor.compress_accumulate_momentum(*r, *u, g, 0.9f, c.out, false);
    } else if constexpr (kind == call_kind::momentum_kept_separate) {
      gradcomp::detail::update_velocity(u->data(), g.data(), 0.9f, 0, n);
      return c.compressor.compress_accumulate(*r, std::as_const(*u), c.out);
    } else if constexpr (error_feedback) {
      return c.compressor.compress_accumulate(*r, g, c.out);
    } else {
      return c.compressor.compress(g, c.out);
    }
  };
  auto restore = [&] { // the velocity starts from the residual's draw (finite, independent of g)
    std::copy(r0->begin(), r0->end(), r->begin());
    if constexpr (momentum) {
      std::copy(r0->begin(), r0->end(), u->begin());
    }
  };
  if (!c.warm) { // allocates the workspace; for reused_threshold this is the exact call
    if constexpr (error_feedback) {
      restore();
    }
    (void)call();
    c.warm = true;
  }
  double selected = 0, exact = 0, fallback = 0, target = 0;
  call_timer timer;
  for (auto _ : state) {
    if constexpr (error_feedback) {
      state.PauseTiming();
      restore();
      state.ResumeTiming();
    }
    timer.start();
    const gradcomp::selection_stats s = call();
    timer.stop();
    benchmark::DoNotOptimize(c.out.values.data());
    benchmark::ClobberMemory();
    selected += static_cast<double>(s.k_selected);
    target = static_cast<double>(s.k_target);
    exact += s.exact ? 1 : 0;
    fallback += s.fallback ? 1 : 0;
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["k_ratio"] = calls > 0 && target > 0 ? selected / calls / target : 0.0;
  state.counters["exact"] = calls > 0 ? exact / calls : 0.0;
  state.counters["fallback"] = calls > 0 ? fallback / calls : 0.0;
  timer.report(state, n, traffic_bytes(kind));
}

// ---- baselines -----------------------------------------------------------------------------

// The read floor: a sum over x with 16 independent accumulators (vectorised, no dependency
// chain), one read, on all of gradcomp's threads with gradcomp's chunking, so that it pays the
// same thread-pool overhead as the compressors.
void run_read_floor(benchmark::State& state, std::size_t n, distribution d) {
  const auto& g = gradient(n, d);
  const float* x = g.data();
  std::vector<float> partial(chunk_count(n));
  call_timer timer;
  for (auto _ : state) {
    timer.start();
    parallel_chunks(n, 0, [&](std::size_t c, std::size_t b, std::size_t e) {
      constexpr std::size_t lanes = 16;
      std::array<float, lanes> sum{};
      std::size_t i = b;
      for (; i + lanes <= e; i += lanes) {
        for (std::size_t j = 0; j < lanes; ++j) {
          sum[j] += x[i + j];
        }
      }
      for (; i < e; ++i) {
        sum[0] += x[i];
      }
      float total = 0.0f;
      for (float s : sum) {
        total += s;
      }
      partial[c] = total;
    });
    timer.stop();
    benchmark::DoNotOptimize(partial.data());
    benchmark::ClobberMemory();
  }
  timer.report(state, n, 4);
}

// The error-feedback floor: r[i] += g[i] (read g and r, write r), with the residual restored
// before every call exactly as in the compress_accumulate cases.
void run_error_feedback_floor(benchmark::State& state, std::size_t n, distribution d) {
  const auto& g = gradient(n, d);
  const auto& r0 = initial_residual(n, d);
  auto& r = working_buffer(&data_store::residual, n);
  const float* gp = g.data();
  float* rp = r.data();
  call_timer timer;
  for (auto _ : state) {
    restore_residual(state, r0, r);
    timer.start();
    parallel_chunks(n, 0, [&](std::size_t, std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        rp[i] += gp[i];
      }
    });
    timer.stop();
    benchmark::ClobberMemory();
  }
  timer.report(state, n, 12);
}

// The classic way: copy |x|, std::nth_element for the k-th largest (the threshold only; a
// selection would need one more pass). Single-threaded.
void run_nth_element(benchmark::State& state, std::size_t n, distribution d, double density) {
  const auto& g = gradient(n, d);
  auto& a = working_buffer(&data_store::scratch, n);
  const std::size_t k = gradcomp::k_for_density(n, density);
  const auto kth = static_cast<std::ptrdiff_t>(k - 1);
  call_timer timer;
  for (auto _ : state) {
    timer.start();
    std::transform(g.begin(), g.end(), a.begin(), [](float v) { return std::abs(v); });
    std::nth_element(a.begin(), a.begin() + kth, a.end(), std::greater<>());
    timer.stop();
    benchmark::DoNotOptimize(a[k - 1]);
  }
  timer.report(state, n, 4);
}

#ifdef GRADCOMP_BENCH_WITH_TORCH
// LibTorch on CPU, as a user would write it: torch::topk(x.abs(), k) on a 1-D tensor that wraps
// the same buffer (no copy). Values come back sorted, with int64 indices.
void run_torch_topk(benchmark::State& state, std::size_t n, distribution d, double density) {
  const auto& g = gradient(n, d);
  const auto k = static_cast<std::int64_t>(gradcomp::k_for_density(n, density));
  const torch::Tensor x =
      torch::from_blob(const_cast<float*>(g.data()), {static_cast<std::int64_t>(n)}, torch::kFloat);
  torch::NoGradGuard no_grad;
  call_timer timer;
  for (auto _ : state) {
    timer.start();
    auto [values, indices] = torch::topk(x.abs(), k);
    timer.stop();
    benchmark::DoNotOptimize(values.data_ptr<float>());
    benchmark::DoNotOptimize(indices.data_ptr<std::int64_t>());
  }
  timer.report(state, n, 4);
}
#endif

// ---- registration --------------------------------------------------------------------------

// One point of the sweep; density 0 for the density-independent cases (floors, dense).
struct sweep_point {
  unsigned log2n = 0;
  distribution dist = distribution::normal;
  double density = 0;
  [[nodiscard]] std::size_t n() const { return std::size_t{1} << log2n; }
};

// <method>/<distribution>/<log2 n>[/<density>], e.g. exact_top_k/normal/24/0.01.
std::string case_name(const std::string& method, const sweep_point& p) {
  std::string name = method + "/" + name_of(p.dist) + "/" + std::to_string(p.log2n);
  if (p.density > 0) {
    name += p.density == 0.1 ? "/0.1" : p.density == 0.01 ? "/0.01" : "/0.001";
  }
  return name;
}

template <class Fn>
void register_case(const std::string& method, const sweep_point& p, Fn fn) {
  benchmark::RegisterBenchmark(case_name(method, p).c_str(), std::move(fn))
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

std::size_t next_case_id = 0;

// Registers compress (<method>) and compress_accumulate (<method>_ef) of one compressor, and
// with `momentum` the kept-velocity momentum correction fused (<method>_momentum) and with the
// velocity update as its own pass (<method>_momentum_separate).
template <class Compressor, class Make>
void register_compressor(const std::string& method,
                         const sweep_point& p,
                         Make make,
                         bool momentum = false) {
  const std::size_t plain_id = next_case_id++;
  const std::size_t ef_id = next_case_id++;
  register_case(method, p, [=](benchmark::State& state) {
    run_compressor<call_kind::compress, Compressor>(state, plain_id, p.n(), p.dist, make);
  });
  register_case(method + "_ef", p, [=](benchmark::State& state) {
    run_compressor<call_kind::error_feedback, Compressor>(state, ef_id, p.n(), p.dist, make);
  });
  if (momentum) {
    const std::size_t fused_id = next_case_id++;
    const std::size_t separate_id = next_case_id++;
    register_case(method + "_momentum", p, [=](benchmark::State& state) {
      run_compressor<call_kind::momentum_kept, Compressor>(state, fused_id, p.n(), p.dist, make);
    });
    register_case(method + "_momentum_separate", p, [=](benchmark::State& state) {
      run_compressor<call_kind::momentum_kept_separate, Compressor>(state, separate_id, p.n(),
                                                                    p.dist, make);
    });
  }
}

void register_all() {
  for (unsigned log2n : log2_sizes) {
    for (distribution dist : distributions) {
      const sweep_point q{log2n, dist, 0};
      register_case("read_floor", q,
                    [=](benchmark::State& state) { run_read_floor(state, q.n(), dist); });
      register_case("ef_floor", q,
                    [=](benchmark::State& state) { run_error_feedback_floor(state, q.n(), dist); });
      register_compressor<gradcomp::dense>(
          "dense_fp16", q, [] { return gradcomp::dense(gradcomp::value_type::fp16); });
      // the quantizers send every element (no density): 1, 2 and 5 bits per value
      register_compressor<gradcomp::scaled_sign>("scaled_sign", q,
                                                 [] { return gradcomp::scaled_sign(); });
      register_compressor<gradcomp::terngrad>("terngrad", q, [] { return gradcomp::terngrad(); });
      register_compressor<gradcomp::qsgd>("qsgd_15", q, [] { return gradcomp::qsgd(15); });
      for (double density : densities) {
        const sweep_point p{log2n, dist, density};
        register_compressor<gradcomp::exact_top_k>("exact_top_k", p,
                                                   [=] { return gradcomp::exact_top_k(density); });
        register_compressor<gradcomp::sampled_threshold>(
            "sampled_threshold", p, [=] { return gradcomp::sampled_threshold(density); });
        register_compressor<gradcomp::gaussian_threshold>(
            "gaussian_threshold", p, [=] { return gradcomp::gaussian_threshold(density); });
        register_compressor<gradcomp::lognormal_threshold>(
            "lognormal_threshold", p, [=] { return gradcomp::lognormal_threshold(density); });
        // Reuse calls: the untimed warm-up call is the exact one and every later call reuses
        // its threshold. Exact calls: interval 1 makes every call an exact top-k.
        register_compressor<gradcomp::reused_threshold>(
            "reused_threshold_reuse", p,
            [=] {
              return gradcomp::reused_threshold(
                  {.density = density, .interval = std::numeric_limits<std::uint64_t>::max()});
            },
            true);
        register_compressor<gradcomp::reused_threshold>("reused_threshold_exact", p, [=] {
          return gradcomp::reused_threshold({.density = density, .interval = 1});
        });
        register_case("nth_element", p, [=](benchmark::State& state) {
          run_nth_element(state, p.n(), dist, density);
        });
#ifdef GRADCOMP_BENCH_WITH_TORCH
        register_case("torch_topk", p, [=](benchmark::State& state) {
          run_torch_topk(state, p.n(), dist, density);
        });
#endif
      }
    }
  }
}

void add_context() {
  benchmark::AddCustomContext("gradcomp_version", gradcomp::version_string);
  benchmark::AddCustomContext("gradcomp_threads",
                              std::to_string(gradcomp::detail::default_pool().size()));
  benchmark::AddCustomContext("hardware_concurrency",
                              std::to_string(std::thread::hardware_concurrency()));
  benchmark::AddCustomContext("compiler", __VERSION__);
#ifdef GRADCOMP_BENCH_BUILD
  benchmark::AddCustomContext("gradcomp_bench_build", GRADCOMP_BENCH_BUILD);
#endif
  benchmark::AddCustomContext(
      "data", "i.i.d. normal and Student-t(3) x 1e-3, seeded; EF residual: an independent draw");
#ifdef GRADCOMP_BENCH_WITH_TORCH
  // LibTorch's own default, as a user gets it. A 1-D topk on CPU runs on one thread whatever
  // the setting (it parallelises across slices only); only x.abs() could use more.
  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(torch::get_num_threads()));
#else
  benchmark::AddCustomContext("torch_threads", "n/a (built without LibTorch)");
#endif
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  register_all();
  add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
