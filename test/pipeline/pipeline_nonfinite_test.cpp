// SPDX-License-Identifier: Apache-2.0
// Non-finite gradients (compressor/nonfinite_policy.hpp) for every host compressor: raise names
// the first NaN / infinity and sends nothing while the residual keeps the whole accumulation;
// skip_step accumulates them as 0 and drops an overflowing sum (nothing non-finite kept in the
// residual or the velocity, or sent), counts them, conserves every finite value (sent +
// residual == the accumulation, bit for bit) and
// return_sent() gives the sent values back exactly; on finite input both policies change
// nothing (bit-identical to propagate). The pipeline names the layer and index (both scopes),
// counts per iteration and returns sent values; the in-place path is off under the check.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_nonfinite_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_value = std::numeric_limits<float>::infinity();

// Calls fn(name, compressor) for every host compressor of the library under `policy` (two
// threads, so that the check's per-thread results are merged).
template <class Fn>
void for_each_compressor(nonfinite_policy policy, Fn&& fn) {
  const double d = 0.01;
  fn("exact_top_k", exact_top_k({.density = d, .threads = 2, .nonfinite = policy}));
  fn("sampled_threshold",
     sampled_threshold({.density = d, .min_samples = 64, .threads = 2, .nonfinite = policy}));
  fn("gaussian_threshold", gaussian_threshold({.density = d, .threads = 2, .nonfinite = policy}));
  fn("lognormal_threshold", lognormal_threshold({.density = d, .threads = 2, .nonfinite = policy}));
  fn("reused_threshold",
     reused_threshold({.density = d, .interval = 3, .threads = 2, .nonfinite = policy}));
  fn("dense fp32", dense({.threads = 2, .nonfinite = policy}));
  fn("dense fp16", dense({.values = value_type::fp16, .threads = 2, .nonfinite = policy}));
}

constexpr std::size_t n = 20000;

// A gradient with a NaN at 1234, +inf at 3000 and -inf at 19999.
std::vector<float> bad_gradient(std::uint64_t seed) {
  std::vector<float> g = test::make_values(test::distribution::normal, n, seed);
  g[1234] = nan_value;
  g[3000] = inf_value;
  g[19999] = -inf_value;
  return g;
}

// The message as n dense values (0 where nothing was sent).
std::vector<float> sent_values(const sparse_message& m) {
  std::vector<float> v(n, 0.0f);
  for (std::size_t j = 0; j < m.values.size(); ++j) {
    v[m.dense ? j : m.indices[j]] = m.values[j];
  }
  return v;
}

bool all_finite(std::span<const float> x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
}

} // namespace

TEST_CASE("nonfinite: policy names", "[nonfinite]") {
  for (const auto p :
       {nonfinite_policy::propagate, nonfinite_policy::raise, nonfinite_policy::skip_step}) {
    CHECK(nonfinite_policy_from_string(to_string(p)) == p);
  }
  CHECK_THROWS_WITH(nonfinite_policy_from_string("ignore"),
                    Contains("'ignore' is not one of propagate, raise, skip_step"));
}

TEST_CASE("nonfinite: the check changes nothing on finite gradients", "[nonfinite]") {
  for (const auto policy : {nonfinite_policy::raise, nonfinite_policy::skip_step}) {
    std::vector<std::string> names;
    std::vector<sparse_message> checked_messages;
    std::vector<std::vector<float>> checked_residuals;
    for_each_compressor(policy, [&](const char* name, auto c) {
      std::vector<float> r(n, 0.0f);
      sparse_message m;
      for (std::uint64_t step = 0; step < 4; ++step) {
        const auto stats =
            c.compress_accumulate(r, test::make_values(test::distribution::normal, n, step), m);
        REQUIRE(stats.nonfinite == 0);
      }
      names.emplace_back(name);
      checked_messages.push_back(m);
      checked_residuals.push_back(r);
    });
    std::size_t i = 0;
    for_each_compressor(nonfinite_policy::propagate, [&](const char*, auto c) {
      CAPTURE(names[i], to_string(policy));
      std::vector<float> r(n, 0.0f);
      sparse_message m;
      for (std::uint64_t step = 0; step < 4; ++step) {
        c.compress_accumulate(r, test::make_values(test::distribution::normal, n, step), m);
      }
      CHECK(m.indices == checked_messages[i].indices);
      CHECK(test::same_bits(m.values, checked_messages[i].values));
      CHECK(test::same_bits(r, checked_residuals[i]));
      ++i;
    });
  }
}

TEST_CASE("nonfinite: raise names the first element and sends nothing", "[nonfinite]") {
  for_each_compressor(nonfinite_policy::raise, [](const char* name, auto c) {
    CAPTURE(name);
    std::vector<float> r = test::make_values(test::distribution::normal, n, 5, 0.1f);
    const std::vector<float> g = bad_gradient(6);
    std::vector<float> acc(n);
    for (std::size_t i = 0; i < n; ++i) {
      acc[i] = r[i] + g[i];
    }
    sparse_message m;
    try {
      c.compress_accumulate(r, g, m);
      FAIL("no nonfinite_error");
    } catch (const nonfinite_error& e) {
      CHECK(e.index() == 1234);
      CHECK(std::isnan(e.value()));
      CHECK(e.count() == 3);
      CHECK(e.layer() == nonfinite_error::no_layer);
      CHECK_THAT(e.what(), Contains("non-finite value nan at index 1234 of 20000 (3 non-finite"));
    }
    CHECK(m.nnz() == 0);
    CHECK(test::same_bits_or_nan(r, acc)); // the accumulation stays: nothing is lost
    // without error feedback (the gradient is checked before the selection)
    CHECK_THROWS_AS(c.compress(g, m), nonfinite_error);
    CHECK(m.nnz() == 0);
  });
}

TEST_CASE("nonfinite: skip_step drops, counts and conserves every finite value", "[nonfinite]") {
  for_each_compressor(nonfinite_policy::skip_step, [](const char* name, auto c) {
    CAPTURE(name);
    error_feedback ef(n, c);
    sparse_message m;
    ef.compress(test::make_values(test::distribution::normal, n, 7), m); // a residual to keep
    const std::vector<float> before(ef.residual().begin(), ef.residual().end());
    const std::vector<float> g = bad_gradient(8);
    std::vector<float> acc(n); // the accumulation, non-finite gradient values taken as 0
    for (std::size_t i = 0; i < n; ++i) {
      acc[i] = before[i] + (std::isfinite(g[i]) ? g[i] : 0.0f);
    }
    const selection_stats s = ef.compress(g, m);
    CHECK(s.nonfinite == 3);
    CHECK(all_finite(m.values));
    REQUIRE(all_finite(ef.residual()));
    const std::vector<float> sent = sent_values(m);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(test::same_bits(std::vector<float>{sent[i] + ef.residual()[i]},
                              std::vector<float>{acc[i]}));
    }
    // the step is skipped: the sent values go back, exactly
    CHECK(ef.return_sent(m) == m.values.size());
    CHECK(test::same_bits(ef.residual(), acc));
    // and the next clean call goes on normally
    const selection_stats next =
        ef.compress(test::make_values(test::distribution::normal, n, 9), m);
    CHECK(next.nonfinite == 0);
    CHECK(all_finite(ef.residual()));
    // without error feedback the message carries no non-finite value either
    CHECK(c.compress(g, m).nonfinite == 3);
    CHECK(all_finite(m.values));
  });
}

TEST_CASE("nonfinite: skip_step with momentum correction keeps the velocity finite",
          "[nonfinite]") {
  error_feedback ef(n, exact_top_k({.density = 0.01, .nonfinite = nonfinite_policy::skip_step}),
                    momentum_correction{0.9});
  sparse_message m;
  ef.compress(test::make_values(test::distribution::normal, n, 10), m);
  CHECK(ef.compress(bad_gradient(11), m).nonfinite == 3);
  CHECK(all_finite(ef.residual()));
  CHECK(all_finite(ef.velocity()));
}

TEST_CASE("nonfinite: skip_step drops an accumulation that overflows", "[nonfinite]") {
  error_feedback ef(4, exact_top_k({.density = 0.25, .nonfinite = nonfinite_policy::skip_step}));
  sparse_message m;
  const float big = std::numeric_limits<float>::max();
  const float h = 0.75f * big;
  ef.compress(std::vector<float>{big, 0.0f, h, 0.0f}, m); // sends element 0 (k = 1), keeps h
  REQUIRE(ef.residual()[2] == h);
  // element 2: h + h overflows to infinity: dropped (never kept), counted
  const selection_stats s = ef.compress(std::vector<float>{0.0f, 1.0f, h, 0.0f}, m);
  CHECK(s.nonfinite == 1);
  CHECK(ef.residual()[2] == 0.0f);
  CHECK(ef.residual()[1] == 1.0f);
  CHECK(all_finite(m.values));
}

TEST_CASE("nonfinite: propagate sends what the selection ranks first", "[nonfinite]") {
  exact_top_k c(0.01);
  std::vector<float> r(n, 0.0f);
  sparse_message m;
  const selection_stats s = c.compress_accumulate(r, bad_gradient(12), m);
  CHECK(s.nonfinite == 0);
  const std::vector<float> sent = sent_values(m);
  CHECK(std::isnan(sent[1234]));
  CHECK(sent[3000] == inf_value);
  CHECK(sent[19999] == -inf_value);
  CHECK(all_finite(r)); // sent elements leave nothing behind
}

TEST_CASE("nonfinite: return_sent refuses a message of another layer", "[nonfinite]") {
  error_feedback ef(10, exact_top_k(0.1));
  sparse_message m;
  exact_top_k(0.1).compress(std::vector<float>(11, 1.0f), m);
  CHECK_THROWS_WITH(ef.return_sent(m), Contains("the message has 11 elements, this layer's "
                                                "residual has 10"));
}

TEST_CASE("nonfinite: the pipeline names the layer, counts and returns sent values",
          "[nonfinite]") {
  const std::vector<std::size_t> sizes{300, 200, 100};
  for (const auto scope : {compression_scope::per_layer, compression_scope::per_group}) {
    CAPTURE(scope == compression_scope::per_layer);
    loopback_exchange transport;
    // raise: layer 1, index 7 within the layer (one group of all three layers)
    {
      pipeline p(sizes, pipeline_policy::fixed_grouping{schedule::single(3)},
                 exact_top_k({.density = 0.05, .nonfinite = nonfinite_policy::raise}), transport,
                 {}, scope);
      std::vector<float> g1 = test::make_values(test::distribution::normal, 200, 2);
      g1[7] = -inf_value;
      try {
        p.gradient_ready(2, test::make_values(test::distribution::normal, 100, 3));
        p.gradient_ready(1, g1); // per layer: compressed (and refused) here
        p.gradient_ready(0, test::make_values(test::distribution::normal, 300, 1)); // per group
        FAIL("no nonfinite_error");
      } catch (const nonfinite_error& e) {
        CHECK(e.layer() == 1);
        CHECK(e.index() == 7);
        CHECK(e.count() == 1);
        CHECK_THAT(e.what(), Contains("layer 1: non-finite value -inf at index 7 of 200"));
      }
      CHECK_THROWS_WITH(p.finish(), Contains("was never reported"));
      // the next iteration goes on once the kept non-finite value is dropped
      CHECK(p.drop_non_finite_state() == 1);
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        p.gradient_ready(l, test::make_values(test::distribution::normal, sizes[l], 40 + l));
      }
      p.finish();
      CHECK(all_finite(p.averaged(1)));
    }
    // skip_step: counted, averages finite, sent values returned
    {
      pipeline p(sizes, pipeline_policy::fixed_grouping{},
                 exact_top_k({.density = 0.05, .nonfinite = nonfinite_policy::skip_step}),
                 transport, {}, scope);
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        p.gradient_ready(l, test::make_values(test::distribution::normal, sizes[l], 20 + l));
      }
      p.finish();
      CHECK(p.last_stats().nonfinite == 0);
      std::vector<std::vector<float>> expected;
      std::vector<std::vector<float>> grads;
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        grads.push_back(test::make_values(test::distribution::normal, sizes[l], 30 + l));
      }
      grads[0][299] = nan_value;
      grads[2][0] = inf_value;
      grads[2][1] = nan_value;
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        std::vector<float> e(sizes[l]);
        for (std::size_t i = 0; i < sizes[l]; ++i) {
          e[i] = p.residual(l)[i] + (std::isfinite(grads[l][i]) ? grads[l][i] : 0.0f);
        }
        expected.push_back(std::move(e));
      }
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        p.gradient_ready(l, grads[l]);
      }
      p.finish();
      CHECK(p.last_stats().nonfinite == 3);
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        CHECK(all_finite(p.averaged(l)));
      }
      CHECK(p.return_sent() == p.last_stats().selected);
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        CAPTURE(l);
        CHECK(test::same_bits(p.residual(l), expected[l]));
      }
    }
  }
}

TEST_CASE("nonfinite: the in-place path is off under the check", "[nonfinite]") {
  loopback_exchange transport;
  const std::vector<std::size_t> sizes{10};
  pipeline plain(sizes, pipeline_policy::fixed_grouping{}, dense(), transport);
  CHECK(plain.in_place());
  CHECK(plain.return_sent() == 0);
  pipeline checked(sizes, pipeline_policy::fixed_grouping{},
                   dense({.nonfinite = nonfinite_policy::skip_step}), transport);
  CHECK_FALSE(checked.in_place());
  std::vector<float> g(10, 1.0f);
  g[4] = nan_value;
  checked.gradient_ready(0, g);
  checked.finish();
  CHECK(checked.last_stats().nonfinite == 1);
  CHECK(checked.averaged(0)[4] == 0.0f);
  CHECK(checked.return_sent() == 10);
  CHECK(checked.residual(0)[3] == 1.0f);
}

} // namespace pipeline_pipeline_nonfinite_test
