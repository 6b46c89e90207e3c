// SPDX-License-Identifier: Apache-2.0
// Planning time of every merge strategy on the shipped profiles (planning ResNet-50's 161
// tensors must take under 10 ms). Cases are named <profile>/<strategy>/<regime>, regimes:
//   dense:  fp32 messages, no compression step (optimal = E1, one state per prefix);
//   off:    density 0.01, compression 50 us + 1 ns/element off the compute stream (Pareto DP);
//   on:     the same compression on the compute stream (S1; Pareto DP, E2 of docs/planner.md).
// Network: 10 Gbit/s, alpha 50 us (beta 8e-10 s/B). Each iteration plans from scratch (the
// strategy's function, validation included); "all" runs the seven strategies as gradcomp-plan
// does. Counters: layers, predicted t_iter of the plan (ms), and for optimal the largest Pareto
// front (states kept for one prefix).
#include <gradcomp/schedule.hpp>

#include <benchmark/benchmark.h>

#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef GRADCOMP_PROFILE_DIR
#error "GRADCOMP_PROFILE_DIR must name the directory of the shipped profiles"
#endif

namespace {

namespace gs = gradcomp::schedule;

gs::layer_profile load(const std::string& name, double forward_seconds) {
  const std::string path = std::string(GRADCOMP_PROFILE_DIR) + "/" + name + ".csv";
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot open " + path);
  }
  return {gs::read_profile_csv(in, path), forward_seconds};
}

struct regime {
  const char* name;
  gs::cost_model model;
};

std::vector<regime> regimes() {
  const double alpha = 50e-6;
  const double beta = 8.0 / 10e9;
  const gs::affine_cost compression{50e-6, 1e-9};
  return {
      {"dense", gs::cost_model::affine(alpha, beta)},
      {"off", gs::cost_model::affine(alpha, beta, compression, 0.01,
                                     gs::compression_placement::off_compute_stream)},
      {"on", gs::cost_model::affine(alpha, beta, compression, 0.01,
                                    gs::compression_placement::on_compute_stream)},
  };
}

void run_plan(benchmark::State& state,
              const gs::layer_profile& profile,
              const gs::cost_model& model,
              std::optional<gs::strategy> which) {
  gs::grouping g;
  for (auto _ : state) {
    if (which) {
      g = gs::plan(*which, profile, model);
    } else {
      for (const gs::strategy s : gs::all_strategies) {
        g = gs::plan(s, profile, model);
        benchmark::DoNotOptimize(g.data());
      }
    }
    benchmark::DoNotOptimize(g.data());
    benchmark::ClobberMemory();
  }
  state.counters["layers"] = static_cast<double>(profile.size());
  if (which) {
    state.counters["t_iter_ms"] = gs::t_iter_seconds(profile, model, g) * 1e3;
    if (*which == gs::strategy::optimal) {
      const gs::detail::backward_view view(profile, model);
      state.counters["front"] =
          static_cast<double>(gs::detail::exact_search(view, true).max_front_size);
    }
  }
}

void register_all() {
  struct named_profile {
    const char* name;
    gs::layer_profile profile;
  };
  static const std::vector<named_profile> profiles{{"resnet50", load("resnet50", 0.2015)},
                                                   {"vgg16", load("vgg16", 0.2519)}};
  static const std::vector<regime> all_regimes = regimes();
  for (const named_profile& p : profiles) {
    for (const regime& r : all_regimes) {
      for (const gs::strategy s : gs::all_strategies) {
        const std::string case_name =
            std::string(p.name) + "/" + std::string(gs::name(s)) + "/" + r.name;
        benchmark::RegisterBenchmark(case_name.c_str(), [&p, &r, s](benchmark::State& state) {
          run_plan(state, p.profile, r.model, s);
        })->Unit(benchmark::kMicrosecond);
      }
      const std::string all_name = std::string(p.name) + "/all/" + r.name;
      benchmark::RegisterBenchmark(all_name.c_str(), [&p, &r](benchmark::State& state) {
        run_plan(state, p.profile, r.model, std::nullopt);
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  register_all();
  benchmark::AddCustomContext("compiler", __VERSION__);
#ifdef GRADCOMP_BENCH_BUILD
  benchmark::AddCustomContext("gradcomp_bench_build", GRADCOMP_BENCH_BUILD);
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
