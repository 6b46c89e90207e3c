// SPDX-License-Identifier: Apache-2.0
// The threshold filter's kernels: the portable kernel against a plain reference, and the AVX2
// kernel (when the CPU has it) bit-identical to the portable one, with and without the fused
// error-feedback accumulation, across caps that overflow and thresholds 0 and above all.
#include <gradcomp/compressor/detail/scan_kernel.hpp>

#include <bit>
#include <random>

#include "../../common/catch.hpp"
#include "../../common/generators.hpp"

namespace compressor_detail_scan_kernel_test {

using namespace gradcomp::detail;

namespace {

struct scan_output {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::size_t count = 0;
  std::vector<float> accumulated;
};

template <class Kernel>
scan_output run(Kernel kernel,
                std::vector<float> x,
                const std::vector<float>& g,
                bool accumulate,
                std::uint32_t key,
                std::size_t limit,
                std::size_t b,
                std::size_t e) {
  hit_list hits;
  hits.reset();
  kernel(x.data(), accumulate ? g.data() : nullptr, b, e, key, limit, hits, accumulate);
  hits.finish();
  scan_output out;
  out.indices.assign(hits.indices.begin(),
                     hits.indices.begin() + static_cast<std::ptrdiff_t>(hits.stored));
  out.values.assign(hits.values.begin(),
                    hits.values.begin() + static_cast<std::ptrdiff_t>(hits.stored));
  out.count = hits.count;
  out.accumulated = std::move(x);
  return out;
}

auto portable = [](float* x,
                   const float* g,
                   std::size_t b,
                   std::size_t e,
                   std::uint32_t key,
                   std::size_t limit,
                   hit_list& hits,
                   bool accumulate) {
  if (accumulate) {
    scan_portable<true>(x, g, b, e, key, limit, hits);
  } else {
    scan_portable<false>(x, g, b, e, key, limit, hits);
  }
};

} // namespace

TEST_CASE("the portable scan kernel selects exactly the keys at or above the threshold",
          "[scan_kernel]") {
  const auto x = gradcomp::test::make_values(gradcomp::test::distribution::heavy_tailed, 1000, 1);
  const auto g = gradcomp::test::make_values(gradcomp::test::distribution::normal, 1000, 2);
  for (bool accumulate : {false, true}) {
    for (float t : {0.0f, 0.5f, 2.0f, 1e30f}) {
      CAPTURE(accumulate, t);
      const std::uint32_t key = t == 0.0f ? 0u : scan_key(t);
      const auto out = run(portable, x, g, accumulate, key, 1000000, 3, 997);
      std::vector<std::uint32_t> expected;
      for (std::size_t i = 3; i < 997; ++i) {
        const float v = accumulate ? x[i] + g[i] : x[i];
        REQUIRE(std::bit_cast<std::uint32_t>(out.accumulated[i]) ==
                std::bit_cast<std::uint32_t>(v));
        if (scan_key(v) >= key) {
          expected.push_back(static_cast<std::uint32_t>(i));
        }
      }
      CHECK(out.indices == expected);
      CHECK(out.count == expected.size());
    }
  }
}

TEST_CASE("the AVX2 scan kernel matches the portable one bit for bit", "[scan_kernel]") {
#ifdef GRADCOMP_X86_DISPATCH
  if (!cpu_has_avx2()) {
    SUCCEED("this CPU has no AVX2: only the portable kernel runs here");
    return;
  }
  auto avx2 = [](float* x, const float* g, std::size_t b, std::size_t e, std::uint32_t key,
                 std::size_t limit, hit_list& hits, bool accumulate) {
    if (accumulate) {
      scan_avx2<true>(x, g, b, e, key, limit, hits);
    } else {
      scan_avx2<false>(x, g, b, e, key, limit, hits);
    }
  };
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng() % 5000;
    const auto x = gradcomp::test::make_values(gradcomp::test::distribution::normal, n, trial);
    const auto g =
        gradcomp::test::make_values(gradcomp::test::distribution::normal, n, trial + 1000);
    const std::size_t b = rng() % n;
    const std::size_t e = b + rng() % (n - b + 1);
    const float t = std::array{0.0f, 0.1f, 1.0f, 2.5f, 1e30f}[rng() % 5];
    const std::uint32_t key = t == 0.0f ? 0u : scan_key(t);
    const std::size_t limit = std::array<std::size_t, 3>{0, 10, 1000000}[rng() % 3];
    const bool accumulate = rng() % 2 == 0;
    CAPTURE(trial, n, b, e, t, limit, accumulate);
    const auto a = run(portable, x, g, accumulate, key, limit, b, e);
    const auto c = run(avx2, x, g, accumulate, key, limit, b, e);
    REQUIRE(a.count == c.count);
    REQUIRE(a.indices == c.indices);
    REQUIRE(a.values == c.values);
    REQUIRE(a.accumulated == c.accumulated);
  }
#else
  SUCCEED("not an x86-64 GCC/Clang build: only the portable kernel exists");
#endif
}

} // namespace compressor_detail_scan_kernel_test
