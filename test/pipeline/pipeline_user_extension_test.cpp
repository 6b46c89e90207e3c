// SPDX-License-Identifier: Apache-2.0
// A user-defined compressor (a fixed absolute threshold on gradcomp::compressor_base), a
// user-defined in-process transport (W simulated workers that exchange wire-encoded messages
// through a shared hub, nonblocking) and a user-defined grouping policy (forward pairs of
// layers) pushed through W gradcomp::pipelines: several layers, merged groups, several
// iterations. The reference recomputes error feedback and the average in
// one process without the library's compressors, messages or pipeline: residuals bit for bit,
// averages to float rounding, selected counts and wire bytes exactly.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/generators.hpp"
#include "../common/same_bits.hpp"

namespace pipeline_pipeline_user_extension_test {

using namespace gradcomp;

namespace {

// ---- the user's compressor ------------------------------------------------------------------

struct fixed_threshold_options {
  float threshold = 1.0f;               // sends every element with |value| >= threshold
  value_type values = value_type::fp32; // required by compressor_base
  unsigned threads = 1;                 // required by compressor_base
};

// Sends every element whose accumulated magnitude reaches the threshold. No density: target_k
// is overridden (the count depends on the values; 0 = no target). O(n), one pass.
class fixed_threshold : public compressor_base<fixed_threshold, fixed_threshold_options> {
public:
  // compressor_base checks what it knows (values, threads, a density); the rest is ours
  explicit fixed_threshold(options o) : compressor_base(o) {
    if (!(std::isfinite(o.threshold) && o.threshold >= 0.0f)) {
      throw std::invalid_argument("fixed_threshold: threshold " + std::to_string(o.threshold) +
                                  " is not a finite value >= 0");
    }
  }

  [[nodiscard]] std::size_t target_k(std::size_t) const noexcept { return 0; }

  template <class Source>
  void run(const Source& src, std::size_t n, selection_stats& stats, sparse_message& out) {
    src.materialize(0, n);
    const float* const v = src.materialized();
    for (std::size_t i = 0; i < n; ++i) {
      if (std::abs(v[i]) >= options_.threshold) {
        out.indices.push_back(static_cast<std::uint32_t>(i));
        out.values.push_back(v[i]);
      }
    }
    stats.threshold = options_.threshold;
  }
};

static_assert(compressor<fixed_threshold> && momentum_compressor<fixed_threshold>);
static_assert(!density_compressor<fixed_threshold>);

// ---- the user's transport -------------------------------------------------------------------

// Where the workers' encoded messages meet: operation `op` of every worker is one round.
class exchange_hub {
public:
  explicit exchange_hub(std::size_t workers) : workers_(workers) {}

  void post(std::uint64_t op, std::size_t rank, std::vector<std::byte> wire) {
    const std::lock_guard lock(mutex_);
    round& r = rounds_[op];
    r.wires.resize(workers_);
    r.wires[rank] = std::move(wire);
    ++r.posted;
    changed_.notify_all();
  }

  // Copies every worker's wire of round `op` into `wires` once all have posted (waiting for
  // that if `block`); false if not all have posted and !block. The last reader frees the round.
  bool collect(std::uint64_t op, bool block, std::vector<std::vector<std::byte>>& wires) {
    std::unique_lock lock(mutex_);
    const auto complete = [&] { return rounds_[op].posted == workers_; };
    if (block) {
      changed_.wait(lock, complete);
    } else if (!complete()) {
      return false;
    }
    round& r = rounds_[op];
    wires = r.wires;
    if (++r.collected == workers_) {
      rounds_.erase(op);
    }
    return true;
  }

  [[nodiscard]] std::size_t workers() const noexcept { return workers_; }

private:
  struct round {
    std::vector<std::vector<std::byte>> wires;
    std::size_t posted = 0;
    std::size_t collected = 0;
  };
  std::size_t workers_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, round> rounds_;
};

// One worker's transport: start() encodes the message (wire format, u32 indices) and posts it;
// completion decodes every worker's message and averages them in rank order, so every worker
// gets bit-identical averages. Counts the wire bytes it posted and the others' it read.
class hub_exchange {
public:
  using transport_concept = transport_tag; // opts in: start() leaves the average
  hub_exchange(exchange_hub& hub, std::size_t rank) : hub_(&hub), rank_(rank) {}

  void start(const sparse_message& m, std::span<float> average) {
    if (pending_) {
      throw std::logic_error("hub_exchange: an operation is already in flight");
    }
    if (average.size() != m.dense_length_elements) {
      throw std::invalid_argument("hub_exchange: output length differs from the message's");
    }
    std::vector<std::byte> wire = encode(m, index_encoding::u32);
    bytes_sent_ = wire.size();
    average_ = average;
    pending_ = true;
    hub_->post(op_, rank_, std::move(wire));
  }
  bool test() { return !pending_ || complete(false); }
  void wait() {
    if (pending_) {
      complete(true);
    }
  }
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  bool complete(bool block) {
    std::vector<std::vector<std::byte>> wires;
    if (!hub_->collect(op_, block, wires)) {
      return false;
    }
    std::fill(average_.begin(), average_.end(), 0.0f);
    bytes_received_ = 0;
    const float scale = 1.0f / static_cast<float>(wires.size());
    for (std::size_t r = 0; r < wires.size(); ++r) {
      accumulate(decode(wires[r]), average_, scale);
      bytes_received_ += r == rank_ ? 0 : wires[r].size();
    }
    ++op_;
    pending_ = false;
    return true;
  }

  exchange_hub* hub_;
  std::size_t rank_;
  std::uint64_t op_ = 0;
  std::span<float> average_;
  bool pending_ = false;
  std::size_t bytes_sent_ = 0;
  std::size_t bytes_received_ = 0;
};

static_assert(pipeline_policy::transport<hub_exchange>);
static_assert(pipeline_policy::byte_counting_transport<hub_exchange>);
static_assert(!pipeline_policy::in_place_transport<hub_exchange>);

// ---- the user's grouping policy -------------------------------------------------------------

// Consecutive forward pairs of layers (0, 1), (2, 3), ... (an odd last layer alone), sent last
// pair first. Deterministic, so every worker gets the same grouping.
struct forward_pairs {
  using grouping_concept = grouping_policy_tag; // opts in: deterministic on every worker
  [[nodiscard]] schedule::grouping groups(std::span<const std::size_t> numel) const {
    std::vector<std::size_t> ends; // group ends in backward positions
    for (std::size_t end = numel.size() % 2 == 0 ? 2 : 1; end <= numel.size(); end += 2) {
      ends.push_back(end);
    }
    return schedule::grouping_from_ends(ends, numel.size());
  }
};

static_assert(pipeline_policy::grouping_policy<forward_pairs>);

// ---- the reference --------------------------------------------------------------------------

constexpr std::size_t workers = 3;
const std::vector<std::size_t> sizes{500, 7, 1200, 1, 64};
// forward_pairs' groups in sending (backward) order, as forward layer indices.
const std::vector<std::vector<std::size_t>> group_layers{{4}, {3, 2}, {1, 0}};

std::vector<float> gradient(std::size_t worker, std::size_t layer, int iteration) {
  return test::make_values(test::distribution::normal, sizes[layer],
                           100000 * worker + 1000 * static_cast<std::uint64_t>(iteration) + layer);
}

} // namespace

TEST_CASE("a user's compressor and transport run through the pipeline as the reference says",
          "[user_extension][pipeline]") {
  const value_type values = GENERATE(value_type::fp32, value_type::bf16);
  CAPTURE(to_string(values));
  const fixed_threshold prototype({.threshold = 1.5f, .values = values});
  exchange_hub hub(workers);
  std::vector<hub_exchange> transports;
  for (std::size_t w = 0; w < workers; ++w) {
    transports.emplace_back(hub, w);
  }
  std::vector<std::unique_ptr<pipeline<fixed_threshold, hub_exchange, forward_pairs>>> pipes;
  for (std::size_t w = 0; w < workers; ++w) {
    pipes.push_back(std::make_unique<pipeline<fixed_threshold, hub_exchange, forward_pairs>>(
        sizes, forward_pairs{}, prototype, transports[w]));
  }
  // backward positions [0, 1) = layer 4, [1, 3) = layers 3 and 2, [3, 5) = layers 1 and 0
  REQUIRE(pipes[0]->groups() == schedule::grouping{{0, 1}, {1, 3}, {3, 5}});
  // reference state: every worker's residual per layer
  std::vector<std::vector<std::vector<float>>> residual(workers);
  for (auto& r : residual) {
    for (const std::size_t n : sizes) {
      r.emplace_back(n, 0.0f);
    }
  }
  const std::size_t value_bytes = values == value_type::fp32 ? 4 : 2;

  for (int it = 0; it < 4; ++it) {
    CAPTURE(it);
    for (std::size_t w = 0; w < workers; ++w) { // every worker's backward, last layer first
      for (std::size_t l = sizes.size(); l-- > 0;) {
        pipes[w]->gradient_ready(l, gradient(w, l, it));
      }
    }
    for (auto& p : pipes) {
      p->finish();
    }
    // reference: acc = residual + grad; sent = round(acc) where |acc| >= 1.5; residual = acc -
    // sent; average = sum over workers of sent / W (in double)
    std::vector<std::vector<std::size_t>> count(workers, std::vector<std::size_t>(sizes.size()));
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(l);
      std::vector<double> sum(sizes[l], 0.0);
      std::vector<double> magnitude(sizes[l], 0.0);
      for (std::size_t w = 0; w < workers; ++w) {
        const std::vector<float> g = gradient(w, l, it);
        for (std::size_t i = 0; i < sizes[l]; ++i) {
          const float acc = residual[w][l][i] + g[i];
          const float sent = std::abs(acc) >= 1.5f ? round_to(values, acc) : 0.0f;
          count[w][l] += std::abs(acc) >= 1.5f ? 1 : 0;
          residual[w][l][i] = acc - sent;
          sum[i] += sent;
          magnitude[i] += std::abs(sent);
        }
        REQUIRE(test::same_bits(pipes[w]->residual(l), residual[w][l]));
        REQUIRE(pipes[w]->last_stats().layers[l].k_selected == count[w][l]);
        REQUIRE(test::same_bits(pipes[w]->averaged(l), pipes[0]->averaged(l)));
      }
      const std::span<const float> average = pipes[0]->averaged(l);
      for (std::size_t i = 0; i < sizes[l]; ++i) {
        CAPTURE(i);
        REQUIRE(std::abs(average[i] - sum[i] / workers) <= 1e-6 * (1.0 + magnitude[i]));
      }
    }
    // wire bytes: per group, a header and (4-byte index + value) per sent element
    for (std::size_t w = 0; w < workers; ++w) {
      std::size_t sent_bytes = 0;
      std::size_t received_bytes = 0;
      std::size_t selected = 0;
      for (const auto& group : group_layers) {
        for (std::size_t v = 0; v < workers; ++v) {
          std::size_t k = 0;
          for (const std::size_t l : group) {
            k += count[v][l];
          }
          (v == w ? sent_bytes : received_bytes) += wire_header_bytes + (4 + value_bytes) * k;
          selected += v == w ? k : 0;
        }
      }
      const pipeline_iteration_stats& stats = pipes[w]->last_stats();
      REQUIRE(stats.bytes_reported);
      REQUIRE(stats.bytes_sent == sent_bytes);
      REQUIRE(stats.bytes_received == received_bytes);
      REQUIRE(stats.selected == selected);
      REQUIRE(selected > 0);
      REQUIRE(selected < stats.numel);
    }
  }
}

TEST_CASE("a user's transport completes through test() only once every worker has started",
          "[user_extension][transport]") {
  exchange_hub hub(workers);
  std::vector<hub_exchange> t;
  std::vector<std::vector<float>> average(workers, std::vector<float>(10, -1.0f));
  for (std::size_t w = 0; w < workers; ++w) {
    t.emplace_back(hub, w);
  }
  sparse_message m;
  for (std::size_t w = 0; w < workers; ++w) {
    m.clear(10);
    m.indices = {static_cast<std::uint32_t>(w), 9};
    m.values = {3.0f, static_cast<float>(w)};
    t[w].start(m, average[w]);
    REQUIRE(t[w].test() == (w + 1 == workers)); // the last start completes the round
  }
  for (std::size_t w = 0; w < workers; ++w) {
    REQUIRE(t[w].test());
    t[w].wait(); // nothing left to wait for
    CAPTURE(w);
    // elements 0, 1, 2: one worker's 3 / 3; element 9: (0 + 1 + 2) / 3; the rest 0
    REQUIRE(test::same_bits(average[w], std::vector<float>{1, 1, 1, 0, 0, 0, 0, 0, 0, 1}));
  }
  REQUIRE_THROWS_AS(t[0].start(m, std::span<float>(average[0]).first(9)), std::invalid_argument);
}

TEST_CASE("a user's compressor refuses a bad option with a message naming it",
          "[user_extension][errors]") {
  REQUIRE_THROWS_WITH(fixed_threshold({.threshold = -1.0f}),
                      Catch::Contains("threshold -1") && Catch::Contains(">= 0"));
  REQUIRE_THROWS_AS(fixed_threshold({.threshold = std::nanf("")}), std::invalid_argument);
}

} // namespace pipeline_pipeline_user_extension_test
