// SPDX-License-Identifier: Apache-2.0
// gradcomp::pipeline online re-planning: backward times measured from the hook
// timestamps (an injected clock makes them exact), the medians over the warm-up, one replan()
// after exactly `warmup_iterations()` finished iterations, results bit-identical to per-layer
// error feedback before, at and after the switch, and a failing replan() keeping the grouping.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_replan_test {

using gradcomp::test::same_bits;

using namespace gradcomp;
using pipeline_policy::planned_grouping;

namespace {

const std::vector<std::size_t>& sizes = test::five_layer_sizes;

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::five_layer_gradient(layer, iteration, 7000);
}

std::vector<std::size_t> hook_order(int iteration, int mode) {
  return test::hook_order(sizes.size(), iteration, mode, 13, 5);
}

using test::manual_clock;

// The fake backward time of `layer` in `iteration`: a slow first iteration (an outlier the
// median must ignore), then per-layer times with a little jitter.
std::chrono::nanoseconds fake_backward(std::size_t layer, int iteration) {
  static constexpr std::int64_t base_us[] = {2000, 300, 6000, 50, 4000};
  const std::int64_t us = base_us[layer] * (iteration == 0 ? 10 : 1) +
                          static_cast<std::int64_t>((layer * 37 + iteration * 11) % 23);
  return std::chrono::microseconds(us);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : v[mid - 1] + (v[mid] - v[mid - 1]) / 2.0;
}

planned_grouping optimal_planner(std::size_t replan_after) {
  planned_grouping planner;
  planner.strategy = schedule::strategy::optimal;
  // alpha matters: with no backward time (the initial plan) one message is best; with the
  // measured times, splitting overlaps messages with backward
  planner.model = schedule::cost_model::affine(1e-3, 1e-6);
  planner.replan_after = replan_after;
  return planner;
}

// Per-layer error feedback without the pipeline: the expected averages.
template <class Compressor>
struct reference_run {
  std::vector<error_feedback<Compressor>> feedback;
  sparse_message m;

  explicit reference_run(const Compressor& prototype) {
    for (const std::size_t n : sizes) {
      feedback.emplace_back(n, prototype);
    }
  }
  std::vector<float> expected(std::size_t layer, int iteration) {
    feedback[layer].compress(gradient(layer, iteration), m);
    std::vector<float> out(sizes[layer]);
    decompress(m, out);
    return out;
  }
};

struct output_buffers {
  std::vector<std::vector<float>> values;
  std::vector<std::span<float>> spans;
  output_buffers() {
    for (const std::size_t n : sizes) {
      values.emplace_back(n, -1.0f);
    }
    for (auto& v : values) {
      spans.emplace_back(v);
    }
  }
};

// A replanning policy with a scripted result (or failure) that counts its calls.
struct scripted_replan {
  using grouping_concept = grouping_policy_tag;
  schedule::grouping first{};
  schedule::grouping next{};
  std::size_t warmup = 2;
  bool fail = false;
  int* calls = nullptr;

  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    return first.empty() ? schedule::per_layer(numel.size()) : first;
  }
  [[nodiscard]] schedule::grouping replan(std::span<const std::size_t> numel,
                                          std::span<const double> seconds) const {
    if (calls != nullptr) {
      ++*calls;
    }
    if (fail) {
      throw std::runtime_error("planner failed");
    }
    if (seconds.size() != numel.size()) {
      return {}; // invalid: the test would see std::invalid_argument
    }
    return next;
  }
  [[nodiscard]] std::size_t warmup_iterations() const noexcept { return warmup; }
};

} // namespace

static_assert(pipeline_policy::replanning_policy<scripted_replan>);

// mode 1 reports in backward order; modes 0 (forward order) and 2 (shuffled) out of order
TEST_CASE("pipeline re-plans from the measured medians after the warm-up", "[pipeline]") {
  const int mode = GENERATE(0, 1, 2);
  const bool mark_backward = GENERATE(true, false);
  CAPTURE(mode, mark_backward);
  constexpr int warmup = 3;
  const planned_grouping planner = optimal_planner(warmup);
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange, planned_grouping, manual_clock> p(sizes, planner,
                                                                             exact_top_k(0.1), t);
  const schedule::grouping initial = planner.groups(sizes);
  REQUIRE(p.groups() == initial);
  REQUIRE_FALSE(p.replanned());
  REQUIRE(p.measured_backward_seconds().empty());

  reference_run<exact_top_k> reference(exact_top_k(0.1));
  output_buffers out;
  std::vector<std::vector<double>> samples(sizes.size());
  for (int it = 0; it < 7; ++it) {
    manual_clock::advance(std::chrono::milliseconds(3)); // forward pass, optimizer step
    if (mark_backward) {
      p.begin_backward();
    }
    const auto order = hook_order(it, mode);
    std::vector<double> ready(sizes.size()); // seconds of backward until each layer's report
    double elapsed = 0.0;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t l = order[i];
      const auto d = fake_backward(l, it);
      manual_clock::advance(d);
      p.gradient_ready(l, gradient(l, it));
      // without the mark, the first hook of an iteration is the reference: 0 s
      elapsed += i == 0 && !mark_backward ? 0.0 : std::chrono::duration<double>(d).count();
      ready[l] = elapsed;
    }
    // each layer's backward time as the planner sums them in backward order (a layer reported
    // out of order gets 0)
    const std::vector<double> times = test::backward_seconds_from_ready(ready);
    for (std::size_t l = 0; it < warmup && l < sizes.size(); ++l) {
      samples[l].push_back(times[l]);
    }
    p.finish(out.spans);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      const auto expected = reference.expected(l, it);
      REQUIRE(same_bits(p.averaged(l), expected));
      REQUIRE(same_bits(out.values[l], expected));
    }
    CAPTURE(it);
    REQUIRE(p.replanned() == (it + 1 >= warmup));
    if (it + 1 < warmup) {
      REQUIRE(p.measured_backward_seconds().empty());
      REQUIRE(p.groups() == initial);
      continue;
    }
    const auto measured = p.measured_backward_seconds();
    REQUIRE(measured.size() == sizes.size());
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(l);
      REQUIRE(measured[l] == median_of(samples[l])); // exact: the clock is the test's
    }
    const schedule::grouping replanned = planner.replan(sizes, measured);
    REQUIRE(p.groups() == replanned);
    if (mode == 0) {
      // reported in forward order, the first layer to send (the last one) is ready last: the
      // layers before it in backward order measure 0 s, so nothing can leave earlier than
      // the whole backward's end, and the plan is one group (when each layer measured its own
      // gap, the plan sent groups whose first layer was not ready yet)
      REQUIRE(replanned == schedule::single(sizes.size()));
    } else {
      // the test is only meaningful if the measured times change the plan
      REQUIRE(replanned != initial);
    }
  }
}

TEST_CASE("pipeline switches groupings without changing the averages", "[pipeline]") {
  const auto from = GENERATE(schedule::per_layer(5), schedule::single(5),
                             schedule::grouping{{0, 2}, {2, 3}, {3, 5}});
  const auto to = GENERATE(schedule::single(5), schedule::per_layer(5),
                           schedule::grouping{{0, 1}, {1, 4}, {4, 5}});
  CAPTURE(from.size(), to.size());
  const auto prototype = reused_threshold(reused_threshold_options{.density = 0.05, .interval = 3});
  int calls = 0;
  const scripted_replan policy{from, to, 2, false, &calls};
  loopback_exchange t;
  pipeline<reused_threshold, loopback_exchange, scripted_replan> p(sizes, policy, prototype, t);
  reference_run<reused_threshold> reference(prototype);
  for (int it = 0; it < 5; ++it) {
    const auto order = hook_order(it, 2);
    if (it % 2 == 0) {
      p.begin_backward();
    }
    for (const std::size_t l : order) {
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      REQUIRE(same_bits(p.averaged(l), reference.expected(l, it)));
    }
    REQUIRE(p.groups() == (it >= 1 ? to : from));
    REQUIRE(p.replanned() == (it >= 1));
    REQUIRE(calls == (it >= 1 ? 1 : 0));
  }
  // the real clock gave non-negative times, one per layer
  const auto measured = p.measured_backward_seconds();
  REQUIRE(measured.size() == sizes.size());
  CHECK(std::all_of(measured.begin(), measured.end(), [](double s) { return s >= 0.0; }));
}

TEST_CASE("pipeline measures real backward time with steady_clock", "[pipeline]") {
  // sleeps stand for backward; only lower bounds are asserted (a loaded machine only
  // lengthens the gaps)
  constexpr int warmup = 3;
  const planned_grouping planner = optimal_planner(warmup);
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange, planned_grouping> p(sizes, planner, exact_top_k(0.1), t);
  reference_run<exact_top_k> reference(exact_top_k(0.1));
  const auto sleep_before = [](std::size_t layer) {
    return std::chrono::milliseconds(layer == 2 ? 4 : layer == 0 ? 2 : 0);
  };
  for (int it = 0; it < 5; ++it) {
    p.begin_backward();
    for (const std::size_t l : hook_order(it, 1)) {
      std::this_thread::sleep_for(sleep_before(l));
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      REQUIRE(same_bits(p.averaged(l), reference.expected(l, it)));
    }
    CAPTURE(it);
    REQUIRE(p.replanned() == (it + 1 >= warmup));
    REQUIRE(p.measured_backward_seconds().empty() == (it + 1 < warmup));
  }
  const auto measured = p.measured_backward_seconds();
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    CAPTURE(l, measured[l]);
    CHECK(measured[l] >= 0.95 * std::chrono::duration<double>(sleep_before(l)).count());
    CHECK(measured[l] < 1e3);
  }
  CHECK(p.groups() == planner.replan(sizes, measured));
}

TEST_CASE("pipeline without re-planning never measures nor re-plans", "[pipeline]") {
  loopback_exchange t;
  SECTION("planned_grouping with replan_after 0") {
    const planned_grouping planner = optimal_planner(0);
    pipeline<exact_top_k, loopback_exchange, planned_grouping, manual_clock> p(sizes, planner,
                                                                               exact_top_k(0.1), t);
    for (int it = 0; it < 4; ++it) {
      p.begin_backward();
      for (const std::size_t l : hook_order(it, 1)) {
        manual_clock::advance(fake_backward(l, it));
        p.gradient_ready(l, gradient(l, it));
      }
      p.finish();
    }
    CHECK_FALSE(p.replanned());
    CHECK(p.measured_backward_seconds().empty());
    CHECK(p.groups() == planner.groups(sizes));
  }
  SECTION("fixed_grouping") {
    pipeline<exact_top_k, loopback_exchange> p(sizes, pipeline_policy::fixed_grouping{},
                                               exact_top_k(0.1), t);
    for (int it = 0; it < 4; ++it) {
      p.begin_backward();
      for (const std::size_t l : hook_order(it, 0)) {
        p.gradient_ready(l, gradient(l, it));
      }
      p.finish();
    }
    CHECK_FALSE(p.replanned());
    CHECK(p.measured_backward_seconds().empty());
    CHECK(p.groups() == schedule::per_layer(sizes.size()));
  }
}

TEST_CASE("pipeline keeps its grouping when replan fails", "[pipeline]") {
  const bool fail = GENERATE(true, false); // throws, or returns an invalid grouping
  CAPTURE(fail);
  int calls = 0;
  const schedule::grouping first{{0, 2}, {2, 5}};
  const scripted_replan policy{first, schedule::grouping{{0, 2}}, 2, fail, &calls};
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange, scripted_replan> p(sizes, policy, exact_top_k(0.2), t);
  reference_run<exact_top_k> reference(exact_top_k(0.2));
  output_buffers out;
  for (int it = 0; it < 5; ++it) {
    for (const std::size_t l : hook_order(it, 1)) {
      p.gradient_ready(l, gradient(l, it));
    }
    if (it == 1) {
      if (fail) {
        REQUIRE_THROWS_WITH(p.finish(out.spans), "planner failed");
      } else {
        REQUIRE_THROWS_AS(p.finish(out.spans), std::invalid_argument);
      }
    } else {
      REQUIRE_NOTHROW(p.finish(out.spans));
    }
    // the iteration's own results are in place, also at the failing finish()
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(it, l);
      const auto expected = reference.expected(l, it);
      REQUIRE(same_bits(p.averaged(l), expected));
      REQUIRE(same_bits(out.values[l], expected));
    }
    CHECK(p.groups() == first);
    CHECK_FALSE(p.replanned());
    CHECK(p.measured_backward_seconds().empty() == (it < 1));
    CHECK(calls == (it >= 1 ? 1 : 0)); // tried once, never again
  }
}

TEST_CASE("pipeline counts only successful iterations toward the warm-up", "[pipeline]") {
  int calls = 0;
  const scripted_replan policy{{}, schedule::single(5), 2, false, &calls};
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange, scripted_replan> p(sizes, policy, exact_top_k(0.2), t);
  // an iteration with a missing layer is dropped and does not count
  for (const std::size_t l : {0, 1, 2, 4}) {
    p.gradient_ready(l, gradient(l, 0));
  }
  CHECK_THROWS_AS(p.finish(), std::invalid_argument);
  for (int it = 1; it <= 2; ++it) {
    for (const std::size_t l : hook_order(it, 1)) {
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    CHECK(p.replanned() == (it == 2));
  }
  CHECK(calls == 1);
  CHECK(p.groups() == schedule::single(5));
}

TEST_CASE("pipeline begin_backward after a hook is refused", "[pipeline]") {
  loopback_exchange t;
  pipeline<exact_top_k, loopback_exchange, planned_grouping> p(sizes, optimal_planner(2),
                                                               exact_top_k(0.1), t);
  p.begin_backward();
  p.begin_backward(); // moves the mark: allowed
  p.gradient_ready(3, gradient(3, 0));
  CHECK_THROWS_WITH(p.begin_backward(), Catch::Contains("begin_backward() after gradient_ready()"));
  for (const std::size_t l : {0, 1, 2, 4}) {
    p.gradient_ready(l, gradient(l, 0));
  }
  CHECK_NOTHROW(p.finish());
  CHECK_NOTHROW(p.begin_backward()); // a new iteration
}

namespace {

// Iterations [first, last) of `p` with the fake backward times (layers reported backward, the
// backward marked); after each, the grouping, whether it re-planned and every average.
template <class Pipeline>
void drive(Pipeline& p,
           int first,
           int last,
           std::vector<schedule::grouping>& groupings,
           std::vector<bool>& replanned,
           std::vector<float>& averages) {
  for (int it = first; it < last; ++it) {
    manual_clock::advance(std::chrono::milliseconds(3));
    p.begin_backward();
    for (std::size_t l = sizes.size(); l-- > 0;) {
      manual_clock::advance(fake_backward(l, it));
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    groupings.push_back(p.groups());
    replanned.push_back(p.replanned());
    const std::vector<float> a = test::all_averages(p);
    averages.insert(averages.end(), a.begin(), a.end());
  }
}

} // namespace

TEST_CASE("a checkpoint taken during the re-planning warm-up resumes it",
          "[pipeline][checkpoint]") {
  // per group, so that the averages depend on the grouping too
  using pipe = pipeline<exact_top_k, loopback_exchange, planned_grouping, manual_clock>;
  constexpr int warmup = 3;
  const int stop = GENERATE(1, 2, 3, 5); // mid warm-up, at its last iteration, after re-planning
  CAPTURE(stop);
  loopback_exchange t1, t2, t3;
  pipe whole(sizes, optimal_planner(warmup), exact_top_k(0.1), t1, {},
             compression_scope::per_group);
  std::vector<schedule::grouping> g_whole, g_resumed;
  std::vector<bool> r_whole, r_resumed;
  std::vector<float> a_whole, a_resumed;
  drive(whole, 0, 7, g_whole, r_whole, a_whole);
  REQUIRE(r_whole.back());

  pipe first(sizes, optimal_planner(warmup), exact_top_k(0.1), t2, {},
             compression_scope::per_group);
  drive(first, 0, stop, g_resumed, r_resumed, a_resumed);
  const std::vector<std::byte> bytes = save_state(first);
  pipe resumed(sizes, optimal_planner(warmup), exact_top_k(0.1), t3, {},
               compression_scope::per_group);
  load_state(resumed, bytes);
  CHECK(resumed.groups() == first.groups());
  CHECK(resumed.replanned() == first.replanned());
  drive(resumed, stop, 7, g_resumed, r_resumed, a_resumed);
  // re-plans at the same iteration, from the same measurements, to the same grouping
  CHECK(g_resumed == g_whole);
  CHECK(r_resumed == r_whole);
  CHECK(std::vector<double>(resumed.measured_backward_seconds().begin(),
                            resumed.measured_backward_seconds().end()) ==
        std::vector<double>(whole.measured_backward_seconds().begin(),
                            whole.measured_backward_seconds().end()));
  REQUIRE(a_resumed.size() == a_whole.size());
  CHECK(same_bits(a_resumed, a_whole));
}

} // namespace pipeline_pipeline_replan_test
