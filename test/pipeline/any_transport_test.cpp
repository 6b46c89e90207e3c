// SPDX-License-Identifier: Apache-2.0
// gradcomp::any_transport: a pipeline over the type-erased transport gives bit for bit what the
// pipeline over the wrapped transport gives; the optional capabilities (in place, bytes) are
// the wrapped transport's, and using one it lacks is an error, not a silent no-op.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <cstddef>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_any_transport_test {

using gradcomp::test::same_bits;
using namespace gradcomp;
using pipeline_policy::fixed_grouping;

namespace {

// Averages with `partners` workers that all sent zeros: decompress, then divide by
// partners + 1. Counts 8 bytes per sent value (sent) and `received_per_call` (received).
// Without an in-place form.
struct partner_exchange {
  using transport_concept = transport_tag;
  explicit partner_exchange(float partners, std::size_t received_per_call)
      : divisor(partners + 1.0f), received(received_per_call) {}
  void start(const sparse_message& m, std::span<float> out) {
    decompress(m, out);
    for (float& v : out) {
      v /= divisor;
    }
    sent = m.values.size() * 8;
    ++calls;
  }
  bool test() { return true; }
  void wait() {}
  [[nodiscard]] std::size_t bytes_sent() const { return sent; }
  [[nodiscard]] std::size_t bytes_received() const { return received; }
  float divisor;
  std::size_t received;
  std::size_t sent = 0;
  std::size_t calls = 0;
};

// The same without byte counters.
struct uncounted_exchange {
  using transport_concept = transport_tag;
  void start(const sparse_message& m, std::span<float> out) { decompress(m, out); }
  bool test() { return true; }
  void wait() {}
};

const std::vector<std::size_t> sizes = {300, 7, 1000, 64};

std::vector<std::vector<float>> gradients(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> g;
  for (const std::size_t n : sizes) {
    std::vector<float> layer(n);
    for (float& v : layer) {
      v = dist(rng);
    }
    g.push_back(std::move(layer));
  }
  return g;
}

// Three iterations of `p` (layers reported backward); every layer's averages, concatenated.
template <class Pipeline>
std::vector<float> run(Pipeline& p) {
  return test::run_iterations(
      p, 0, 3, [](std::size_t l, int it) { return gradients(11 + static_cast<unsigned>(it))[l]; });
}

} // namespace

TEST_CASE("any_transport: a pipeline over it equals the pipeline over the wrapped transport",
          "[any_transport][pipeline]") {
  const fixed_grouping groups{schedule::grouping{{0, 2}, {2, 4}}};
  partner_exchange direct(3.0f, 40);
  pipeline<exact_top_k, partner_exchange> reference(sizes, groups, exact_top_k(0.05), direct);
  any_transport erased = any_transport::make<partner_exchange>(3.0f, 40);
  pipeline<exact_top_k, any_transport> through(sizes, groups, exact_top_k(0.05), erased);
  const std::vector<float> expected = run(reference);
  const std::vector<float> got = run(through);
  REQUIRE(got.size() == expected.size());
  CHECK(same_bits(got, expected));
  // the wrapped transport's byte counters reach the pipeline's statistics
  CHECK(through.last_stats().bytes_reported);
  CHECK(through.last_stats().bytes_sent == reference.last_stats().bytes_sent);
  CHECK(through.last_stats().bytes_received == 2 * 40); // two groups
  CHECK(erased.counts_bytes());
}

TEST_CASE("any_transport: the in-place path only where the wrapped transport has it",
          "[any_transport][pipeline]") {
  const fixed_grouping groups{schedule::grouping{{0, 4}}};
  any_transport in_place = any_transport::make<loopback_exchange>();
  CHECK(in_place.accepts_in_place());
  pipeline<dense, any_transport> fast(sizes, groups, dense(), in_place);
  CHECK(fast.in_place());
  loopback_exchange loopback;
  pipeline<dense, loopback_exchange> reference(sizes, groups, dense(), loopback);
  CHECK(same_bits(run(fast), run(reference)));

  any_transport messages = any_transport::make<uncounted_exchange>();
  CHECK_FALSE(messages.accepts_in_place());
  std::vector<float> values(4, 1.0f);
  CHECK_THROWS_AS(messages.start_in_place(values), std::logic_error);
  pipeline<dense, any_transport> slow(sizes, groups, dense(), messages);
  CHECK_FALSE(slow.in_place());
  CHECK(same_bits(run(slow), run(reference)));
  // no counters: reported as 0, and counts_bytes() says so, as the pipeline's statistics do
  CHECK_FALSE(messages.counts_bytes());
  CHECK_FALSE(slow.last_stats().bytes_reported);
  CHECK(fast.last_stats().bytes_reported); // loopback counts (0 bytes: one process)
  CHECK(messages.bytes_sent() == 0);
  CHECK(messages.bytes_received() == 0);
}

TEST_CASE("any_transport: a moved-from object refuses to be used", "[any_transport]") {
  any_transport a = any_transport::make<loopback_exchange>();
  any_transport b = std::move(a);
  CHECK(b.test());
  CHECK_THROWS_AS(a.wait(), std::logic_error); // NOLINT(bugprone-use-after-move): tested
}

} // namespace pipeline_any_transport_test
