// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline_iteration_stats (pipeline/iteration_stats.hpp): zero when nothing ran; after
// one iteration the elements, the selected count and the transport's bytes summed over the
// groups, one entry per layer (and per group, in sending order, with per-group scope).
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/pipeline/iteration_stats.hpp>
#include <gradcomp/pipeline/pipeline.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/schedule/grouping.hpp>

#include <cstddef>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace pipeline_iteration_stats_test {

using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

// One process (the average is the message); reports 8 bytes per sent value and 5 received.
struct counting_exchange {
  using transport_concept = transport_tag;
  std::size_t sent = 0;
  void start(const sparse_message& m, std::span<float> out) {
    decompress(m, out);
    sent = 8 * m.nnz();
  }
  bool test() { return true; }
  void wait() {}
  [[nodiscard]] std::size_t bytes_sent() const { return sent; }
  [[nodiscard]] std::size_t bytes_received() const { return 5; }
};

} // namespace

TEST_CASE("pipeline_iteration_stats: zero before an iteration", "[pipeline][stats]") {
  const pipeline_iteration_stats s;
  CHECK(s.compress_seconds == 0.0);
  CHECK(s.communicate_seconds == 0.0);
  CHECK(s.communicate_cpu_seconds == 0.0);
  CHECK(s.finish_wait_seconds == 0.0);
  CHECK_FALSE(s.bytes_reported);
  CHECK(s.bytes_sent + s.bytes_received + s.numel + s.selected + s.nonfinite + s.unselected == 0);
  CHECK(s.layers.empty());
  CHECK(s.groups.empty());
}

TEST_CASE("pipeline_iteration_stats: one iteration's counts, per layer and per group",
          "[pipeline][stats]") {
  // layers of 300, 17 and 1000 elements at density 0.1: k = 30, 2 and 100. Two groups in
  // sending (backward) order: layer 2 alone (k 100), then layers 0 and 1 (317 elements)
  const std::vector<std::size_t> sizes{300, 17, 1000};
  const fixed_grouping groups{schedule::grouping{{0, 1}, {1, 3}}};
  const bool per_group = GENERATE(false, true);
  CAPTURE(per_group);
  counting_exchange t;
  pipeline<exact_top_k, counting_exchange> p(sizes, groups, exact_top_k(0.1), t, {},
                                             per_group ? compression_scope::per_group
                                                       : compression_scope::per_layer);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    p.gradient_ready(l, std::vector<float>(sizes[l], 1.0f + static_cast<float>(l)));
  }
  p.finish();
  const pipeline_iteration_stats& s = p.last_stats();
  CHECK(s.numel == 1317);
  CHECK(s.selected == 132); // 30 + 2 + 100, or 32 (ceil of 31.7) + 100 per group
  CHECK(s.bytes_reported);
  CHECK(s.bytes_sent == 8 * 132);
  CHECK(s.bytes_received == 2 * 5);
  CHECK(s.nonfinite == 0);
  CHECK(s.unselected == 0);
  CHECK(s.compress_seconds >= 0.0);
  CHECK(s.communicate_seconds >= 0.0);
  CHECK(s.finish_wait_seconds >= 0.0);
  REQUIRE(s.layers.size() == 3);
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    CHECK(s.layers[l].numel == sizes[l]);
  }
  if (per_group) {
    REQUIRE(s.groups.size() == 2);
    CHECK(s.groups[0].numel == 1000);
    CHECK(s.groups[0].k_target == 100);
    CHECK(s.groups[1].numel == 317);
    CHECK(s.groups[1].k_target == 32);
    CHECK(s.layers[2].k_selected == 100);
    CHECK(s.layers[0].k_selected + s.layers[1].k_selected == 32);
  } else {
    CHECK(s.groups.empty());
    CHECK(s.layers[0].k_selected == 30);
    CHECK(s.layers[1].k_selected == 2);
    CHECK(s.layers[2].k_selected == 100);
  }
}

} // namespace pipeline_iteration_stats_test
