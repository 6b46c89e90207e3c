// SPDX-License-Identifier: Apache-2.0
// Asynchronous parameter server (ASGD, SSP): no push is lost (the servers' final parameters are
// the initial ones minus the exact sum of every worker's integer-valued pushes), replicas equal
// the servers' parameters bit for bit after finish(), a 10x slower worker does not hold the
// others back without a staleness bound and does within one, S = 1 and 2, sparse and dense
// pushes, the default momentum rule and a callback rule, statistics and byte counts, and faults
// (invalid pushes, a push the server rejects; bad or mismatched options:
// async_parameter_server_options_test.cpp). Collective: every rank runs every test; with one
// rank (no worker possible) only the role checks run.
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_async_parameter_server_test {

using namespace gradcomp;
using gradcomp::test::bits_hash;
using gradcomp::test::same_bits;

namespace {

using asgd = mpi::async_parameter_server;

// Plain SGD with lr 1 and no scaling: on integer-valued floats every update is exact, so the
// result does not depend on the order the pushes arrive in.
constexpr mpi::async_sgd exact_sgd{.lr = 1.0f, .momentum = 0.0f, .scaling = mpi::lr_scaling::none};

// Worker `worker`'s gradient at `step`: integers in [-8, 8], dense or at ~10% of the elements.
sparse_message integer_push(int worker, int step, std::size_t n, bool dense) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(worker) * 1000003u +
                      static_cast<std::uint64_t>(step) * 7919u + n);
  std::uniform_int_distribution<int> value(-8, 8);
  std::bernoulli_distribution pick(0.1);
  sparse_message m;
  m.clear(n);
  m.dense = dense;
  for (std::size_t i = 0; i < n; ++i) {
    if (dense || pick(rng)) {
      if (!dense) {
        m.indices.push_back(static_cast<std::uint32_t>(i));
      }
      m.values.push_back(static_cast<float>(value(rng)));
    }
  }
  return m;
}

std::vector<float> initial_params(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 17) - 8);
  }
  return x;
}

int steps_of(int worker) {
  return 4 + 3 * worker;
}

// True on every rank when, for every shard, every rank that holds it (workers: all; a server:
// its own) holds it with the same bits (MPI_Allgather of one hash per shard and rank).
bool shards_identical(const asgd& ps, std::span<const float> params) {
  const int servers = ps.servers();
  std::vector<std::uint64_t> mine(static_cast<std::size_t>(servers), 0);
  for (int s = 0; s < servers; ++s) {
    const bool held = ps.is_worker() || ps.server_rank(s) == test::world_rank();
    const std::size_t lo = ps.shard_begin(s);
    mine[static_cast<std::size_t>(s)] =
        held ? bits_hash(params.subspan(lo, ps.shard_begin(s + 1) - lo)) | 1u : 0u;
  }
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(test::world_size()));
  MPI_Allgather(mine.data(), servers, MPI_UINT64_T, all.data(), servers, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (int s = 0; s < servers; ++s) {
    std::uint64_t seen = 0;
    for (std::size_t r = 0; r < all.size() / mine.size(); ++r) {
      const std::uint64_t h = all[r * mine.size() + static_cast<std::size_t>(s)];
      if (h != 0 && seen != 0 && h != seen) {
        return false;
      }
      seen = h != 0 ? h : seen;
    }
  }
  return true;
}

// Runs a worker that sleeps `pause` before each of its steps (push, pull) while `more(step)`
// holds, then finishes; returns its pull results.
template <class More>
std::vector<mpi::async_pull_result>
paced_worker(asgd& ps, std::vector<float>& params, std::chrono::microseconds pause, More more) {
  std::vector<mpi::async_pull_result> results;
  for (int step = 0; more(step); ++step) {
    std::this_thread::sleep_for(pause);
    ps.push(integer_push(test::world_rank(), step, params.size(), false));
    results.push_back(ps.pull(params));
  }
  results.push_back(ps.finish(params));
  return results;
}

// Whether the communicator holds `ranks` ranks (one server and ranks - 1 workers); says why
// the test does nothing otherwise. The same answer on every rank.
bool has_ranks(const mpi::communicator& comm, int ranks) {
  if (comm.size() >= ranks) {
    return true;
  }
  SUCCEED("needs " << ranks << " ranks: a server and " << ranks - 1 << " worker(s)");
  return false;
}

} // namespace

TEST_CASE("async parameter server: roles, and no worker on one rank",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  if (p == 1) {
    CHECK_THROWS_WITH(asgd(comm, 10), Catch::Contains("1 dedicated servers leave no worker among "
                                                      "the 1 ranks"));
    return;
  }
  for (int servers = 1; servers < p; ++servers) {
    asgd ps(comm, 10, {.servers = servers});
    CHECK(ps.workers() == p - servers);
    CHECK(ps.is_worker() == (comm.rank() < p - servers));
    CHECK(ps.is_server() == !ps.is_worker());
    CHECK(ps.server_rank(0) == p - servers);
    CHECK(ps.shard_begin(0) == 0);
    CHECK(ps.shard_begin(servers) == 10);
    std::vector<float> params(10, 0.0f);
    if (ps.is_server()) {
      CHECK_THROWS_WITH(ps.push(integer_push(0, 0, 10, true)), Catch::Contains("a server"));
      CHECK_THROWS_WITH(ps.pull(params), Catch::Contains("a server"));
      const mpi::async_server_stats stats = ps.serve(params);
      CHECK(stats.version == 0);
      CHECK(stats.pulls_answered == static_cast<std::uint64_t>(ps.workers()));
      CHECK_THROWS_WITH(ps.serve(params), Catch::Contains("twice"));
    } else {
      CHECK_THROWS_WITH(ps.serve(params), Catch::Contains("a worker"));
      ps.finish(params);
      CHECK_THROWS_WITH(ps.pull(params), Catch::Contains("after finish()"));
    }
  }
}

TEST_CASE("async parameter server loses no push and replicas equal the servers' parameters",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const int p = comm.size();
  for (int servers : {1, 2}) {
    for (const bool dense : {false, true}) {
      for (const bool callback : {false, true}) {
        for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}}) {
          if (servers >= p) {
            continue; // the same on every rank
          }
          CAPTURE(p, servers, dense, callback, n);
          asgd ps(comm, n, {.servers = servers, .max_pushes_in_flight = 3, .tag_base = 40});
          const std::vector<float> initial = initial_params(n);
          std::vector<float> params = initial;
          std::vector<double> pushed(n, 0.0); // this rank's pushes, summed exactly
          std::uint64_t calls = 0;
          mpi::async_server_stats stats;
          if (ps.is_server()) {
            stats = callback ? ps.serve(params,
                                        [&](std::span<float> shard, const sparse_message& part) {
                                          ++calls;
                                          REQUIRE(part.dense_length_elements == shard.size());
                                          accumulate(part, shard, -1.0f);
                                        })
                             : ps.serve(params, exact_sgd);
            std::uint64_t total = 0;
            for (int w = 0; w < ps.workers(); ++w) {
              CHECK(stats.pushes_applied[static_cast<std::size_t>(w)] ==
                    static_cast<std::uint64_t>(steps_of(w)));
              total += static_cast<std::uint64_t>(steps_of(w));
            }
            CHECK(stats.version == total);
            CHECK(calls == (callback ? total : 0));
            // every pull of every worker (every other step, and finish) is answered
            std::uint64_t pulls = 0;
            for (int w = 0; w < ps.workers(); ++w) {
              pulls += static_cast<std::uint64_t>(steps_of(w) / 2 + 1);
            }
            CHECK(stats.pulls_answered == pulls);
            CHECK(stats.pulls_deferred == 0);
            CHECK(stats.max_staleness <= total);
          } else {
            for (int step = 0; step < steps_of(comm.rank()); ++step) {
              const sparse_message g = integer_push(comm.rank(), step, n, dense);
              ps.push(g);
              std::vector<float> dense_g(n);
              decompress(g, dense_g);
              for (std::size_t i = 0; i < n; ++i) {
                pushed[i] += dense_g[i];
              }
              if (step % 2 == 1) {
                const mpi::async_pull_result r = ps.pull(params);
                CHECK(r.version >= static_cast<std::uint64_t>(step + 1));
              }
            }
            ps.finish(params);
            CHECK(ps.pushes() == static_cast<std::uint64_t>(steps_of(comm.rank())));
            for (const std::uint64_t v : ps.versions()) {
              std::uint64_t total = 0;
              for (int w = 0; w < ps.workers(); ++w) {
                total += static_cast<std::uint64_t>(steps_of(w));
              }
              CHECK(v == total);
            }
          }
          // the reference: the initial values minus the sum of every push of every worker
          std::vector<double> sum(n);
          MPI_Allreduce(pushed.data(), sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD);
          std::vector<float> expected(n);
          for (std::size_t i = 0; i < n; ++i) {
            expected[i] = static_cast<float>(static_cast<double>(initial[i]) - sum[i]);
          }
          if (ps.is_worker()) {
            CHECK(same_bits(params, expected));
          } else {
            const int s = comm.rank() - ps.workers();
            const auto lo = static_cast<std::ptrdiff_t>(ps.shard_begin(s));
            const auto hi = static_cast<std::ptrdiff_t>(ps.shard_begin(s + 1));
            CHECK(std::equal(params.begin() + lo, params.begin() + hi, expected.begin() + lo));
            // the rest of a full-length params is left alone
            CHECK(std::equal(params.begin(), params.begin() + lo, initial.begin()));
            CHECK(std::equal(params.begin() + hi, params.end(), initial.begin() + hi));
          }
          CHECK(shards_identical(ps, params));
          // every payload byte sent is received: {worker sent, server received, server sent,
          // worker received}
          const std::uint64_t mine[4] = {ps.is_worker() ? ps.bytes_sent() : 0, stats.bytes_received,
                                         stats.bytes_sent,
                                         ps.is_worker() ? ps.bytes_received() : 0};
          std::uint64_t bytes[4] = {};
          MPI_Allreduce(mine, bytes, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
          CHECK(bytes[0] == bytes[1]);
          CHECK(bytes[2] == bytes[3]);
          if (ps.is_worker()) {
            CHECK(ps.bytes_received() == ps.pulls() * n * sizeof(float));
          }
        }
      }
    }
  }
}

TEST_CASE("async parameter server: a server may serve only its shard, with the default rule",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const int p = comm.size();
  // only worker 0 pushes, so the order is fixed and a momentum rule is deterministic
  const std::size_t n = 300;
  const int servers = std::min(2, p - 1);
  const mpi::async_sgd rule{.lr = 0.1f, .momentum = 0.9f};
  asgd ps(comm, n, {.servers = servers});
  const std::vector<float> initial = initial_params(n);
  std::vector<float> reference = initial;
  {
    std::vector<float> velocity(n, 0.0f);
    const float step = rule.lr / static_cast<float>(ps.workers());
    for (int k = 0; k < 6; ++k) {
      for (float& v : velocity) {
        v *= rule.momentum;
      }
      const sparse_message g = integer_push(0, k, n, k % 2 == 0);
      for (int s = 0; s < servers; ++s) { // the server applies each shard's part
        const std::size_t lo = ps.shard_begin(s);
        const std::size_t hi = ps.shard_begin(s + 1);
        sparse_message part;
        mpi::detail::slice_message(g, lo, hi, part);
        accumulate(part, std::span<float>(velocity).subspan(lo, hi - lo));
      }
      for (std::size_t i = 0; i < n; ++i) {
        reference[i] -= step * velocity[i];
      }
    }
  }
  if (ps.is_server()) {
    const int s = comm.rank() - ps.workers();
    const std::size_t lo = ps.shard_begin(s);
    std::vector<float> shard(initial.begin() + static_cast<std::ptrdiff_t>(lo),
                             initial.begin() + static_cast<std::ptrdiff_t>(ps.shard_begin(s + 1)));
    const mpi::async_server_stats stats = ps.serve(shard, rule);
    CHECK(same_bits(shard, std::span<const float>(reference).subspan(lo, shard.size())));
    CHECK(stats.pushes_applied[0] == 6);
    CHECK(stats.max_staleness == 0); // worker 0 pulls after each push and nobody else pushes
  } else {
    std::vector<float> params = initial;
    if (comm.rank() == 0) {
      for (int k = 0; k < 6; ++k) {
        ps.push(integer_push(0, k, n, k % 2 == 0));
        const mpi::async_pull_result r = ps.pull(params);
        CHECK(r.version == static_cast<std::uint64_t>(k + 1));
        CHECK(r.staleness == 0);
      }
    }
    ps.finish(params);
    CHECK(same_bits(params, reference));
  }
}

TEST_CASE("async parameter server with a 10x slower worker", "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 3)) {
    return;
  }
  using namespace std::chrono_literals;
  const bool slow = comm.rank() == 0;

  SECTION("without a staleness bound the others keep making progress (no barrier)") {
    // long enough steps that a push and pull (a few ms with 5 ranks on 2 cores) stay small
    const auto pause = 10ms;
    const int slow_steps = 4;
    asgd ps(comm, 64, {.servers = 1, .staleness_bound = 0});
    std::vector<float> params = initial_params(64);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto deadline = std::chrono::steady_clock::now() + slow_steps * 10 * pause;
    if (ps.is_server()) {
      const mpi::async_server_stats stats = ps.serve(params, exact_sgd);
      CHECK(stats.pushes_applied[0] == static_cast<std::uint64_t>(slow_steps));
      for (int w = 1; w < ps.workers(); ++w) {
        CAPTURE(w, stats.pushes_applied[static_cast<std::size_t>(w)]);
        // with a barrier every worker would push as often as the slow one; the fast ones make
        // 30-40 pushes in Release (10 ms steps until the deadline), and 2x leaves room for
        // the sanitizers' slowdown on 2 cores shared by 5 ranks
        CHECK(stats.pushes_applied[static_cast<std::size_t>(w)] >= 2 * stats.pushes_applied[0]);
      }
      CHECK(stats.pulls_deferred == 0);
    } else if (slow) {
      paced_worker(ps, params, 10 * pause, [&](int step) { return step < slow_steps; });
    } else {
      paced_worker(ps, params, pause,
                   [&](int) { return std::chrono::steady_clock::now() < deadline; });
    }
  }

  SECTION("a staleness bound keeps every clock within it of the slowest") {
    const auto pause = 2ms;
    const int steps = 8;
    for (const int bound : {1, 2}) {
      for (int servers : {1, 2}) {
        if (servers > comm.size() - 2) {
          continue;
        }
        CAPTURE(bound, servers);
        asgd ps(comm, 64, {.servers = servers, .staleness_bound = bound});
        std::vector<float> params = initial_params(64);
        if (ps.is_server()) {
          const mpi::async_server_stats stats = ps.serve(params, exact_sgd);
          CHECK(stats.max_clock_gap <= static_cast<std::uint64_t>(bound));
          CHECK(stats.pulls_deferred > 0); // the fast workers did wait for the slow one
          CHECK(stats.version == static_cast<std::uint64_t>(steps * ps.workers()));
        } else {
          const auto results = paced_worker(ps, params, slow ? 10 * pause : pause,
                                            [&](int step) { return step < steps; });
          for (const mpi::async_pull_result& r : results) {
            CHECK(r.clock_gap <= static_cast<std::uint64_t>(bound));
          }
        }
      }
    }
  }
}

TEST_CASE("async parameter server: an invalid push throws on its worker before sending",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const int p = comm.size();
  const std::size_t n = 50;
  asgd ps(comm, n, {.servers = std::min(2, p - 1)});
  std::vector<float> params = initial_params(n);
  if (ps.is_server()) {
    const mpi::async_server_stats stats = ps.serve(params, exact_sgd);
    CHECK(stats.version == static_cast<std::uint64_t>(ps.workers()));
  } else {
    sparse_message wrong_length = integer_push(comm.rank(), 0, n + 1, false);
    CHECK_THROWS_WITH(ps.push(wrong_length), Catch::Contains("dense length 51, expected n = 50"));
    sparse_message unsorted;
    unsorted.clear(n);
    unsorted.indices = {7, 3};
    unsorted.values = {1.0f, 2.0f};
    CHECK_THROWS_WITH(ps.push(unsorted), Catch::Contains("not strictly ascending"));
    std::vector<float> short_params(n - 1);
    CHECK_THROWS_WITH(ps.pull(short_params), Catch::Contains("expected n = 50"));
    CHECK(ps.pushes() == 0);
    const sparse_message g = integer_push(comm.rank(), 1, n, false);
    ps.push(g);
    ps.finish(params);
    CHECK(ps.versions()[0] == static_cast<std::uint64_t>(ps.workers()));
  }
}

TEST_CASE("async parameter server: invalid serve() arguments fail every worker, no rank hangs",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const std::size_t n = 30;
  for (const bool bad_rule : {false, true}) {
    CAPTURE(bad_rule);
    asgd ps(comm, n, {.servers = 1});
    std::vector<float> params = initial_params(n);
    if (ps.is_server()) {
      if (bad_rule) {
        CHECK_THROWS_WITH(ps.serve(params, {.lr = -1.0f}), Catch::Contains("lr -1"));
      } else {
        std::vector<float> wrong(n - 1);
        CHECK_THROWS_WITH(ps.serve(wrong, exact_sgd), Catch::Contains("serve() got 29"));
      }
    } else {
      ps.push(integer_push(comm.rank(), 0, n, false));
      CHECK_THROWS_WITH(ps.pull(params), Catch::Contains("invalid serve() arguments"));
      CHECK_THROWS_AS(ps.finish(params), mpi::mpi_error);
    }
  }
}

TEST_CASE("async parameter server: a push the server rejects fails every worker, no rank hangs",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const int p = comm.size();
  const std::size_t n = 40;
  for (int servers : {1, 2}) {
    if (servers >= p) {
      continue;
    }
    CAPTURE(servers);
    const int culprit = p - servers - 1; // the last worker
    const std::string names_culprit = "worker rank " + std::to_string(culprit);
    {
      asgd ps(comm, n, {.servers = servers});
      std::vector<float> params = initial_params(n);
      if (ps.is_server()) {
        // only the last shard holds the NaN: that server rejects it, the others go on
        if (comm.rank() == p - 1) {
          std::string what;
          try {
            ps.serve(params, exact_sgd);
          } catch (const wire_error& e) {
            what = e.what();
          }
          CHECK_THAT(what, Catch::Contains("server rank " + std::to_string(p - 1) + " rejected " +
                                           names_culprit));
          CHECK_THAT(what, Catch::Contains("NaN"));
        } else {
          CHECK(ps.serve(params, exact_sgd).version == static_cast<std::uint64_t>(ps.workers()));
        }
      } else if (comm.rank() == culprit) {
        sparse_message nan; // valid as a message, but NaN does not pass the wire decoder
        nan.clear(n);
        nan.indices = {0, static_cast<std::uint32_t>(n - 1)};
        nan.values = {1.0f, std::numeric_limits<float>::quiet_NaN()};
        ps.push(nan);
        CHECK_THROWS_WITH(ps.pull(params), Catch::Contains(names_culprit + " (this rank)"));
        CHECK_THROWS_AS(ps.finish(params), wire_error);
      } else {
        ps.push(integer_push(comm.rank(), 0, n, true));
        CHECK_THROWS_WITH(ps.finish(params), Catch::Contains(names_culprit));
      }
    }
    // nothing of the failed run is left over on the communicator: a new one runs clean
    asgd ps(comm, n, {.servers = servers});
    std::vector<float> params = initial_params(n);
    if (ps.is_server()) {
      CHECK(ps.serve(params, exact_sgd).version == static_cast<std::uint64_t>(ps.workers()));
    } else {
      ps.push(integer_push(comm.rank(), 0, n, false));
      ps.finish(params);
    }
  }
}

TEST_CASE("async parameter server: a worker destroyed before finish() does not hold the server",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (!has_ranks(comm, 2)) {
    return;
  }
  const std::size_t n = 20000; // pushes above the eager limit: the destructor sends them out
  std::optional<asgd> ps(std::in_place, comm, n, asgd::options{.servers = 1});
  std::vector<float> params = initial_params(n);
  if (ps->is_server()) {
    const mpi::async_server_stats stats = ps->serve(params, exact_sgd);
    CHECK(stats.version == 2 * static_cast<std::uint64_t>(ps->workers()));
    CHECK(stats.pulls_answered == 0);
  } else {
    ps->push(integer_push(comm.rank(), 0, n, true));
    ps->push(integer_push(comm.rank(), 1, n, true));
    ps.reset(); // leaves without finish(): the server counts it as finished
  }
}

} // namespace mpi_async_parameter_server_test
