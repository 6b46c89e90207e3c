// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline with the loopback transport: the output equals compressing every layer
// with its own error feedback (bit for bit, over iterations, any grouping, any hook order);
// misuse (a layer twice, never, a wrong length) and transport failures are reported.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_test {

using gradcomp::test::error_of;
using gradcomp::test::same_bits;

using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

const std::vector<std::size_t>& sizes = test::five_layer_sizes;

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::five_layer_gradient(layer, iteration, 1000);
}

std::vector<std::size_t> hook_order(int iteration, int mode) {
  return test::hook_order(sizes.size(), iteration, mode, 7, 1);
}

// The pipeline's averages equal per-layer error feedback + decompress, bit for bit.
template <class Compressor>
void check_against_error_feedback(const Compressor& prototype,
                                  const schedule::grouping& groups,
                                  int mode,
                                  momentum_correction mc = {}) {
  loopback_exchange transport;
  pipeline<Compressor, loopback_exchange> p(sizes, fixed_grouping{groups}, prototype, transport,
                                            mc);
  std::vector<error_feedback<Compressor>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, prototype, mc);
  }
  sparse_message m;
  std::vector<std::vector<float>> outputs(sizes.size());
  std::vector<std::span<float>> output_spans;
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    outputs[l].assign(sizes[l], -1.0f);
    output_spans.emplace_back(outputs[l]);
  }
  for (int it = 0; it < 6; ++it) {
    for (const std::size_t l : hook_order(it, mode)) {
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish(output_spans);
    std::size_t selected = 0;
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      const auto s = reference[l].compress(gradient(l, it), m);
      selected += s.k_selected;
      std::vector<float> expected(sizes[l]);
      decompress(m, expected);
      REQUIRE(same_bits(p.averaged(l), expected));
      REQUIRE(same_bits(outputs[l], expected));
      REQUIRE(same_bits(p.feedback(l).residual(), reference[l].residual()));
      REQUIRE(same_bits(p.feedback(l).velocity(), reference[l].velocity()));
      REQUIRE(p.feedback(l).velocity().size() == (mc.momentum > 0.0 ? sizes[l] : 0));
      REQUIRE(p.last_stats().layers[l].k_selected == s.k_selected);
    }
    const auto& stats = p.last_stats();
    CHECK(stats.selected == selected);
    CHECK(stats.numel == std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}));
    CHECK(stats.bytes_reported);
    CHECK(stats.compress_seconds >= 0.0);
    CHECK(stats.communicate_seconds >= 0.0);
    CHECK(stats.finish_wait_seconds >= 0.0);
  }
}

// Throws from start() while `fail` is set.
struct failing_exchange {
  using transport_concept = transport_tag;
  bool fail = true;
  void start(const sparse_message& m, std::span<float> out) {
    if (fail) {
      throw std::runtime_error("transport failed");
    }
    decompress(m, out);
  }
  bool test() { return true; }
  void wait() {}
};

// loopback_exchange without start_in_place: the pipeline then takes the message path.
struct message_only_exchange {
  using transport_concept = transport_tag;
  loopback_exchange inner;
  void start(const sparse_message& m, std::span<float> out) { inner.start(m, out); }
  bool test() { return inner.test(); }
  void wait() { inner.wait(); }
};

} // namespace

static_assert(pipeline_policy::transport<loopback_exchange>);
static_assert(pipeline_policy::transport<failing_exchange>);
static_assert(!pipeline_policy::byte_counting_transport<failing_exchange>);

TEST_CASE("pipeline output equals per-layer error feedback bit for bit", "[pipeline]") {
  const int mode = GENERATE(0, 1, 2);
  const auto groups = GENERATE(schedule::per_layer(5), schedule::single(5),
                               schedule::grouping{{0, 2}, {2, 3}, {3, 5}});
  CAPTURE(mode, groups.size());
  SECTION("exact top-k") {
    check_against_error_feedback(exact_top_k(exact_top_k_options{.density = 0.1}), groups, mode);
  }
  SECTION("reused threshold (per-layer compressor state)") {
    check_against_error_feedback(
        reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups, mode);
  }
  SECTION("dense fp32 (the in-place path)") {
    check_against_error_feedback(dense(), groups, mode);
  }
  SECTION("dense fp16 (dense group messages)") {
    check_against_error_feedback(dense(value_type::fp16), groups, mode);
  }
  SECTION("reused threshold with DGC momentum correction") {
    check_against_error_feedback(
        reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups, mode,
        momentum_correction{0.9});
  }
}

TEST_CASE("pipeline hooks in any order give the same result", "[pipeline]") {
  loopback_exchange t1;
  loopback_exchange t2;
  const schedule::grouping groups{{0, 1}, {1, 4}, {4, 5}};
  using pipe = pipeline<exact_top_k, loopback_exchange>;
  pipe forward(sizes, fixed_grouping{groups}, exact_top_k(0.2), t1);
  pipe shuffled(sizes, fixed_grouping{groups}, exact_top_k(0.2), t2);
  for (int it = 0; it < 5; ++it) {
    for (const std::size_t l : hook_order(it, 0)) {
      forward.gradient_ready(l, gradient(l, it));
    }
    for (const std::size_t l : hook_order(it, 2)) {
      shuffled.gradient_ready(l, gradient(l, it));
    }
    forward.finish();
    shuffled.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      REQUIRE(same_bits(forward.averaged(l), shuffled.averaged(l)));
    }
  }
}

TEST_CASE("pipeline reports misuse naming the layer", "[pipeline]") {
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange> p(sizes, fixed_grouping{}, exact_top_k(0.1), t);
  CHECK(p.groups().size() == sizes.size());

  p.gradient_ready(2, gradient(2, 0));
  const std::string twice = error_of([&] { p.gradient_ready(2, gradient(2, 0)); });
  CHECK(twice.find("layer 2 reported twice") != std::string::npos);

  const std::vector<float> wrong(5, 1.0f);
  const std::string length = error_of([&] { p.gradient_ready(0, wrong); });
  CHECK(length.find("layer 0") != std::string::npos);
  CHECK(length.find("5 elements") != std::string::npos);
  CHECK(length.find("300") != std::string::npos);

  CHECK(error_of([&] { p.gradient_ready(5, wrong); }).find("layer 5 is out of range") !=
        std::string::npos);

  for (const std::size_t l : {0, 1, 4}) {
    p.gradient_ready(l, gradient(l, 0));
  }
  const std::string never = error_of([&] { p.finish(); });
  CHECK(never.find("layer 3 was never reported") != std::string::npos);

  // the pipeline is ready for a new, complete iteration
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    p.gradient_ready(l, gradient(l, 1));
  }
  CHECK_NOTHROW(p.finish());

  std::vector<std::vector<float>> out(sizes.size());
  std::vector<std::span<float>> spans(out.begin(), out.end());
  CHECK(error_of([&] { p.finish(spans); }).find("output of layer 0 has 0 elements") !=
        std::string::npos);
}

TEST_CASE("pipeline rethrows a transport failure from finish()", "[pipeline]") {
  failing_exchange t;
  pipeline<dense, failing_exchange> p(sizes, fixed_grouping{schedule::grouping{{0, 2}, {2, 5}}},
                                      dense(), t);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    p.gradient_ready(l, gradient(l, 0));
  }
  CHECK_THROWS_WITH(p.finish(), "transport failed");
  CHECK_FALSE(p.last_stats().bytes_reported);
  t.fail = false;
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    p.gradient_ready(l, gradient(l, 1));
  }
  CHECK_NOTHROW(p.finish());
  // dense fp32 with error feedback: residual 0 + grad is sent as is
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    REQUIRE(same_bits(p.averaged(l), gradient(l, 1)));
  }
}

TEST_CASE("pipeline takes its grouping from a merge strategy", "[pipeline]") {
  loopback_exchange t;
  pipeline_policy::planned_grouping planned;
  planned.strategy = schedule::strategy::single;
  planned.model = schedule::cost_model::affine(1e-4, 1e-9);
  pipeline<exact_top_k, loopback_exchange, pipeline_policy::planned_grouping> p(
      sizes, planned, exact_top_k(0.1), t);
  REQUIRE(p.groups() == schedule::single(sizes.size()));
  CHECK_THROWS_AS((pipeline<exact_top_k, loopback_exchange>(
                      sizes, fixed_grouping{schedule::grouping{{0, 2}}}, exact_top_k(0.1), t)),
                  std::invalid_argument);
}

TEST_CASE("in-place dense path: taken only where lossless, bit-identical to the message path",
          "[pipeline]") {
  loopback_exchange loopback;
  message_only_exchange messages;
  const fixed_grouping groups{schedule::grouping{{0, 2}, {2, 5}}};
  pipeline<dense, loopback_exchange> in_place(sizes, groups, dense(), loopback);
  pipeline<dense, message_only_exchange> reference(sizes, groups, dense(), messages);
  CHECK(in_place.in_place());
  CHECK_FALSE(reference.in_place());
  // not lossless, or not a dense compressor: the message path
  loopback_exchange other;
  CHECK_FALSE((pipeline<dense, loopback_exchange>(sizes, groups, dense(value_type::fp16), other)
                   .in_place()));
  CHECK_FALSE((pipeline<dense, loopback_exchange>(sizes, groups, dense(), other,
                                                  momentum_correction{.momentum = 0.9})
                   .in_place()));
  CHECK_FALSE((pipeline<dense, loopback_exchange>(sizes, groups, dense(), other, {},
                                                  compression_scope::per_group)
                   .in_place()));
  CHECK_FALSE((
      pipeline<exact_top_k, loopback_exchange>(sizes, groups, exact_top_k(1.0), other).in_place()));
  for (int it = 0; it < 3; ++it) {
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      std::vector<float> g = gradient(l, it);
      g[0] = -0.0f; // error feedback sends 0.0f + g: +0.0f; the in-place copy must match
      if (g.size() > 1) {
        g[1] = std::numeric_limits<float>::denorm_min();
      }
      in_place.gradient_ready(l, g);
      reference.gradient_ready(l, g);
    }
    in_place.finish();
    reference.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      REQUIRE(same_bits(in_place.averaged(l), reference.averaged(l)));
      REQUIRE(std::signbit(in_place.averaged(l)[0]) == false);
      CHECK(in_place.last_stats().layers[l].k_selected == sizes[l]);
      CHECK(in_place.last_stats().layers[l].numel == sizes[l]);
    }
    CHECK(in_place.last_stats().selected == reference.last_stats().selected);
  }
}

TEST_CASE("in-place dense path: the last averages stay readable until the group completes again",
          "[pipeline]") {
  loopback_exchange loopback;
  // one group of layers 0 and 1 (backward positions 3..5 are forward 0..1)
  const std::vector<std::size_t> two{8, 4};
  pipeline<dense, loopback_exchange> p(two, fixed_grouping{schedule::single(2)}, dense(), loopback);
  REQUIRE(p.in_place());
  const std::vector<float> first0(8, 1.5f), first1(4, -2.0f), next0(8, 7.0f);
  p.gradient_ready(0, first0);
  p.gradient_ready(1, first1);
  p.finish();
  // the next iteration has reported one layer of the group: the group has not completed
  p.gradient_ready(0, next0);
  CHECK(same_bits(p.averaged(0), first0));
  CHECK(same_bits(p.averaged(1), first1));
  p.gradient_ready(1, first1);
  p.finish();
  CHECK(same_bits(p.averaged(0), next0));
}

} // namespace pipeline_pipeline_test
