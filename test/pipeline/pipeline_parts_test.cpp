// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline with a multi-part transport (several messages per rank: S3's redundant
// placement): the averages equal compressing every (part, layer) with its own error feedback,
// or every (part, group) per group, and averaging the parts in part order, bit for bit, over
// iterations, groupings and any interleaving of the parts' hooks; misuse names the part.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_parts_test {

using gradcomp::test::error_of;
using gradcomp::test::same_bits;

using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

const std::vector<std::size_t>& sizes = test::five_layer_sizes;
constexpr std::size_t parts = 3;

std::vector<float> gradient(std::size_t part, std::size_t layer, int iteration) {
  return test::make_values(test::distribution::normal, sizes[layer],
                           100000 * part + 1000 * static_cast<std::uint64_t>(iteration) + layer);
}

// The in-process multi-part transport: the mean of its parts, summed in part order
// (decompress part 0, add the others, divide by the part count).
struct part_mean_exchange {
  using transport_concept = transport_tag;
  std::size_t count = parts;
  std::size_t calls = 0;
  [[nodiscard]] std::size_t parts_per_rank() const noexcept { return count; }
  void start(std::span<const sparse_message> messages, std::span<float> average) {
    if (messages.size() != count) { // runs on the communication thread: no Catch2 here
      throw std::logic_error("part_mean_exchange: wrong message count");
    }
    ++calls;
    std::vector<float> part(average.size());
    decompress(messages[0], average);
    for (std::size_t p = 1; p < messages.size(); ++p) {
      decompress(messages[p], part);
      for (std::size_t i = 0; i < part.size(); ++i) {
        average[i] += part[i];
      }
    }
    for (float& v : average) {
      v /= static_cast<float>(count);
    }
  }
  [[nodiscard]] bool test() const noexcept { return true; }
  void wait() const noexcept {}
};

// The (part, layer) reports of one iteration: 0 part by part, layers forward; 1 part by part,
// layers backward (one backward per part, as autograd delivers); 2 all pairs shuffled.
std::vector<std::pair<std::size_t, std::size_t>> report_order(int iteration, int mode) {
  std::vector<std::pair<std::size_t, std::size_t>> order;
  for (std::size_t p = 0; p < parts; ++p) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      order.emplace_back(p, mode == 1 ? sizes.size() - 1 - i : i);
    }
  }
  if (mode == 2) {
    std::mt19937 rng(static_cast<unsigned>(iteration) * 13u + 5u);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

// Forward-order layer range [first, last] of every group.
std::vector<std::pair<std::size_t, std::size_t>> group_ranges(const schedule::grouping& groups) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (const auto& g : groups) {
    ranges.emplace_back(schedule::forward_index(g.end - 1, sizes.size()),
                        schedule::forward_index(g.begin, sizes.size()));
  }
  return ranges;
}

// The pipeline against an independent reference: one error feedback per (part, layer) (per
// layer scope) or per (part, group) (per group scope, over the group's concatenated gradient),
// each message decompressed, the parts summed in part order and divided by the part count.
template <class Compressor>
void check_parts(const Compressor& prototype,
                 const schedule::grouping& groups,
                 int mode,
                 compression_scope scope,
                 momentum_correction mc = {},
                 int mask_from = -1) { // iteration from which set_factor_masking(true) applies
  part_mean_exchange transport;
  pipeline<Compressor, part_mean_exchange> p(sizes, fixed_grouping{groups}, prototype, transport,
                                             mc, scope);
  REQUIRE(p.parts() == parts);
  const auto ranges = group_ranges(groups);
  const bool per_layer = scope == compression_scope::per_layer;
  // reference units: (part, layer) per layer, (part, group) per group, part-major
  std::vector<std::pair<std::size_t, std::size_t>> units; // forward layer range of each unit
  for (std::size_t part = 0; part < parts; ++part) {
    if (per_layer) {
      for (std::size_t l = 0; l < sizes.size(); ++l) {
        units.emplace_back(l, l);
      }
    } else {
      units.insert(units.end(), ranges.begin(), ranges.end());
    }
  }
  std::vector<error_feedback<Compressor>> reference;
  for (const auto& [first, last] : units) {
    reference.emplace_back(std::accumulate(sizes.begin() + static_cast<std::ptrdiff_t>(first),
                                           sizes.begin() + static_cast<std::ptrdiff_t>(last) + 1,
                                           std::size_t{0}),
                           prototype, mc);
  }
  const std::size_t per_part = units.size() / parts;
  const std::size_t model = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  sparse_message m;
  for (int it = 0; it < 5; ++it) {
    if (it == mask_from) {
      p.set_factor_masking(true);
      for (auto& f : reference) {
        f.set_factor_masking(true);
      }
    }
    for (const auto& [part, layer] : report_order(it, mode)) {
      p.gradient_ready(part, layer, gradient(part, layer, it));
    }
    p.finish();
    CHECK(transport.calls == groups.size() * static_cast<std::size_t>(it + 1));
    // expected averages per layer; per-unit residuals
    std::vector<std::vector<float>> expected(sizes.size());
    std::size_t selected = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const std::size_t part = u / per_part;
      const auto [first, last] = units[u];
      std::vector<float> g;
      for (std::size_t l = first; l <= last; ++l) {
        const auto v = gradient(part, l, it);
        g.insert(g.end(), v.begin(), v.end());
      }
      selected += reference[u].compress(g, m).k_selected;
      std::vector<float> dense(g.size());
      decompress(m, dense);
      std::size_t offset = 0;
      for (std::size_t l = first; l <= last; ++l) {
        CAPTURE(it, part, l);
        const auto slice = [&](std::span<const float> v) { return v.subspan(offset, sizes[l]); };
        if (part == 0) {
          expected[l].assign(slice(dense).begin(), slice(dense).end());
        } else {
          for (std::size_t i = 0; i < sizes[l]; ++i) {
            expected[l][i] += dense[offset + i];
          }
        }
        REQUIRE(same_bits(p.residual(part, l), slice(reference[u].residual())));
        if (mc.momentum > 0.0) {
          REQUIRE(same_bits(p.velocity(part, l), slice(reference[u].velocity())));
        } else {
          REQUIRE(p.velocity(part, l).empty());
        }
        offset += sizes[l];
      }
    }
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      for (float& v : expected[l]) {
        v /= static_cast<float>(parts);
      }
      REQUIRE(same_bits(p.averaged(l), expected[l]));
    }
    const auto& stats = p.last_stats();
    CHECK(stats.selected == selected);
    CHECK(stats.numel == model * parts);
    CHECK(stats.layers.size() == parts * sizes.size());
    CHECK(stats.groups.size() == (per_layer ? 0 : parts * groups.size()));
  }
}

} // namespace

static_assert(pipeline_policy::multi_part_transport<part_mean_exchange>);
static_assert(!pipeline_policy::transport<part_mean_exchange>);
static_assert(pipeline_policy::pipeline_transport<part_mean_exchange>);
static_assert(pipeline_policy::pipeline_transport<loopback_exchange>);
static_assert(!pipeline_policy::multi_part_transport<loopback_exchange>);

TEST_CASE("multi-part pipeline equals per-part error feedback averaged over the parts",
          "[pipeline][parts]") {
  const int mode = GENERATE(0, 1, 2);
  const auto groups = GENERATE(schedule::per_layer(5), schedule::single(5),
                               schedule::grouping{{0, 2}, {2, 3}, {3, 5}});
  const auto scope = GENERATE(compression_scope::per_layer, compression_scope::per_group);
  CAPTURE(mode, groups.size(), scope == compression_scope::per_layer);
  SECTION("exact top-k") {
    check_parts(exact_top_k(exact_top_k_options{.density = 0.1}), groups, mode, scope);
  }
  SECTION("reused threshold (compressor state per part)") {
    check_parts(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups,
                mode, scope);
  }
  SECTION("reused threshold with DGC momentum correction (velocity per part)") {
    check_parts(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups,
                mode, scope, momentum_correction{0.9});
  }
  SECTION("reused threshold with momentum correction, no factor masking (velocity kept)") {
    check_parts(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups,
                mode, scope, momentum_correction{.momentum = 0.9, .factor_masking = false});
  }
  SECTION("velocity kept, then factor masking from iteration 2 (set_factor_masking)") {
    check_parts(reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3}), groups,
                mode, scope, momentum_correction{.momentum = 0.9, .factor_masking = false}, 2);
  }
  SECTION("dense fp32") {
    check_parts(dense(), groups, mode, scope);
  }
}

TEST_CASE("multi-part pipeline reports misuse naming the part", "[pipeline][parts]") {
  part_mean_exchange t;
  pipeline<exact_top_k, part_mean_exchange> p(sizes, fixed_grouping{}, exact_top_k(0.1), t);
  CHECK(p.parts() == parts);

  const std::string no_part = error_of([&] { p.gradient_ready(0, gradient(0, 0, 0)); });
  CHECK(no_part.find("3 parts per rank") != std::string::npos);
  CHECK(no_part.find("gradient_ready(part, layer, grad)") != std::string::npos);
  CHECK(error_of([&] {
          p.gradient_ready(3, 0, gradient(0, 0, 0));
        }).find("part 3 is out of range (3 parts per rank)") != std::string::npos);

  p.gradient_ready(1, 2, gradient(1, 2, 0));
  CHECK(error_of([&] {
          p.gradient_ready(1, 2, gradient(1, 2, 0));
        }).find("layer 2 of part 1 reported twice") != std::string::npos);
  CHECK_NOTHROW(p.gradient_ready(0, 2, gradient(0, 2, 0))); // the same layer of another part
  const std::vector<float> wrong(5, 1.0f);
  CHECK(error_of([&] {
          p.gradient_ready(2, 0, wrong);
        }).find("layer 0 of part 2: gradient has 5") != std::string::npos);
  // begin_backward() may be called before each part's backward
  CHECK_NOTHROW(p.begin_backward());

  for (std::size_t part = 0; part < parts; ++part) {
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      if (l != 2 && !(part == 2 && l == 4)) {
        p.gradient_ready(part, l, gradient(part, l, 0));
      }
    }
  }
  // the first missing report in part-major order: layer 2 of part 2
  CHECK(error_of([&] { p.finish(); }).find("layer 2 of part 2 was never reported") !=
        std::string::npos);

  // one-part accessors refuse, the part-qualified ones answer
  CHECK(error_of([&] { (void)p.residual(0); }).find("use residual(part, layer)") !=
        std::string::npos);
  CHECK(error_of([&] { (void)p.velocity(0); }).find("use velocity(part, layer)") !=
        std::string::npos);
  CHECK_THROWS_AS(p.feedback(0), std::out_of_range);
  CHECK_THROWS_AS(p.feedback(3, 0), std::out_of_range);
  CHECK(p.residual(2, 4).size() == sizes[4]);
  CHECK(error_of([&] { (void)p.residual(3, 0); }).find("part 3 is out of range") !=
        std::string::npos);

  // a complete iteration then works
  for (std::size_t part = 0; part < parts; ++part) {
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      p.gradient_ready(part, l, gradient(part, l, 1));
    }
  }
  CHECK_NOTHROW(p.finish());
}

TEST_CASE("multi-part pipeline refuses a transport of no parts", "[pipeline][parts]") {
  part_mean_exchange t;
  t.count = 0;
  CHECK(error_of([&] {
          pipeline<dense, part_mean_exchange> p(sizes, fixed_grouping{}, dense(), t);
        }).find("the transport takes 0 parts per rank") != std::string::npos);
}

TEST_CASE("multi-part pipeline with one part equals the one-message pipeline",
          "[pipeline][parts]") {
  part_mean_exchange one;
  one.count = 1;
  loopback_exchange loopback;
  const schedule::grouping groups{{0, 2}, {2, 5}};
  pipeline<exact_top_k, part_mean_exchange> a(sizes, fixed_grouping{groups}, exact_top_k(0.1), one);
  pipeline<exact_top_k, loopback_exchange> b(sizes, fixed_grouping{groups}, exact_top_k(0.1),
                                             loopback);
  for (int it = 0; it < 4; ++it) {
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      a.gradient_ready(l, gradient(0, l, it)); // one part: the two-argument form works
      b.gradient_ready(l, gradient(0, l, it));
    }
    a.finish();
    b.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      REQUIRE(same_bits(a.averaged(l), b.averaged(l)));
      REQUIRE(same_bits(a.residual(l), b.residual(l)));
    }
  }
}

TEST_CASE("multi-part pipeline resumes from its checkpoint bit for bit",
          "[pipeline][parts][checkpoint]") {
  const fixed_grouping groups{schedule::grouping{{0, 2}, {2, 5}}};
  const auto run = [&](auto& p, int first, int last) {
    std::vector<float> out;
    for (int it = first; it < last; ++it) {
      for (std::size_t part = 0; part < parts; ++part) {
        for (std::size_t l = sizes.size(); l-- > 0;) {
          p.gradient_ready(part, l, gradient(part, l, it));
        }
      }
      p.finish();
      const std::vector<float> a = test::all_averages(p);
      out.insert(out.end(), a.begin(), a.end());
    }
    return out;
  };
  for (const compression_scope scope :
       {compression_scope::per_layer, compression_scope::per_group}) {
    part_mean_exchange t1, t2, t3;
    using pipe = pipeline<reused_threshold, part_mean_exchange>;
    const reused_threshold prototype({.density = 0.05, .interval = 2});
    pipe whole(sizes, groups, prototype, t1, momentum_correction{0.9}, scope);
    pipe first(sizes, groups, prototype, t2, momentum_correction{0.9}, scope);
    const std::vector<float> expected = run(whole, 0, 6);
    std::vector<float> got = run(first, 0, 3);
    pipe resumed(sizes, groups, prototype, t3, momentum_correction{0.9}, scope);
    load_state(resumed, save_state(first));
    const std::vector<float> tail = run(resumed, 3, 6);
    got.insert(got.end(), tail.begin(), tail.end());
    CHECK(same_bits(got, expected));
  }
}

} // namespace pipeline_pipeline_parts_test
