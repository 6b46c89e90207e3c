// SPDX-License-Identifier: Apache-2.0
// Compressors chosen by name (compressor/by_name.hpp): every sparse name and every quantizer name
// builds the compressor of that name (its checkpoint name and type checked) with the settings
// passed on, the lists and the name tests agree, and an unknown name or a bad setting throws
// naming the value.
#include <gradcomp/compressor/by_name.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace compressor_by_name_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

// the checkpoint name of the compressor each name stands for (the compressors' state_name)
std::string_view expected_state_name(std::string_view name) {
  if (name == "exact_topk") {
    return "exact_top_k";
  }
  if (name == "sampled_topk") {
    return "sampled_threshold";
  }
  if (name == "signsgd") {
    return "scaled_sign";
  }
  return name; // the others are named as their class
}

} // namespace

TEST_CASE("by_name: every sparse name builds its compressor with the settings",
          "[compressor][by_name]") {
  CHECK(sparse_compressor_names ==
        std::array<std::string_view, 6>{"exact_topk", "sampled_topk", "gaussian_threshold",
                                        "lognormal_threshold", "reused_threshold", "random_k"});
  const named_compressor_settings s{.density = 0.25,
                                    .interval = 7,
                                    .seed = 42,
                                    .threads = 2,
                                    .values = value_type::fp16,
                                    .nonfinite = nonfinite_policy::skip_step};
  for (const std::string_view name : sparse_compressor_names) {
    CAPTURE(name);
    CHECK(is_sparse_compressor_name(name));
    CHECK_FALSE(is_quantizer_name(name));
    const std::string got = with_sparse_compressor(name, s, [&](auto c) {
      using C = decltype(c);
      CHECK(c.density() == 0.25);
      CHECK(c.get_options().threads == 2u);
      CHECK(c.values_type() == value_type::fp16);
      CHECK(c.get_options().nonfinite == nonfinite_policy::skip_step);
      if constexpr (std::is_same_v<C, reused_threshold>) {
        CHECK(c.get_options().interval == 7u);
      }
      if constexpr (std::is_same_v<C, sampled_threshold> || std::is_same_v<C, random_k>) {
        CHECK(c.get_options().seed == 42u);
      }
      // it selects k = ceil(0.25 x 40) = 10 elements of a 40-element gradient
      const std::vector<float> x = test::make_values(test::distribution::normal, 40, 3);
      sparse_message m;
      const selection_stats stats = c.compress(x, m);
      CHECK(stats.k_target == 10);
      CHECK(m.values_type == value_type::fp16);
      return std::string(C::state_name);
    });
    CHECK(got == expected_state_name(name));
  }
  // exact_topk sends the 10 largest magnitudes: the sort-and-truncate reference
  const std::vector<float> x = test::make_values(test::distribution::heavy_tailed, 40, 5);
  const std::vector<std::uint32_t> indices =
      with_sparse_compressor("exact_topk", {.density = 0.25}, [&](auto c) {
        sparse_message m;
        c.compress(x, m);
        return m.indices;
      });
  CHECK(indices == test::reference_top_k(x, 10));
}

TEST_CASE("by_name: unknown names and bad settings throw naming the value",
          "[compressor][by_name]") {
  const auto nothing = [](auto) { return 0; };
  CHECK_THROWS_WITH(with_sparse_compressor("topk", {}, nothing),
                    Contains("unknown compressor 'topk' (known: exact_topk, sampled_topk, "
                             "gaussian_threshold, lognormal_threshold, reused_threshold, "
                             "random_k)"));
  CHECK_THROWS_WITH(with_sparse_compressor("signsgd", {}, nothing),
                    Contains("unknown compressor 'signsgd'"));
  CHECK_THROWS_WITH(with_sparse_compressor("", {}, nothing), Contains("unknown compressor ''"));
  CHECK_THROWS_WITH(with_quantizer("exact_topk", {}, nothing),
                    Contains("unknown quantizer 'exact_topk'"));
  CHECK_FALSE(is_sparse_compressor_name("EXACT_TOPK")); // names are case-sensitive
  CHECK_FALSE(is_quantizer_name("QSGD"));
  CHECK_THROWS_WITH(with_sparse_compressor("random_k", {.density = 1.5}, nothing),
                    Contains("density 1.5"));
  CHECK_THROWS_WITH(with_sparse_compressor("exact_topk", {.density = 0.0}, nothing),
                    Contains("density 0"));
  CHECK_THROWS_WITH(with_sparse_compressor("reused_threshold", {.interval = 0}, nothing),
                    Contains("interval 0"));
  CHECK_THROWS_WITH(with_quantizer("qsgd", {.levels = 0}, nothing),
                    Contains("levels 0 outside [1, 32768]"));
  CHECK_THROWS_WITH(with_quantizer("qsgd", {.levels = 32769}, nothing), Contains("levels 32769"));
  CHECK_NOTHROW(with_quantizer("qsgd", {.levels = 32768}, nothing));
}

TEST_CASE("by_name: quantizers take the bucket size, else their own default",
          "[compressor][by_name]") {
  CHECK(quantizer_names == std::array<std::string_view, 3>{"signsgd", "terngrad", "qsgd"});
  for (const std::string_view name : quantizer_names) {
    CAPTURE(name);
    const auto defaults = with_quantizer(name, {}, [](auto c) {
      return std::pair<std::string, std::uint32_t>(std::string(decltype(c)::state_name),
                                                   c.bucket_elements());
    });
    CHECK(defaults.first == expected_state_name(name));
    CHECK(defaults.second == (name == "qsgd" ? 512u : 0u));
    const std::uint32_t set =
        with_quantizer(name, {.bucket_elements = 64}, [](auto c) { return c.bucket_elements(); });
    CHECK(set == 64u);
    const std::uint64_t seed = with_quantizer(name, {.seed = 9, .threads = 3}, [](auto c) {
      CHECK(c.get_options().threads == 3u);
      if constexpr (requires { c.get_options().seed; }) {
        return c.get_options().seed;
      } else {
        return std::uint64_t{9}; // scaled_sign draws nothing
      }
    });
    CHECK(seed == 9u);
  }
}

TEST_CASE("quantizers by name", "[quantizer]") {
  for (const std::string_view name : quantizer_names) {
    CHECK(is_quantizer_name(name));
    CHECK_FALSE(is_sparse_compressor_name(name));
    const std::string got = with_quantizer(name, {.levels = 7}, [](auto c) {
      const std::vector<float> x = test::make_values(test::distribution::normal, 10, 1);
      sparse_message m;
      c.compress(x, m);
      return std::to_string(m.quantization_levels);
    });
    CHECK(got == (name == "qsgd" ? "7" : "1"));
  }
  CHECK_THROWS_WITH(with_quantizer("int8", {}, [](auto) { return 0; }),
                    Contains("unknown quantizer 'int8' (known: signsgd, terngrad, qsgd)"));
  CHECK_FALSE(value_type_from_string("quantized").has_value());
  CHECK_THROWS_WITH(exact_top_k({.density = 0.1, .values = value_type::quantized}),
                    Contains("values quantized is made by the quantizing compressors"));
  CHECK(to_string(value_type::quantized) == "quantized");
}

} // namespace compressor_by_name_test
