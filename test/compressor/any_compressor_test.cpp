// SPDX-License-Identifier: Apache-2.0
// gradcomp::any_compressor: for every name it accepts, the erased compressor gives bit for bit
// what the concrete compressor (built here by hand from the same settings, not through
// by_name.hpp) gives: messages, residuals, velocities, statistics and checkpoint states, under
// error_feedback, through compress_with_feedback on the caller's state, and in a pipeline. What
// the held compressor lacks (a density, a momentum form, a state) is an error naming it.
#include <gradcomp/compressor/any_compressor.hpp>
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace compressor_any_compressor_test {

using gradcomp::test::error_of;
using gradcomp::test::same_bits;
using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

// Two settings: the defaults' shape, and every field away from its default (bucketed
// quantizers, bf16 values, several threads, skip_step).
named_compressor_settings plain_settings() {
  return {.density = 0.05, .interval = 3, .seed = 7, .levels = 7, .threads = 1};
}
named_compressor_settings other_settings() {
  return {.density = 0.2,
          .interval = 2,
          .seed = 11,
          .levels = 255,
          .bucket_elements = 100,
          .threads = 3,
          .values = value_type::bf16,
          .nonfinite = nonfinite_policy::skip_step};
}

// The reference: calls fn with the concrete compressor `name` stands for, built field by field
// from `s` as the documentation of any_compressor and by_name.hpp says.
template <class Fn>
void with_reference(std::string_view name, const named_compressor_settings& s, Fn&& fn) {
  const auto dense_of = [&](value_type v) {
    dense_options o;
    o.values = v;
    o.threads = s.threads;
    o.nonfinite = s.nonfinite;
    return dense(o);
  };
  const auto sparse_options = [&](auto o) {
    o.density = s.density;
    o.values = s.values;
    o.threads = s.threads;
    o.nonfinite = s.nonfinite;
    return o;
  };
  if (name == "dense") {
    fn(dense_of(s.values));
  } else if (name == "fp32" || name == "fp16" || name == "bf16") {
    fn(dense_of(name == "fp32"   ? value_type::fp32
                : name == "fp16" ? value_type::fp16
                                 : value_type::bf16));
  } else if (name == "exact_topk") {
    fn(exact_top_k(sparse_options(exact_top_k_options{})));
  } else if (name == "sampled_topk") {
    auto o = sparse_options(sampled_threshold_options{});
    o.seed = s.seed;
    fn(sampled_threshold(o));
  } else if (name == "gaussian_threshold") {
    fn(gaussian_threshold(sparse_options(fitted_threshold_options{})));
  } else if (name == "lognormal_threshold") {
    fn(lognormal_threshold(sparse_options(fitted_threshold_options{})));
  } else if (name == "reused_threshold") {
    auto o = sparse_options(reused_threshold_options{});
    o.interval = s.interval;
    fn(reused_threshold(o));
  } else if (name == "random_k") {
    auto o = sparse_options(random_k_options{});
    o.seed = s.seed;
    fn(random_k(o));
  } else if (name == "signsgd") {
    scaled_sign_options o;
    o.threads = s.threads;
    o.bucket_elements = s.bucket_elements.value_or(0);
    o.nonfinite = s.nonfinite;
    fn(scaled_sign(o));
  } else if (name == "terngrad") {
    terngrad_options o;
    o.seed = s.seed;
    o.threads = s.threads;
    o.bucket_elements = s.bucket_elements.value_or(0);
    o.nonfinite = s.nonfinite;
    fn(terngrad(o));
  } else if (name == "qsgd") {
    qsgd_options o;
    o.levels = s.levels;
    o.seed = s.seed;
    o.threads = s.threads;
    o.bucket_elements = s.bucket_elements.value_or(512);
    o.nonfinite = s.nonfinite;
    fn(qsgd(o));
  } else {
    FAIL("no reference for " << name);
  }
}

// A gradient of n normal values (seeded by `call`); with `holes`, a NaN and an infinity in it.
std::vector<float> gradient(std::size_t n, int call, bool holes = false) {
  std::mt19937 rng(1000u + static_cast<unsigned>(call));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& v : g) {
    v = normal(rng);
  }
  if (holes && n > 400) {
    g[17] = std::numeric_limits<float>::quiet_NaN();
    g[400] = -std::numeric_limits<float>::infinity();
  }
  return g;
}

bool same_stats(const selection_stats& a, const selection_stats& b) {
  return a.numel == b.numel && a.k_target == b.k_target && a.k_selected == b.k_selected &&
         std::bit_cast<std::uint32_t>(a.threshold) == std::bit_cast<std::uint32_t>(b.threshold) &&
         a.exact == b.exact && a.fallback == b.fallback && a.adjust_rounds == b.adjust_rounds &&
         a.nonfinite == b.nonfinite;
}

bool same_message(const sparse_message& a, const sparse_message& b) {
  return a.dense_length_elements == b.dense_length_elements && a.dense == b.dense &&
         a.values_type == b.values_type && a.indices == b.indices &&
         same_bits(a.values, b.values) &&
         std::bit_cast<std::uint32_t>(a.quantization_scale) ==
             std::bit_cast<std::uint32_t>(b.quantization_scale) &&
         a.quantization_levels == b.quantization_levels &&
         a.quantization_segments == b.quantization_segments;
}

const std::vector<momentum_correction> corrections = {{.momentum = 0.0},
                                                      {.momentum = 0.9, .factor_masking = true},
                                                      {.momentum = 0.9, .factor_masking = false}};

} // namespace

TEST_CASE("any_compressor: every name is bit for bit its compressor under error feedback",
          "[any_compressor]") {
  constexpr std::size_t n = 5000;
  for (const named_compressor_settings& s : {plain_settings(), other_settings()}) {
    for (const std::string_view name : compressor_names) {
      for (const momentum_correction& mc : corrections) {
        INFO(name << ", density " << s.density << ", momentum " << mc.momentum << ", masking "
                  << mc.factor_masking);
        with_reference(name, s, [&](auto reference) {
          using C = decltype(reference);
          error_feedback<C> expected(n, reference, mc);
          error_feedback<any_compressor> erased(n, any_compressor(name, s), mc);
          // the Python hooks' form: the caller's residual and velocity
          any_compressor own(name, s);
          std::vector<float> residual(n, 0.0f);
          std::vector<float> velocity(mc.momentum > 0.0 ? n : 0, 0.0f);
          sparse_message m_expected, m_erased, m_own;
          for (int call = 0; call < 6; ++call) {
            const bool holes = s.nonfinite == nonfinite_policy::skip_step && call == 2;
            const std::vector<float> g = gradient(n, call, holes);
            const selection_stats a = expected.compress(g, m_expected);
            const selection_stats b = erased.compress(g, m_erased);
            const selection_stats c = own.compress_with_feedback(residual, velocity, g, mc, m_own);
            REQUIRE(same_stats(a, b));
            REQUIRE(same_stats(a, c));
            REQUIRE(same_message(m_expected, m_erased));
            REQUIRE(same_message(m_expected, m_own));
            REQUIRE(same_bits(expected.residual(), erased.residual()));
            REQUIRE(same_bits(expected.residual(), residual));
            REQUIRE(same_bits(expected.velocity(), erased.velocity()));
            REQUIRE(same_bits(expected.velocity(), velocity));
            if (holes) {
              REQUIRE(a.nonfinite == 2);
            }
          }
          // without error feedback too
          C plain = reference;
          any_compressor plain_erased(name, s);
          const std::vector<float> g = gradient(n, 99);
          sparse_message x, y;
          REQUIRE(same_stats(plain.compress(g, x), plain_erased.compress(g, y)));
          REQUIRE(same_message(x, y));
        });
      }
    }
  }
}

TEST_CASE("any_compressor: the state is the concrete compressor's and resumes bit for bit",
          "[any_compressor]") {
  constexpr std::size_t n = 3000;
  const named_compressor_settings s = plain_settings();
  const momentum_correction mc{.momentum = 0.9};
  for (const std::string_view name : compressor_names) {
    INFO(name);
    with_reference(name, s, [&](auto reference) {
      using C = decltype(reference);
      error_feedback<C> expected(n, reference, mc);
      error_feedback<any_compressor> erased(n, any_compressor(name, s), mc);
      sparse_message a, b, c;
      int call = 0;
      for (; call < 4; ++call) {
        const auto g = gradient(n, call);
        expected.compress(g, a);
        erased.compress(g, b);
      }
      const std::vector<std::byte> bytes = save_state(erased);
      REQUIRE(bytes == save_state(expected)); // no wrapper of its own
      // resumed from the erased state: as an any_compressor and as the concrete type
      error_feedback<any_compressor> resumed(n, any_compressor(name, s), mc);
      load_state(resumed, bytes);
      error_feedback<C> resumed_concrete(n, reference, mc);
      load_state(resumed_concrete, bytes);
      for (; call < 8; ++call) {
        const auto g = gradient(n, call);
        const selection_stats x = expected.compress(g, a);
        REQUIRE(same_stats(x, resumed.compress(g, b)));
        REQUIRE(same_message(a, b));
        REQUIRE(same_stats(x, resumed_concrete.compress(g, c)));
        REQUIRE(same_message(a, c));
        REQUIRE(same_bits(expected.residual(), resumed.residual()));
        REQUIRE(same_bits(expected.velocity(), resumed.velocity()));
      }
      // the compressor alone, too
      any_compressor alone(name, s);
      REQUIRE(save_state(alone) == save_state(reference));
    });
  }
  // another compressor's state is refused, naming both; the object is unchanged
  any_compressor topk("exact_topk", s);
  any_compressor randk("random_k", s);
  const std::vector<std::byte> before = save_state(randk);
  try {
    load_state(randk, save_state(topk));
    FAIL("no state_error");
  } catch (const state_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("exact_top_k") && Catch::Contains("random_k"));
  }
  REQUIRE(save_state(randk) == before);
}

TEST_CASE("any_compressor: set_density changes k exactly as the concrete compressor's",
          "[any_compressor]") {
  constexpr std::size_t n = 4001;
  const named_compressor_settings s = plain_settings();
  for (const std::string_view name : sparse_compressor_names) {
    INFO(name);
    with_reference(name, s, [&](auto reference) {
      if constexpr (!density_compressor<decltype(reference)>) {
        FAIL(name << " has no density");
      } else {
        any_compressor erased(name, s);
        REQUIRE(erased.has_density());
        REQUIRE(erased.density() == s.density);
        sparse_message a, b;
        for (const double d : {0.2, 0.013, 1.0}) {
          reference.set_density(d);
          erased.set_density(d);
          REQUIRE(erased.density() == d);
          std::vector<float> r1(n, 0.0f), r2(n, 0.0f);
          const auto g = gradient(n, static_cast<int>(d * 1000));
          const selection_stats x = reference.compress_accumulate(r1, g, a);
          const selection_stats y = erased.compress_accumulate(r2, g, b);
          REQUIRE(y.k_target == k_for_density(n, d));
          REQUIRE(same_stats(x, y));
          REQUIRE(same_message(a, b));
          REQUIRE(same_bits(r1, r2));
        }
        CHECK_THAT(error_of([&] { erased.set_density(1.5); }), Catch::Contains("1.5"));
        REQUIRE(erased.density() == 1.0); // unchanged
      }
    });
  }
  for (const std::string_view name : {"dense", "fp16", "signsgd", "terngrad", "qsgd"}) {
    INFO(name);
    any_compressor erased(name, s);
    REQUIRE_FALSE(erased.has_density());
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { erased.set_density(0.5); }, [&] { static_cast<void>(erased.density()); }}) {
      try {
        call();
        FAIL("no logic_error");
      } catch (const std::logic_error& e) {
        CHECK_THAT(e.what(),
                   Catch::Contains("'" + std::string(name) + "'") && Catch::Contains("no density"));
      }
    }
  }
}

TEST_CASE("any_compressor: bad names and bad settings are named with their limits",
          "[any_compressor]") {
  const std::string unknown = error_of([] { any_compressor("topk", {}); });
  CHECK_THAT(unknown, Catch::Contains("'topk'"));
  for (const std::string_view known : compressor_names) {
    CHECK_THAT(unknown, Catch::Contains(std::string(known)));
  }
  const auto bad = [](auto change) {
    named_compressor_settings s;
    change(s);
    return s;
  };
  struct case_t {
    named_compressor_settings s;
    std::vector<std::string> named;
  };
  const std::vector<case_t> cases = {
      {bad([](auto& s) { s.density = 0.0; }), {"density 0", "(0, 1]"}},
      {bad([](auto& s) { s.density = 1.5; }), {"density 1.5", "(0, 1]"}},
      {bad([](auto& s) { s.density = std::nan(""); }), {"density nan", "(0, 1]"}},
      {bad([](auto& s) { s.interval = 0; }), {"interval 0", "minimum 1"}},
      {bad([](auto& s) { s.levels = 0; }), {"levels 0", "[1, 32768]"}},
      {bad([](auto& s) { s.levels = 40000; }), {"levels 40000", "[1, 32768]"}},
      {bad([](auto& s) { s.threads = 0; }), {"threads 0", "[1, 1024]"}},
      {bad([](auto& s) { s.threads = 2000; }), {"threads 2000", "[1, 1024]"}},
      {bad([](auto& s) { s.values = value_type::quantized; }), {"values quantized", "fp32"}}};
  for (const case_t& c : cases) {
    // whichever compressor uses the field: a settings struct is valid or not by itself
    for (const std::string_view name : {"exact_topk", "reused_threshold", "qsgd", "fp32"}) {
      INFO(name << ": " << c.named.front());
      const std::string what = error_of([&] { any_compressor(name, c.s); });
      for (const std::string& part : c.named) {
        CHECK_THAT(what, Catch::Contains(part));
      }
      CHECK_THAT(error_of([&] { check_named_compressor_settings(c.s); }),
                 Catch::Contains(c.named.front()));
    }
  }
  REQUIRE_NOTHROW(check_named_compressor_settings({}));
  REQUIRE(is_compressor_name("dense"));
  REQUIRE(is_dense_compressor_name("bf16"));
  REQUIRE_FALSE(is_compressor_name("powersgd"));
}

TEST_CASE("any_compressor: a pipeline over it averages as the pipeline over the concrete one",
          "[any_compressor][pipeline]") {
  const std::vector<std::size_t> sizes = {300, 7, 1000, 64};
  const auto gradient_of = [&](std::size_t layer, int it) {
    return gradient(sizes[layer], it * 10 + static_cast<int>(layer));
  };
  const named_compressor_settings s = plain_settings();
  for (const std::string_view name :
       {"exact_topk", "reused_threshold", "sampled_topk", "qsgd", "fp16", "fp32"}) {
    for (const compression_scope scope :
         {compression_scope::per_layer, compression_scope::per_group}) {
      for (const double m : {0.0, 0.9}) {
        INFO(name << ", per group " << (scope == compression_scope::per_group) << ", momentum "
                  << m);
        const momentum_correction mc{.momentum = m};
        const fixed_grouping groups{scope == compression_scope::per_group
                                        ? schedule::single(sizes.size())
                                        : schedule::grouping{}};
        with_reference(name, s, [&](auto reference) {
          using C = decltype(reference);
          loopback_exchange t1, t2;
          pipeline<C, loopback_exchange> expected(sizes, groups, reference, t1, mc, scope);
          pipeline<any_compressor, loopback_exchange> erased(sizes, groups, any_compressor(name, s),
                                                             t2, mc, scope);
          REQUIRE_FALSE(erased.in_place()); // fp32: the message path, with the same bits
          REQUIRE(same_bits(gradcomp::test::run_iterations(expected, 0, 4, gradient_of),
                            gradcomp::test::run_iterations(erased, 0, 4, gradient_of)));
          REQUIRE(expected.last_stats().selected == erased.last_stats().selected);
          REQUIRE(save_state(expected) == save_state(erased));
          if constexpr (density_compressor<C>) {
            expected.set_density(0.3);
            erased.set_density(0.3);
            REQUIRE(same_bits(gradcomp::test::run_iterations(expected, 4, 2, gradient_of),
                              gradcomp::test::run_iterations(erased, 4, 2, gradient_of)));
          }
        });
      }
    }
  }
}

namespace {
// A user's compressor with only what gradcomp::compressor asks for: no momentum form, no
// density, no state, no values_type.
struct bare_compressor {
  using compressor_concept = compressor_tag;
  exact_top_k inner{0.1};
  selection_stats compress(std::span<const float> x, sparse_message& out) {
    return inner.compress(x, out);
  }
  selection_stats
  compress_accumulate(std::span<float> r, std::span<const float> g, sparse_message& out) {
    return inner.compress_accumulate(r, g, out);
  }
};
} // namespace

TEST_CASE("any_compressor: copies, moves, held objects and what they lack", "[any_compressor]") {
  constexpr std::size_t n = 2000;
  SECTION("a copy clones the state; the two then go their own ways") {
    any_compressor a("reused_threshold", plain_settings());
    std::vector<float> r(n, 0.0f);
    sparse_message m1, m2;
    a.compress_accumulate(r, gradient(n, 0), m1);
    any_compressor b = a; // mid-interval: its position and threshold are copied
    std::vector<float> r2 = r;
    for (int call = 1; call < 5; ++call) {
      const auto g = gradient(n, call);
      REQUIRE(same_stats(a.compress_accumulate(r, g, m1), b.compress_accumulate(r2, g, m2)));
      REQUIRE(same_message(m1, m2));
    }
    b.set_density(0.5);
    REQUIRE(a.density() == 0.05);
    a = b;
    REQUIRE(a.density() == 0.5);
    any_compressor moved = std::move(a);
    REQUIRE(moved.name() == "reused_threshold");
    REQUIRE_THROWS_AS(a.compress(gradient(n, 0), m1), std::logic_error); // NOLINT: moved from
  }
  SECTION("names, value types and targets") {
    REQUIRE(any_compressor("fp16").values_type() == value_type::fp16);
    REQUIRE(any_compressor("dense", {.values = value_type::bf16}).values_type() ==
            value_type::bf16);
    REQUIRE(any_compressor("fp32", {.values = value_type::bf16}).values_type() == value_type::fp32);
    REQUIRE(any_compressor("qsgd").values_type() == value_type::quantized);
    any_compressor q("qsgd", {.levels = 31, .bucket_elements = 0});
    REQUIRE(q.name() == "qsgd");
    REQUIRE(q.target_type() == typeid(qsgd));
    REQUIRE(q.target<qsgd>()->levels() == 31);
    REQUIRE(q.target<qsgd>()->bucket_elements() == 0);
    REQUIRE(q.target<dense>() == nullptr);
    REQUIRE(any_compressor(terngrad()).name() == "terngrad");
  }
  SECTION("a size_switch, held as an object") {
    using switch_t = size_switch<dense, exact_top_k>;
    switch_t reference(100, dense(), exact_top_k(0.1));
    any_compressor erased(reference);
    REQUIRE(erased.name().empty());
    REQUIRE_FALSE(erased.values_type().has_value());
    REQUIRE(erased.has_density());
    REQUIRE(erased.has_momentum());
    REQUIRE(erased.has_state());
    REQUIRE(erased.target<switch_t>() != nullptr);
    for (const std::size_t len : {std::size_t{50}, n}) {
      sparse_message a, b;
      const auto g = gradient(len, 3);
      REQUIRE(same_stats(reference.compress(g, a), erased.compress(g, b)));
      REQUIRE(same_message(a, b));
    }
    REQUIRE(save_state(erased) == save_state(reference));
  }
  SECTION("a compressor without momentum form, density or state") {
    any_compressor bare{bare_compressor{}};
    REQUIRE_FALSE(bare.has_momentum());
    REQUIRE_FALSE(bare.has_density());
    REQUIRE_FALSE(bare.has_state());
    std::vector<float> r(n, 0.0f), u(n, 0.0f);
    const auto g = gradient(n, 1);
    sparse_message m;
    REQUIRE(bare.compress_with_feedback(r, {}, g, {}, m).k_selected == 200);
    CHECK_THAT(error_of([&] { bare.compress_with_feedback(r, u, g, {.momentum = 0.5}, m); }),
               Catch::Contains("momentum correction 0.5"));
    REQUIRE_THROWS_AS(bare.compress_accumulate_momentum(r, u, g, 0.5f, m), std::logic_error);
    state_writer w;
    REQUIRE_THROWS_AS(bare.save_state(w), std::logic_error);
  }
  SECTION("compress_with_feedback checks its arguments before it changes anything") {
    any_compressor c("exact_topk");
    std::vector<float> r(n - 1, 1.0f), u(n, 2.0f);
    const auto g = gradient(n, 2);
    sparse_message m;
    CHECK_THAT(error_of([&] { c.compress_with_feedback(r, u, g, {}, m); }),
               Catch::Contains(std::to_string(n - 1)) && Catch::Contains(std::to_string(n)));
    r.assign(n, 1.0f);
    CHECK_THAT(error_of([&] { c.compress_with_feedback(r, {}, g, {.momentum = 0.9}, m); }),
               Catch::Contains("velocity has 0 elements"));
    CHECK_THAT(error_of([&] { c.compress_with_feedback(r, u, g, {.momentum = 1.0}, m); }),
               Catch::Contains("momentum 1"));
    REQUIRE(std::all_of(r.begin(), r.end(), [](float v) { return v == 1.0f; }));
    REQUIRE(std::all_of(u.begin(), u.end(), [](float v) { return v == 2.0f; }));
  }
}

} // namespace compressor_any_compressor_test
