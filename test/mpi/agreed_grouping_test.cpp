// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::agree_grouping and agreed_grouping (mpi/agreed_grouping.hpp): every rank gets
// rank 0's grouping; a layout mismatch or an invalid proposal makes every rank throw (none
// hangs); agreed_grouping plans on rank 0 only. In a pipeline with a warm-up (over a sparse
// allgather without the dense switch, whose per-layer result does not depend on the grouping),
// every rank re-plans at the same iteration and takes rank 0's plan from rank 0's measured
// backward times; different warm-up lengths make every rank throw.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/agreed_grouping.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/pipeline_testing.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_agreed_grouping_test {

using gradcomp::test::same_bits;

using namespace gradcomp;

namespace {

const std::vector<std::size_t> sizes{300, 17, 1000, 1, 64, 5};

std::vector<float> gradient(std::size_t layer, int iteration) {
  return test::rank_values(sizes[layer], test::world_rank(),
                           100 * static_cast<std::uint64_t>(iteration) + layer);
}

void divide(std::span<float> v, int p) {
  for (float& x : v) {
    x /= static_cast<float>(p);
  }
}

} // namespace

TEST_CASE("agree_grouping gives every rank rank 0's grouping", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  // every rank proposes something different; rank 0's must win
  schedule::grouping mine =
      me == 0 ? schedule::grouping{{0, 2}, {2, 3}, {3, 6}} : schedule::per_layer(sizes.size());
  const schedule::grouping agreed = mpi::agree_grouping(comm, sizes, mine);
  CHECK(agreed == schedule::grouping{{0, 2}, {2, 3}, {3, 6}});
  // non-root ranks may pass nothing
  const schedule::grouping again =
      mpi::agree_grouping(comm, sizes, me == 0 ? schedule::single(6) : schedule::grouping{});
  CHECK(again == schedule::single(6));
}

TEST_CASE("agree_grouping detects a layout mismatch on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  if (test::world_size() == 1) {
    return;
  }
  SECTION("different layer counts") {
    std::vector<std::size_t> mine = sizes;
    if (me == 1) {
      mine.push_back(3);
    }
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, mine, schedule::per_layer(mine.size())),
                      mpi::mpi_error);
  }
  SECTION("same count, different sizes") {
    std::vector<std::size_t> mine = sizes;
    if (me == test::world_size() - 1) {
      mine[2] += 1;
    }
    REQUIRE_THROWS_WITH(mpi::agree_grouping(comm, mine, schedule::per_layer(mine.size())),
                        Catch::Contains("different layer sizes"));
  }
  // the communicator is still usable afterwards
  CHECK(mpi::agree_grouping(comm, sizes, schedule::single(6)) == schedule::single(6));
}

TEST_CASE("agree_grouping rejects an invalid proposal on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const schedule::grouping bad{{0, 2}, {3, 6}}; // a gap
  if (test::world_rank() == 0) {
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, sizes, bad), std::invalid_argument);
  } else {
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, sizes, bad), mpi::mpi_error);
  }
}

TEST_CASE("a pipeline with agreed_grouping uses rank 0's plan on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_exchange exchange(comm);
  // every rank plans from different backward times; only rank 0's plan may be used
  pipeline_policy::planned_grouping planner;
  planner.strategy = schedule::strategy::optimal;
  planner.model = schedule::cost_model::affine(1e-3, 1e-9);
  planner.backward_seconds.assign(sizes.size(), 1e-3 * (1 + test::world_rank()));
  planner.backward_seconds[static_cast<std::size_t>(test::world_rank()) % sizes.size()] = 0.5;
  mpi::agreed_grouping<pipeline_policy::planned_grouping> policy{&comm, planner};
  pipeline p(sizes, policy, exact_top_k(0.1), exchange);
  pipeline_policy::planned_grouping rank0 = planner;
  rank0.backward_seconds.assign(sizes.size(), 1e-3);
  rank0.backward_seconds[0] = 0.5;
  CHECK(p.groups() == rank0.groups(sizes));
}

namespace {

// FNV-1a over the group bounds.
std::uint64_t grouping_hash(const schedule::grouping& g) {
  std::uint64_t h = 1469598103934665603ull;
  for (const schedule::layer_group& group : g) {
    h = (h ^ static_cast<std::uint64_t>(group.begin)) * 1099511628211ull;
    h = (h ^ static_cast<std::uint64_t>(group.end)) * 1099511628211ull;
  }
  return h;
}

// True on every rank when every rank holds the same grouping (an allgather of hashes).
bool same_grouping_on_all_ranks(const schedule::grouping& g) {
  const std::uint64_t mine = grouping_hash(g);
  const std::vector<std::uint64_t> all = test::allgather_on_all_ranks(std::span(&mine, 1));
  return std::all_of(all.begin(), all.end(), [&](std::uint64_t h) { return h == all[0]; });
}

using gradcomp::test::on_all_ranks;

using gradcomp::test::manual_clock;

// Rank `rank`'s fake backward time of `layer` in `iteration`: ranks see different models.
std::chrono::microseconds fake_backward(std::size_t layer, int iteration, int rank) {
  static constexpr std::int64_t base_us[] = {2000, 100, 6000, 0, 3000, 50};
  const auto r = static_cast<std::size_t>(rank);
  return std::chrono::microseconds(base_us[(layer + 2 * r) % 6] * (iteration == 0 ? 5 : 1) +
                                   static_cast<std::int64_t>((layer * 7 + r * 3) % 11));
}

// The order run_replanning reports the layers in on `rank` in iteration `it` (shuffled).
std::vector<std::size_t> replanning_hook_order(int rank, int it) {
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(static_cast<unsigned>(rank * 17 + it));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// The backward times the pipeline measures for one iteration whose hooks came in `order`, each
// after `gap(layer)` seconds of backward (begin_backward marked the start).
template <class Gap>
std::vector<double> expected_backward_seconds(const std::vector<std::size_t>& order, Gap gap) {
  std::vector<double> ready(order.size());
  double elapsed = 0.0;
  for (const std::size_t l : order) {
    elapsed += gap(l);
    ready[l] = elapsed;
  }
  return test::backward_seconds_from_ready(ready);
}

pipeline_policy::planned_grouping replanning_planner(std::size_t replan_after) {
  pipeline_policy::planned_grouping planner;
  planner.strategy = schedule::strategy::optimal;
  planner.model = schedule::cost_model::affine(1e-3, 1e-6);
  planner.replan_after = replan_after;
  return planner;
}

// Runs `iterations` iterations of a re-planning pipeline over a sparse allgather without the
// dense switch (its per-layer result does not depend on the grouping) and checks, after every
// finish(): the averages equal the per-layer reference and are identical on every rank, every
// rank has the same grouping, and replanned() turns true exactly after `warmup` iterations.
// `before_hook(layer, iteration)` stands for the backward computation before a hook.
template <class Pipeline, class BeforeHook>
void run_replanning(Pipeline& p, int warmup, int iterations, BeforeHook before_hook) {
  const int ranks = test::world_size();
  mpi::communicator reference_comm(MPI_COMM_WORLD);
  mpi::sparse_allgather_options options;
  options.dense_switch = false;
  mpi::sparse_allgather gather(reference_comm, options);
  std::vector<error_feedback<exact_top_k>> reference;
  for (const std::size_t n : sizes) {
    reference.emplace_back(n, exact_top_k(0.05));
  }
  sparse_message m;
  test::identity_batch averages; // compared across ranks once, at the end
  REQUIRE(same_grouping_on_all_ranks(p.groups()));
  for (int it = 0; it < iterations; ++it) {
    const std::vector<std::size_t> order = replanning_hook_order(test::world_rank(), it);
    p.begin_backward();
    for (const std::size_t l : order) {
      before_hook(l, it);
      p.gradient_ready(l, gradient(l, it));
    }
    p.finish();
    CAPTURE(it);
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      CAPTURE(l);
      reference[l].compress(gradient(l, it), m);
      std::vector<float> expected(sizes[l]);
      gather(m, std::span<float>(expected));
      divide(expected, ranks);
      REQUIRE(on_all_ranks(same_bits(p.averaged(l), expected)));
      averages.add(p.averaged(l), test::describe("iteration ", it, ", layer ", l));
    }
    REQUIRE(on_all_ranks(p.replanned() == (it + 1 >= warmup)));
    REQUIRE(on_all_ranks(p.measured_backward_seconds().empty() == (it + 1 < warmup)));
    REQUIRE(same_grouping_on_all_ranks(p.groups()));
  }
  averages.check();
}

} // namespace

TEST_CASE("pipeline with agreed_grouping re-plans on every rank at once", "[pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_allgather_options options;
  options.dense_switch = false;
  mpi::sparse_exchange exchange(comm, options);
  const auto planner = replanning_planner(2);
  mpi::agreed_grouping<pipeline_policy::planned_grouping> policy{&comm, planner};
  pipeline p(sizes, policy, exact_top_k(0.05), exchange);
  CHECK(p.groups() == planner.groups(sizes));
  // sleeps stand for backward (different per rank); only rank 0's times decide
  const int me = test::world_rank();
  run_replanning(p, 2, 5, [me](std::size_t layer, int) {
    if (layer == static_cast<std::size_t>(2 + me) % sizes.size()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  const auto measured = p.measured_backward_seconds();
  REQUIRE(on_all_ranks(measured.size() == sizes.size()));
  if (me == 0) {
    CHECK(p.groups() == planner.replan(sizes, measured));
    // the 3 ms before layer 2's hook lands on layer 2 or on a layer after it in backward order
    // reported later (the times are summed in backward order); over the 2 warm-up iterations
    // the medians are means, so the layers 2.. together hold at least 3 ms
    double from_layer_2 = 0.0;
    for (std::size_t l = 2; l < sizes.size(); ++l) {
      from_layer_2 += measured[l];
    }
    CHECK(from_layer_2 >= 0.95 * 3e-3);
  }
}

TEST_CASE("pipeline re-planning takes rank 0's plan from rank 0's times", "[pipeline]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_allgather_options options;
  options.dense_switch = false;
  mpi::sparse_exchange exchange(comm, options);
  constexpr int warmup = 3;
  const auto planner = replanning_planner(warmup);
  mpi::agreed_grouping<pipeline_policy::planned_grouping> policy{&comm, planner};
  pipeline<exact_top_k, mpi::sparse_exchange,
           mpi::agreed_grouping<pipeline_policy::planned_grouping>, manual_clock>
      p(sizes, policy, exact_top_k(0.05), exchange);
  const int me = test::world_rank();
  run_replanning(p, warmup, 5, [me](std::size_t layer, int it) {
    manual_clock::advance(fake_backward(layer, it, me));
  });
  // every rank computes the medians of rank 0 and of itself (the clock is exact: begin_backward
  // marks each iteration, and the hooks come in run_replanning's order)
  const auto medians = [](int rank) {
    std::vector<std::vector<double>> per_iteration;
    for (int it = 0; it < warmup; ++it) {
      per_iteration.push_back(
          expected_backward_seconds(replanning_hook_order(rank, it), [&](std::size_t l) {
            return std::chrono::duration<double>(fake_backward(l, it, rank)).count();
          }));
    }
    std::vector<double> out;
    for (std::size_t l = 0; l < sizes.size(); ++l) {
      std::vector<double> v;
      for (int it = 0; it < warmup; ++it) {
        v.push_back(per_iteration[static_cast<std::size_t>(it)][l]);
      }
      std::sort(v.begin(), v.end());
      out.push_back(v[1]);
    }
    return out;
  };
  const std::vector<double> mine = medians(me);
  const auto measured = p.measured_backward_seconds();
  CHECK(std::equal(measured.begin(), measured.end(), mine.begin(), mine.end()));
  const schedule::grouping rank0 = planner.replan(sizes, medians(0));
  CHECK(rank0 != planner.groups(sizes)); // the measured times change the plan
  REQUIRE(on_all_ranks(p.groups() == rank0));
}

TEST_CASE("agreed_grouping refuses different warm-up lengths on every rank", "[pipeline]") {
  if (test::world_size() == 1) {
    return;
  }
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_exchange exchange(comm);
  const auto planner = replanning_planner(test::world_rank() == 1 ? 3 : 2);
  mpi::agreed_grouping<pipeline_policy::planned_grouping> policy{&comm, planner};
  bool threw = false;
  try {
    pipeline p(sizes, policy, exact_top_k(0.05), exchange);
  } catch (const mpi::mpi_error& e) {
    threw = std::string(e.what()).find("different warm-up iterations") != std::string::npos;
  }
  REQUIRE(on_all_ranks(threw));
  // the communicator is still usable afterwards
  CHECK(mpi::agree_grouping(comm, sizes, schedule::single(6)) == schedule::single(6));
}

} // namespace mpi_agreed_grouping_test
