// SPDX-License-Identifier: Apache-2.0
// The sparse wire format's cost per sent value: gradcomp::encode and gradcomp::decode (which
// validates every field) of a top-k message of the Fashion-MNIST CNN's size (1,663,370
// elements) at densities 0.05 and 0.01, for every value type the sparse transports send (fp32,
// fp16, bf16) and both index encodings (u32, delta + varint); and the fp16 value section's array
// conversions alone, the portable loop beside the dispatched one (F16C where the CPU has it),
// so that their ratio compares runs of one invocation. Items = sent values (pairs).
//
//   build/benchmark/gradcomp_bench_wire --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
// docs/benchmarks.md ("Other measurements") has the results.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/sparse/detail/float16_array.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t cnn_parameters = 1663370;

// k = density x n distinct ascending indices drawn uniformly, values normal x 1e-3 rounded to
// `type` (as a compressor sending that type leaves them).
gradcomp::sparse_message draw_message(double density, gradcomp::value_type type) {
  const auto k = static_cast<std::size_t>(density * static_cast<double>(cnn_parameters));
  std::mt19937_64 rng(7);
  std::vector<std::uint32_t> all(cnn_parameters);
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i] = static_cast<std::uint32_t>(i);
  }
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(k);
  std::sort(all.begin(), all.end());
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  gradcomp::sparse_message m;
  m.clear(cnn_parameters);
  m.values_type = type;
  m.indices = std::move(all);
  m.values.resize(k);
  for (float& v : m.values) {
    v = gradcomp::round_to(type, normal(rng));
  }
  return m;
}

const char* index_name(gradcomp::index_encoding e) {
  return e == gradcomp::index_encoding::u32 ? "u32" : "varint";
}

void register_codec(double density, gradcomp::value_type type, gradcomp::index_encoding enc) {
  const std::string suffix = std::string(gradcomp::to_string(type)) + "/" + index_name(enc) +
                             "/density:" + std::to_string(density).substr(0, 4);
  benchmark::RegisterBenchmark(("encode/" + suffix).c_str(), [=](benchmark::State& state) {
    const gradcomp::sparse_message m = draw_message(density, type);
    std::vector<std::byte> bytes;
    for (auto _ : state) {
      gradcomp::encode(m, enc, bytes);
      benchmark::DoNotOptimize(bytes.data());
      benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * m.nnz()));
    state.counters["bytes_per_value"] =
        static_cast<double>(bytes.size()) / static_cast<double>(m.nnz());
  });
  benchmark::RegisterBenchmark(("decode/" + suffix).c_str(), [=](benchmark::State& state) {
    const gradcomp::sparse_message m = draw_message(density, type);
    std::vector<std::byte> bytes;
    gradcomp::encode(m, enc, bytes);
    gradcomp::sparse_message out;
    gradcomp::decode(bytes, out); // warm-up: capacity reserved
    for (auto _ : state) {
      gradcomp::decode(bytes, out);
      benchmark::DoNotOptimize(out.values.data());
      benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * m.nnz()));
  });
}

// The fp16 value section of a 5 % message: `convert` on the values (or their bytes).
template <class Convert>
void register_conversion(const std::string& name, Convert convert) {
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const gradcomp::sparse_message m = draw_message(0.05, gradcomp::value_type::fp16);
    std::vector<std::byte> bytes(2 * m.nnz());
    gradcomp::detail::floats_to_halves_portable(m.values.data(), m.nnz(), bytes.data());
    std::vector<float> floats(m.nnz());
    for (auto _ : state) {
      convert(m.values.data(), bytes.data(), m.nnz(), floats.data());
      benchmark::DoNotOptimize(floats.data());
      benchmark::DoNotOptimize(bytes.data());
      benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * m.nnz()));
  });
}

} // namespace

int main(int argc, char** argv) {
  namespace gd = gradcomp::detail;
  for (const double density : {0.05, 0.01}) {
    for (const auto type :
         {gradcomp::value_type::fp32, gradcomp::value_type::fp16, gradcomp::value_type::bf16}) {
      for (const auto enc :
           {gradcomp::index_encoding::u32, gradcomp::index_encoding::delta_varint}) {
        register_codec(density, type, enc);
      }
    }
  }
  register_conversion("fp16_to_float/portable",
                      [](const float*, const std::byte* b, std::size_t n, float* f) {
                        gd::halves_to_floats_portable(b, n, f);
                      });
  register_conversion("fp16_to_float/dispatched",
                      [](const float*, const std::byte* b, std::size_t n, float* f) {
                        gd::halves_to_floats(b, n, f);
                      });
  register_conversion("float_to_fp16/portable",
                      [](const float* v, std::byte* b, std::size_t n, float*) {
                        gd::floats_to_halves_portable(v, n, b);
                      });
  register_conversion("float_to_fp16/dispatched", [](const float* v, std::byte* b, std::size_t n,
                                                     float*) { gd::floats_to_halves(v, n, b); });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
#ifdef GRADCOMP_X86_F16C_DISPATCH
  benchmark::AddCustomContext("fp16 conversion", gd::cpu_has_f16c() ? "F16C" : "portable");
#else
  benchmark::AddCustomContext("fp16 conversion", "portable");
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
