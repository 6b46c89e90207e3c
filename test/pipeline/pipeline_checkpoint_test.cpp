// SPDX-License-Identifier: Apache-2.0
// Checkpoint state (gradcomp::save_state / load_state): an object restored from its state
// continues bit for bit as the uninterrupted object (every compressor, with and without momentum
// correction, the pipeline in both scopes); a state of another configuration, a truncated or a
// corrupted one is refused with state_error naming what is wrong, and the object is unchanged.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_checkpoint_test {

using gradcomp::test::same_bits;
using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

std::vector<float> gradient(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& v : g) {
    v = dist(rng);
  }
  return g;
}

bool same_message(const sparse_message& a, const sparse_message& b) {
  return a.dense_length_elements == b.dense_length_elements && a.indices == b.indices &&
         same_bits(a.values, b.values) && a.values_type == b.values_type;
}

// 2K iterations uninterrupted against K, save, load into `fresh`, K more: every message and the
// final residual and velocity bit for bit. Changes the density at iteration 1 (state, saved).
template <class C>
void check_resume(const C& prototype, momentum_correction mc, std::size_t n = 3000) {
  constexpr int k = 4;
  error_feedback<C> whole(n, prototype, mc);
  error_feedback<C> first(n, prototype, mc);
  sparse_message a, b;
  for (int it = 0; it < 2 * k; ++it) {
    if constexpr (density_compressor<C>) {
      if (it == 1) {
        whole.compressor().set_density(0.02);
        first.compressor().set_density(0.02);
      }
    }
    const auto g = gradient(n, 100 + it);
    whole.compress(g, a);
    if (it < k) {
      first.compress(g, b);
      REQUIRE(same_message(a, b));
    }
  }
  const std::vector<std::byte> bytes = save_state(first);
  error_feedback<C> resumed(n, prototype, mc); // as a restarted job builds it
  load_state(resumed, bytes);
  error_feedback<C> reference(n, prototype, mc);
  load_state(reference, bytes);
  for (int it = k; it < 2 * k; ++it) {
    const auto g = gradient(n, 100 + it);
    resumed.compress(g, b);
    reference.compress(g, a);
    REQUIRE(same_message(a, b));
  }
  // against the uninterrupted run
  error_feedback<C> again(n, prototype, mc);
  load_state(again, bytes);
  error_feedback<C> uninterrupted(n, prototype, mc);
  for (int it = 0; it < 2 * k; ++it) {
    if constexpr (density_compressor<C>) {
      if (it == 1) {
        uninterrupted.compressor().set_density(0.02);
      }
    }
    const auto g = gradient(n, 100 + it);
    uninterrupted.compress(g, a);
    if (it >= k) {
      again.compress(g, b);
      REQUIRE(same_message(a, b));
    }
  }
  CHECK(same_bits(again.residual(), uninterrupted.residual()));
  CHECK(same_bits(again.velocity(), uninterrupted.velocity()));
  CHECK(save_state(again) == save_state(uninterrupted));
}

} // namespace

TEST_CASE("checkpoint: error feedback resumes bit for bit, every compressor", "[checkpoint]") {
  for (const double m : {0.0, 0.9}) {
    const momentum_correction mc{m};
    check_resume(exact_top_k(0.01), mc);
    check_resume(sampled_threshold({.density = 0.01, .seed = 7}), mc);
    check_resume(gaussian_threshold(0.01), mc);
    check_resume(lognormal_threshold(0.01), mc);
    check_resume(reused_threshold({.density = 0.01, .interval = 3}), mc);
    check_resume(size_switch(1000, dense(), reused_threshold({.density = 0.01, .interval = 3})), mc,
                 3000);
    check_resume(size_switch(1000, dense(), reused_threshold({.density = 0.01, .interval = 3})), mc,
                 500);
  }
  check_resume(dense(value_type::fp16), {});
  check_resume(dense(value_type::bf16), {});
}

TEST_CASE("checkpoint: a state of another configuration is refused naming the difference",
          "[checkpoint]") {
  error_feedback<reused_threshold> saved(100, reused_threshold({.density = 0.1, .interval = 5}));
  const auto g = gradient(100, 1);
  sparse_message m;
  saved.compress(g, m);
  const std::vector<std::byte> bytes = save_state(saved);

  error_feedback<reused_threshold> longer(101, reused_threshold({.density = 0.1, .interval = 5}));
  CHECK_THROWS_WITH(load_state(longer, bytes),
                    Catch::Contains("layer length is 100 in the checkpoint, 101 here"));
  error_feedback<reused_threshold> interval(100, reused_threshold({.density = 0.1, .interval = 4}));
  CHECK_THROWS_WITH(load_state(interval, bytes),
                    Catch::Contains("option 'interval' differs: the checkpoint has 5"));
  error_feedback<exact_top_k> other(100, exact_top_k(0.1));
  CHECK_THROWS_WITH(load_state(other, bytes),
                    Catch::Contains("holds a 'reused_threshold' compressor, this one is "
                                    "'exact_top_k'"));
  error_feedback<reused_threshold> momentum(100, reused_threshold({.density = 0.1, .interval = 5}),
                                            momentum_correction{0.5});
  CHECK_THROWS_WITH(load_state(momentum, bytes), Catch::Contains("momentum correction 0"));
  // a different density is state, not configuration: restored
  error_feedback<reused_threshold> density(100, reused_threshold({.density = 0.5, .interval = 5}));
  load_state(density, bytes);
  CHECK(density.compressor().density() == 0.1);
}

TEST_CASE("checkpoint: truncated and corrupted states are refused, the object unchanged",
          "[checkpoint]") {
  error_feedback<sampled_threshold> saved(64, sampled_threshold({.density = 0.1, .seed = 3}),
                                          momentum_correction{0.9});
  sparse_message m;
  for (unsigned it = 0; it < 3; ++it) {
    saved.compress(gradient(64, it), m);
  }
  const std::vector<std::byte> bytes = save_state(saved);
  error_feedback<sampled_threshold> target(64, sampled_threshold({.density = 0.1, .seed = 3}),
                                           momentum_correction{0.9});
  target.compress(gradient(64, 9), m);
  const std::vector<std::byte> before = save_state(target);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    CHECK_THROWS_AS(load_state(target, std::span(bytes).first(cut)), state_error);
  }
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::byte> bad = bytes;
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, bad.size() - 1)(rng);
    bad[at] ^= std::byte{static_cast<unsigned char>(1u << (trial % 8))};
    CHECK_THROWS_AS(load_state(target, bad), state_error);
  }
  CHECK(save_state(target) == before); // every failed load left it as it was
  load_state(target, bytes);
  CHECK(save_state(target) == bytes);
}

namespace {

// `iterations` iterations of `p` from iteration `first` on (layers reported backward, seeded
// gradients per layer and iteration); every layer's averages of every iteration, concatenated.
template <class Pipeline>
std::vector<float>
run_pipeline(Pipeline& p, const std::vector<std::size_t>& sizes, int first, int iterations) {
  return test::run_iterations(p, first, iterations, [&](std::size_t l, int it) {
    return gradient(sizes[l], static_cast<unsigned>(1000 * it) + static_cast<unsigned>(l));
  });
}

} // namespace

TEST_CASE("checkpoint: a pipeline resumes bit for bit in both scopes", "[checkpoint][pipeline]") {
  const std::vector<std::size_t> sizes = {500, 20, 2000, 64, 300};
  const fixed_grouping groups{schedule::grouping{{0, 2}, {2, 5}}};
  for (const compression_scope scope :
       {compression_scope::per_layer, compression_scope::per_group}) {
    for (const double m : {0.0, 0.9}) {
      const reused_threshold prototype({.density = 0.02, .interval = 3});
      loopback_exchange t1, t2, t3;
      pipeline<reused_threshold, loopback_exchange> whole(sizes, groups, prototype, t1,
                                                          momentum_correction{m}, scope);
      pipeline<reused_threshold, loopback_exchange> first(sizes, groups, prototype, t2,
                                                          momentum_correction{m}, scope);
      const std::vector<float> expected = run_pipeline(whole, sizes, 0, 6);
      const std::vector<float> head = run_pipeline(first, sizes, 0, 3);
      const std::vector<std::byte> bytes = save_state(first);
      pipeline<reused_threshold, loopback_exchange> resumed(sizes, groups, prototype, t3,
                                                            momentum_correction{m}, scope);
      load_state(resumed, bytes);
      std::vector<float> got = head;
      const std::vector<float> tail = run_pipeline(resumed, sizes, 3, 3);
      got.insert(got.end(), tail.begin(), tail.end());
      REQUIRE(got.size() == expected.size());
      CHECK(same_bits(got, expected));
    }
  }
}

TEST_CASE("checkpoint: a pipeline takes the saved grouping and refuses other layouts",
          "[checkpoint][pipeline]") {
  const std::vector<std::size_t> sizes = {50, 20, 30};
  loopback_exchange t1, t2, t3, t4;
  pipeline<exact_top_k, loopback_exchange> saved(sizes, fixed_grouping{schedule::single(3)},
                                                 exact_top_k(0.1), t1, {},
                                                 compression_scope::per_group);
  run_pipeline(saved, sizes, 0, 2);
  const std::vector<std::byte> bytes = save_state(saved);
  pipeline<exact_top_k, loopback_exchange> other_grouping(sizes, fixed_grouping{}, exact_top_k(0.1),
                                                          t2, {}, compression_scope::per_group);
  load_state(other_grouping, bytes);
  CHECK(other_grouping.groups() == schedule::single(3));
  CHECK(same_bits(run_pipeline(other_grouping, sizes, 2, 2), run_pipeline(saved, sizes, 2, 2)));

  pipeline<exact_top_k, loopback_exchange> per_layer(sizes, fixed_grouping{}, exact_top_k(0.1), t3);
  CHECK_THROWS_WITH(load_state(per_layer, bytes), Catch::Contains("compression scope differs"));
  const std::vector<std::size_t> other_sizes = {50, 21, 30};
  pipeline<exact_top_k, loopback_exchange> other_layers(
      other_sizes, fixed_grouping{}, exact_top_k(0.1), t4, {}, compression_scope::per_group);
  CHECK_THROWS_WITH(load_state(other_layers, bytes),
                    Catch::Contains("pipeline layer 1 elements is 20 in the checkpoint, 21 here"));
}

TEST_CASE("checkpoint: a pipeline refuses to save or load mid-iteration", "[checkpoint]") {
  const std::vector<std::size_t> sizes = {10, 10};
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange> p(sizes, fixed_grouping{}, exact_top_k(0.5), t);
  const std::vector<std::byte> bytes = save_state(p);
  p.gradient_ready(0, gradient(10, 1));
  CHECK_THROWS_AS(save_state(p), std::logic_error);
  CHECK_THROWS_AS(load_state(p, bytes), std::logic_error);
  p.gradient_ready(1, gradient(10, 2));
  p.finish();
  load_state(p, bytes);
}

} // namespace pipeline_pipeline_checkpoint_test
