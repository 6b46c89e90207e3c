// SPDX-License-Identifier: Apache-2.0
// residual_monitor (compressor/residual_monitor.hpp) against a direct reference: error feedback
// with exact top-k (with and without DGC momentum correction, and with a global selection that
// gives unselected values back), every iteration's message read independently: an element's
// staleness when sent = this iteration - the iteration of its oldest unsent contribution; held
// elements' ages = iterations since that contribution, inclusive; norms by direct sums.
#include <gradcomp/gradcomp.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"

namespace compressor_residual_monitor_test {

using namespace gradcomp;
using Catch::Matchers::Contains;

namespace {

struct reference {
  std::vector<std::int64_t> pending; // iteration of the oldest unsent contribution, -1: none
  explicit reference(std::size_t n) : pending(n, -1) {}
};

// T iterations of error feedback on n elements; `keep_every`: with a global selection, the
// sent values of every index i with i % keep_every != 0 go back (0: no global selection).
void check_against_reference(float momentum, std::uint32_t keep_every) {
  const std::size_t n = 3000;
  const int iterations = 40;
  error_feedback<exact_top_k> ef(n, exact_top_k({.density = 0.02}), momentum_correction{momentum});
  residual_monitor monitor(n);
  reference ref(n);
  std::uint64_t total_sent = 0;
  std::uint32_t max_seen = 0;
  for (int t = 0; t < iterations; ++t) {
    std::vector<float> g = test::make_values(t % 3 == 0 ? test::distribution::with_zeros
                                                        : test::distribution::heavy_tailed,
                                             n, 100 + static_cast<std::uint64_t>(t));
    sparse_message m;
    ef.compress(g, m);
    std::vector<bool> sent(n, false);
    for (const std::uint32_t i : m.indices) {
      sent[i] = true;
    }
    if (keep_every > 0) {
      std::vector<std::uint32_t> selected;
      for (const std::uint32_t i : m.indices) {
        if (i % keep_every == 0) {
          selected.push_back(i);
        } else {
          sent[i] = false;
        }
      }
      ef.return_unselected(m, selected);
    }
    // the reference, from the gradient and the (globally) kept message only
    residual_observation want;
    for (std::size_t i = 0; i < n; ++i) {
      if (g[i] != 0.0f && ref.pending[i] < 0) {
        ref.pending[i] = t;
      }
      if (momentum > 0 && ref.pending[i] < 0 && ef.residual()[i] != 0.0f) {
        ref.pending[i] = t; // the velocity alone fed the residual this iteration
      }
      if (sent[i] && ref.pending[i] >= 0) {
        const auto s = static_cast<std::uint32_t>(t - ref.pending[i]);
        ++want.sent;
        want.sent_staleness_sum += s;
        want.sent_staleness_max = std::max(want.sent_staleness_max, s);
        ref.pending[i] = -1;
      } else if (!sent[i] && ref.pending[i] >= 0) {
        ++want.held;
        want.held_age_sum += static_cast<std::uint64_t>(t - ref.pending[i] + 1);
      }
    }
    const std::vector<float> r(ef.residual().begin(), ef.residual().end());
    const residual_observation got = monitor.observe(r, g);
    INFO("iteration " << t << ", momentum " << momentum << ", keep_every " << keep_every);
    CHECK(got.sent == want.sent);
    CHECK(got.sent_staleness_sum == want.sent_staleness_sum);
    CHECK(got.sent_staleness_max == want.sent_staleness_max);
    CHECK(got.held == want.held);
    CHECK(got.held_age_sum == want.held_age_sum);
    CHECK(got.gradient_norm == test::direct_norm(g));
    CHECK(got.residual_norm == test::direct_norm(r));
    total_sent += got.sent;
    max_seen = std::max(max_seen, got.sent_staleness_max);
  }
  // the test sees stale values at all (error feedback held some for several iterations)
  CHECK(total_sent > 0);
  CHECK(max_seen >= 5);
  const residual_monitor::summary s = monitor.current_summary();
  CHECK(s.iterations == static_cast<std::uint64_t>(iterations));
  CHECK(s.total.sent == total_sent);
  CHECK(s.total.sent_staleness_max == max_seen);
  monitor.reset_summary();
  CHECK(monitor.current_summary().iterations == 0);
  CHECK(monitor.current_summary().total.sent == 0);
}

} // namespace

TEST_CASE("residual_monitor: staleness and held ages equal the message-based reference",
          "[residual_monitor]") {
  check_against_reference(0.0f, 0);
}

TEST_CASE("residual_monitor: with DGC momentum correction (factor masking)", "[residual_monitor]") {
  check_against_reference(0.9f, 0);
}

TEST_CASE("residual_monitor: values a global selection gives back stay held",
          "[residual_monitor]") {
  check_against_reference(0.0f, 3);
}

TEST_CASE("residual_monitor: hand-made sequence and bad lengths", "[residual_monitor]") {
  residual_monitor m(3);
  // iteration 0: element 0 sent at once, element 1 held, element 2 nothing
  residual_observation o =
      m.observe(std::vector<float>{0.0f, 2.0f, 0.0f}, std::vector<float>{3.0f, 2.0f, 0.0f});
  CHECK(o.sent == 1);
  CHECK(o.sent_staleness_sum == 0);
  CHECK(o.held == 1);
  CHECK(o.held_age_sum == 1);
  CHECK(o.gradient_norm == Approx(std::sqrt(13.0)));
  CHECK(o.residual_to_gradient() == Approx(2.0 / std::sqrt(13.0)));
  // iteration 1: element 1 still held (age 2)
  o = m.observe(std::vector<float>{0.0f, 3.0f, 0.0f}, std::vector<float>{0.0f, 1.0f, 0.0f});
  CHECK(o.sent == 0);
  CHECK(o.held_age_sum == 2);
  CHECK(m.age(1) == 2);
  // iteration 2: element 1 sent after waiting 2 iterations, without a gradient of its own
  o = m.observe(std::vector<float>{0.0f, 0.0f, 0.0f}, std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(o.sent == 1);
  CHECK(o.sent_staleness_max == 2);
  CHECK(o.mean_sent_staleness() == 2.0);
  CHECK(o.residual_to_gradient() == 0.0);
  CHECK(m.age(1) == 0);
  CHECK_THROWS_WITH(m.observe(std::vector<float>(2), std::vector<float>(3)),
                    Contains("residual of 2 and gradient of 3 elements for a layer of 3"));
}

} // namespace compressor_residual_monitor_test
