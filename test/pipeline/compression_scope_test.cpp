// SPDX-License-Identifier: Apache-2.0
// gradcomp::compression_scope (pipeline/compression_scope.hpp): per_layer is the pipeline's
// default; per_group compresses each group's concatenated layers with one error feedback (k =
// density x the group's size, bit for bit as that reference), so its selection depends on the
// grouping; per_group refuses momentum correction its compressor cannot fuse.
#include <gradcomp/compressor/error_feedback.hpp>
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/compressor/reused_threshold.hpp>
#include <gradcomp/pipeline/compression_scope.hpp>
#include <gradcomp/pipeline/loopback.hpp>
#include <gradcomp/pipeline/pipeline.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_compression_scope_test {

using gradcomp::test::same_bits;

using namespace gradcomp;
using pipeline_policy::fixed_grouping;

TEST_CASE("compression_scope: per_layer is the pipeline's default", "[pipeline][scope]") {
  loopback_exchange t;
  const pipeline<exact_top_k, loopback_exchange> p({4, 2}, fixed_grouping{}, exact_top_k(0.5), t);
  CHECK(p.scope() == compression_scope::per_layer);
}

namespace {

const std::vector<std::size_t>& sizes = test::five_layer_sizes;

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::five_layer_gradient(layer, iteration, 1000);
}

std::vector<std::size_t> hook_order(int iteration, int mode) {
  return test::hook_order(sizes.size(), iteration, mode, 7, 1);
}

// Per-group compression: the reference compresses each group's concatenated gradient (forward
// order) with one error feedback of the group's size; the averages, residuals and velocities
// must equal it bit for bit, and the per-layer counts must add up to the group's.
template <class Compressor>
void check_per_group(const Compressor& prototype,
                     const schedule::grouping& groups,
                     int mode,
                     momentum_correction mc = {}) {
  loopback_exchange transport;
  pipeline<Compressor, loopback_exchange> p(sizes, fixed_grouping{groups}, prototype, transport, mc,
                                            compression_scope::per_group);
  REQUIRE(p.scope() == compression_scope::per_group);
  // forward-order layer ranges of every group
  struct group_ref {
    std::size_t first, last;
    error_feedback<Compressor> feedback;
  };
  std::vector<group_ref> reference;
  for (const auto& g : groups) {
    const std::size_t first = schedule::forward_index(g.end - 1, sizes.size());
    const std::size_t last = schedule::forward_index(g.begin, sizes.size());
    std::size_t n = 0;
    for (std::size_t l = first; l <= last; ++l) {
      n += sizes[l];
    }
    reference.push_back({first, last, error_feedback<Compressor>(n, prototype, mc)});
  }
  sparse_message m;
  for (int it = 0; it < 6; ++it) {
    for (const std::size_t l : hook_order(it, mode)) {
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    std::size_t selected = 0;
    for (std::size_t gi = 0; gi < reference.size(); ++gi) {
      group_ref& ref = reference[gi];
      std::vector<float> concatenated;
      for (std::size_t l = ref.first; l <= ref.last; ++l) {
        const auto g = gradient(l, it);
        concatenated.insert(concatenated.end(), g.begin(), g.end());
      }
      const selection_stats s = ref.feedback.compress(concatenated, m);
      selected += s.k_selected;
      CHECK(p.last_stats().groups.at(gi).k_selected == s.k_selected);
      CHECK(p.last_stats().groups.at(gi).k_target == s.k_target);
      std::vector<float> expected(concatenated.size());
      decompress(m, expected);
      std::size_t offset = 0;
      std::size_t layer_selected = 0;
      for (std::size_t l = ref.first; l <= ref.last; ++l) {
        CAPTURE(it, gi, l);
        const auto part = [&](std::span<const float> v) { return v.subspan(offset, sizes[l]); };
        REQUIRE(same_bits(p.averaged(l), part(expected)));
        REQUIRE(same_bits(p.residual(l), part(ref.feedback.residual())));
        if (mc.momentum > 0.0) {
          REQUIRE(same_bits(p.velocity(l), part(ref.feedback.velocity())));
        } else {
          REQUIRE(p.velocity(l).empty());
        }
        layer_selected += p.last_stats().layers[l].k_selected;
        offset += sizes[l];
      }
      CHECK(layer_selected == s.k_selected);
    }
    CHECK(p.last_stats().selected == selected);
  }
  CHECK_THROWS_AS(p.feedback(0), std::out_of_range);
}

} // namespace

TEST_CASE("pipeline per-group compression equals error feedback on each group", "[pipeline]") {
  const int mode = GENERATE(0, 1, 2);
  const auto groups = GENERATE(schedule::per_layer(5), schedule::single(5),
                               schedule::grouping{{0, 2}, {2, 3}, {3, 5}});
  CAPTURE(mode, groups.size());
  SECTION("exact top-k") {
    check_per_group(exact_top_k(exact_top_k_options{.density = 0.1}), groups, mode);
  }
  SECTION("reused threshold (per-group compressor state)") {
    check_per_group(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}),
                    groups, mode);
  }
  SECTION("reused threshold with DGC momentum correction") {
    check_per_group(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}),
                    groups, mode, momentum_correction{0.9});
  }
}

TEST_CASE("pipeline per-group selection differs from per-layer on skewed layers", "[pipeline]") {
  // layer 2 (1000 elements) gets gradients 100x larger: one top-k over the single group sends
  // (almost) only its elements, while per-layer top-k sends k of every layer
  loopback_exchange t1;
  loopback_exchange t2;
  const auto g = schedule::single(5);
  pipeline<exact_top_k, loopback_exchange> per_layer(sizes, fixed_grouping{g}, exact_top_k(0.1),
                                                     t1);
  pipeline<exact_top_k, loopback_exchange> per_group(sizes, fixed_grouping{g}, exact_top_k(0.1), t2,
                                                     {}, compression_scope::per_group);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    auto x = gradient(l, 0);
    if (l == 2) {
      for (float& v : x) {
        v *= 100.0f;
      }
    }
    per_layer.gradient_ready(l, x);
    per_group.gradient_ready(l, x);
  }
  per_layer.finish();
  per_group.finish();
  const auto& a = per_layer.last_stats();
  const auto& b = per_group.last_stats();
  CHECK(a.groups.empty());
  REQUIRE(b.groups.size() == 1);
  CHECK(b.groups[0].k_target == k_for_density(1382, 0.1));
  CHECK(b.layers[2].k_selected == b.groups[0].k_selected); // all of k went to the large layer
  CHECK(a.layers[0].k_selected == k_for_density(300, 0.1));
  CHECK(b.layers[0].k_selected == 0);
}

TEST_CASE("pipeline per-group refuses momentum correction its compressor cannot fuse",
          "[pipeline]") {
  struct plain {
    using compressor_concept = compressor_tag;
    selection_stats compress(std::span<const float>, sparse_message&) { return {}; }
    selection_stats compress_accumulate(std::span<float>, std::span<const float>, sparse_message&) {
      return {};
    }
  };
  loopback_exchange t;
  using pipe = pipeline<plain, loopback_exchange>;
  CHECK_THROWS_WITH(pipe(sizes, fixed_grouping{schedule::single(5)}, plain{}, t,
                         momentum_correction{0.5}, compression_scope::per_group),
                    Catch::Contains("momentum_compressor"));
}

} // namespace pipeline_compression_scope_test
