// SPDX-License-Identifier: Apache-2.0
// Parameter server: the average of the workers' pushes, bit-identical to a locally computed sum
// in worker order divided by W, on every rank; co-located and dedicated servers, S = 1, 2, 3,
// sparse (overlapping, disjoint, empty) and dense pushes, dense and adaptive (sparse) pulls,
// small messages, nonblocking progress, byte counts against an independent encoding of the
// pushes' union; and faults (length mismatch, invalid push, NaN) that every rank reports, and
// a corrupted sparse pull that its receivers report (bad options, and options that differ
// between ranks: test/mpi/parameter_server_options_test.cpp). Collective: every rank runs every
// test.
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "fault_injection.hpp"
#include "mpi_test_util.hpp"

namespace mpi_parameter_server_test {

using namespace gradcomp;
using gradcomp::test::describe;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::rank_values;
using gradcomp::test::same_bits;
using gradcomp::test::world_rank;

namespace {

enum class overlap { random, disjoint, identical, empty_on_odd_ranks, dense };

// Worker rank r's push, computable by every rank.
sparse_message push_of(int rank, std::size_t n, double density, overlap kind) {
  sparse_message m;
  m.clear(n);
  if (kind == overlap::dense) {
    m.dense = true;
    m.values = rank_values(n, rank, n + 17);
    return m;
  }
  if (kind == overlap::empty_on_odd_ranks && rank % 2 == 1) {
    return m;
  }
  std::mt19937_64 rng(static_cast<std::uint64_t>(kind == overlap::identical ? 0 : rank) * 7 + n);
  std::bernoulli_distribution pick(density);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < n; ++i) {
    const bool mine =
        kind == overlap::disjoint ? i % 8 == static_cast<std::size_t>(rank) % 8 : pick(rng);
    if (mine) {
      m.indices.push_back(static_cast<std::uint32_t>(i));
      m.values.push_back(normal(rng));
    }
  }
  return m;
}

// Every worker's push, worker w's at index w.
std::vector<sparse_message> pushes_of(int workers, std::size_t n, double density, overlap kind) {
  std::vector<sparse_message> pushes;
  for (int w = 0; w < workers; ++w) {
    pushes.push_back(push_of(mpi::parameter_server::worker_rank(w), n, density, kind));
  }
  return pushes;
}

// The average the server computes: the workers' pushes summed in worker order, divided by W.
std::vector<float> average_of(const std::vector<sparse_message>& pushes, std::size_t n) {
  std::vector<float> sum(n, 0.0f);
  for (const sparse_message& push : pushes) {
    accumulate(push, sum);
  }
  for (float& v : sum) {
    v /= static_cast<float>(pushes.size());
  }
  return sum;
}

std::vector<float>
expected_average(const mpi::parameter_server& ps, std::size_t n, double density, overlap kind) {
  return average_of(pushes_of(ps.workers(), n, density, kind), n);
}

// Largest server count that fits the rank count with `placement`.
int max_servers(int ranks, mpi::server_placement placement) {
  return placement == mpi::server_placement::colocated ? ranks : ranks - 1;
}

} // namespace

TEST_CASE("parameter server averages the workers' pushes, identically on every rank",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  gradcomp::test::identity_batch averages; // compared across ranks once, at the end
  for (mpi::server_placement placement :
       {mpi::server_placement::colocated, mpi::server_placement::dedicated}) {
    for (int servers : {1, 2, 3}) {
      if (servers > max_servers(comm.size(), placement)) {
        continue; // the same on every rank
      }
      for (overlap kind : {overlap::random, overlap::disjoint, overlap::identical,
                           overlap::empty_on_odd_ranks, overlap::dense}) {
        for (std::size_t n : {0, 1, 2, 5, 1000, 30000}) {
          // every worker's push and the reference average, the same for every encoding and pull
          const int workers =
              placement == mpi::server_placement::colocated ? comm.size() : comm.size() - servers;
          const std::vector<sparse_message> pushes = pushes_of(workers, n, 0.05, kind);
          const std::vector<float> expected = average_of(pushes, n);
          for (index_encoding enc : {index_encoding::u32, index_encoding::delta_varint}) {
            for (mpi::pull_format pull : {mpi::pull_format::dense, mpi::pull_format::adaptive}) {
              CAPTURE(static_cast<int>(placement), servers, static_cast<int>(kind), n,
                      to_string(enc), static_cast<int>(pull), comm.size());
              mpi::parameter_server ps(
                  comm, {.servers = servers, .placement = placement, .indices = enc, .pull = pull});
              REQUIRE(ps.workers() == workers);
              const sparse_message push =
                  ps.is_worker() ? pushes[static_cast<std::size_t>(comm.rank())] : sparse_message{};
              std::vector<float> average(n, -1.0f);
              ps(push, average);
              // bit for bit the reference, which every rank computes alike
              CHECK(same_bits(average, expected));
              averages.add(average,
                           describe("placement ", static_cast<int>(placement), ", servers ",
                                    servers, ", kind ", static_cast<int>(kind), ", n ", n, ", ",
                                    to_string(enc), ", pull ", static_cast<int>(pull)));
            }
          }
        }
      }
    }
  }
  averages.check();
}

TEST_CASE("parameter server roles follow the placement", "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  for (int servers = 1; servers <= p; ++servers) {
    mpi::parameter_server colocated(comm, {.servers = servers});
    CHECK(colocated.workers() == p);
    CHECK(colocated.is_worker());
    CHECK(colocated.is_server() == (comm.rank() < servers));
    CHECK(colocated.server_rank(servers - 1) == servers - 1);
    if (servers < p) {
      mpi::parameter_server dedicated(
          comm, {.servers = servers, .placement = mpi::server_placement::dedicated});
      CHECK(dedicated.workers() == p - servers);
      CHECK(dedicated.is_worker() == (comm.rank() < p - servers));
      CHECK(dedicated.is_server() == !dedicated.is_worker());
      CHECK(dedicated.server_rank(0) == p - servers);
    }
  }
  mpi::parameter_server two(comm, {.servers = std::min(2, p)});
  CHECK(two.shard_begin(10, 0) == 0);
  CHECK(two.shard_begin(10, two.servers()) == 10);
  CHECK(two.shard_begin(3, 1) == (p >= 2 ? 1u : 3u));
}

TEST_CASE("parameter server equals MPI_Allreduce of the dense pushes divided by W",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 20000;
  for (mpi::server_placement placement :
       {mpi::server_placement::colocated, mpi::server_placement::dedicated}) {
    if (max_servers(comm.size(), placement) < 1) {
      SUCCEED("one rank cannot hold a dedicated server and a worker");
      continue;
    }
    mpi::parameter_server ps(comm, {.servers = std::min(2, max_servers(comm.size(), placement)),
                                    .placement = placement});
    const sparse_message push =
        ps.is_worker() ? push_of(comm.rank(), n, 0.3, overlap::random) : sparse_message{};
    std::vector<float> mine(n, 0.0f);
    if (ps.is_worker()) {
      decompress(push, mine);
    }
    std::vector<float> sum(n);
    MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<float> average(n);
    ps(push, average);
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(average[i]) - sum[i] / ps.workers()));
    }
    CHECK(worst <= 1e-5 * comm.size());
    CHECK(identical_on_all_ranks(average));
  }
}

TEST_CASE("parameter server splits long messages and progresses through test()",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  struct sizes {
    std::size_t n, max_bytes;
  };
  for (auto [n, max_bytes] : {sizes{300, 4}, sizes{2000, 20}, sizes{5000, 4096}}) {
    for (overlap kind : {overlap::random, overlap::dense}) {
      CAPTURE(n, max_bytes, static_cast<int>(kind), comm.size());
      mpi::parameter_server ps(
          comm,
          {.servers = std::min(2, comm.size()), .max_message_bytes = max_bytes, .tag_base = 7});
      const sparse_message push = push_of(comm.rank(), n, 0.1, kind);
      std::vector<float> average(n);
      ps.start(push, average);
      volatile double busy = 0.0;
      while (!ps.test()) {
        for (int i = 0; i < 100; ++i) {
          busy = busy + std::sqrt(static_cast<double>(i)); // work overlapped with communication
        }
        std::this_thread::yield();
      }
      CHECK(average == expected_average(ps, n, 0.1, kind));
      CHECK(identical_on_all_ranks(average));
      // the object is reusable
      std::fill(average.begin(), average.end(), 0.0f);
      ps(push, average);
      CHECK(average == expected_average(ps, n, 0.1, kind));
    }
  }
}

TEST_CASE("parameter server reports the payload bytes it moves", "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 1000;
  // one co-located server, dense pushes: each part is the 32-byte header plus 4n value bytes
  mpi::parameter_server ps(comm, {.servers = 1});
  const sparse_message push = push_of(comm.rank(), n, 0.0, overlap::dense);
  std::vector<float> average(n);
  ps(push, average);
  const std::size_t part = wire_header_bytes + 4 * n;
  if (comm.rank() == 0) {
    CHECK(ps.bytes_received() == static_cast<std::size_t>(p - 1) * part);
    CHECK(ps.bytes_sent() == static_cast<std::size_t>(p - 1) * 4 * n);
  } else {
    CHECK(ps.bytes_sent() == part);
    CHECK(ps.bytes_received() == 4 * n);
  }
  // every byte sent is received somewhere, in every configuration
  for (mpi::server_placement placement :
       {mpi::server_placement::colocated, mpi::server_placement::dedicated}) {
    for (int servers = 1; servers <= max_servers(p, placement); ++servers) {
      mpi::parameter_server sharded(comm, {.servers = servers, .placement = placement});
      const sparse_message sparse = push_of(comm.rank(), n, 0.1, overlap::random);
      sharded(sparse, average);
      const std::uint64_t mine[2] = {sharded.bytes_sent(), sharded.bytes_received()};
      std::uint64_t total[2] = {};
      MPI_Allreduce(mine, total, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      CAPTURE(static_cast<int>(placement), servers);
      CHECK(total[0] == total[1]);
    }
  }
}

namespace {

// Independent reference of an adaptive pull's size: server s's shard of the workers' pushes,
// the union of their indices with any values (the size does not depend on them), encoded; or
// the dense shard's 4 n_s bytes when that is not larger or a push is dense.
// `pushes`: every worker's (pushes_of).
std::size_t expected_pull_bytes(const mpi::parameter_server& ps,
                                std::size_t n,
                                int s,
                                const std::vector<sparse_message>& pushes,
                                index_encoding enc) {
  const std::size_t lo = ps.shard_begin(n, s);
  const std::size_t hi = ps.shard_begin(n, s + 1);
  const std::size_t dense_bytes = 4 * (hi - lo);
  std::vector<std::uint32_t> all;
  for (const sparse_message& push : pushes) {
    if (push.dense) {
      return dense_bytes;
    }
    for (const std::uint32_t i : push.indices) {
      if (i >= lo && i < hi) {
        all.push_back(static_cast<std::uint32_t>(i - lo));
      }
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  sparse_message u;
  u.clear(hi - lo);
  u.indices = all;
  u.values.assign(all.size(), 1.0f);
  return std::min(dense_bytes, encode(u, enc).size());
}

} // namespace

TEST_CASE("parameter server: the adaptive pull carries the pushes' union when smaller, with the "
          "dense pull's result",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 10000; // 3 workers at density 0.01: a union of <= 300 in a shard >= 3333
  gradcomp::test::identity_batch averages; // compared across ranks once, at the end
  for (mpi::server_placement placement :
       {mpi::server_placement::colocated, mpi::server_placement::dedicated}) {
    for (int servers = 1; servers <= std::min(3, max_servers(p, placement)); ++servers) {
      // density 0.01: the union is far smaller than the shard; 0.6: it is not (dense pull);
      // a dense push forces the dense pull whatever the others send
      for (const double density : {0.01, 0.6}) {
        for (overlap kind : {overlap::random, overlap::identical, overlap::dense}) {
          for (index_encoding enc : {index_encoding::u32, index_encoding::delta_varint}) {
            CAPTURE(static_cast<int>(placement), servers, density, static_cast<int>(kind),
                    to_string(enc), p);
            mpi::parameter_server ps(comm,
                                     {.servers = servers, .placement = placement, .indices = enc});
            // every worker's push, computed once for both runs and the references
            const std::vector<sparse_message> pushes = pushes_of(ps.workers(), n, density, kind);
            const sparse_message push =
                ps.is_worker() ? pushes[static_cast<std::size_t>(comm.rank())] : sparse_message{};
            const auto run = [&](mpi::pull_format pull, std::vector<float>& average) {
              mpi::parameter_server dense_ps(
                  comm, {.servers = servers, .placement = placement, .indices = enc, .pull = pull});
              dense_ps(push, average);
              return std::pair{dense_ps.bytes_received(), dense_ps.bytes_sent()};
            };
            std::vector<float> dense_average(n, -1.0f);
            std::vector<float> sparse_average(n, 7.0f); // stale values must not survive
            const auto [dense_received, dense_sent] = run(mpi::pull_format::dense, dense_average);
            ps(push, sparse_average);
            // bit-identical, zeros outside the union
            CHECK(same_bits(sparse_average, dense_average));
            // and the reference every rank computes alike
            CHECK(same_bits(sparse_average, average_of(pushes, n)));
            averages.add(sparse_average,
                         describe("placement ", static_cast<int>(placement), ", servers ", servers,
                                  ", density ", density, ", kind ", static_cast<int>(kind), ", ",
                                  to_string(enc)));
            // what this rank pulled: every other server's pull, by the independent reference
            std::size_t pulled = 0, dense_pulled = 0, pulled_elsewhere = 0;
            for (int s = 0; s < servers; ++s) {
              const std::size_t expected = expected_pull_bytes(ps, n, s, pushes, enc);
              CHECK(ps.pull_was_sparse(s) ==
                    (expected < 4 * (ps.shard_begin(n, s + 1) - ps.shard_begin(n, s))));
              if (ps.server_rank(s) != comm.rank()) {
                pulled += expected;
                dense_pulled += 4 * (ps.shard_begin(n, s + 1) - ps.shard_begin(n, s));
              } else {
                pulled_elsewhere = expected * static_cast<std::size_t>(p - 1);
              }
            }
            // pushes received are the same in both runs; the pulls differ as predicted
            CHECK(ps.bytes_received() - pulled == dense_received - dense_pulled);
            if (ps.is_server()) {
              const int mine =
                  ps.server_rank(0) <= comm.rank() ? comm.rank() - ps.server_rank(0) : -1;
              REQUIRE(mine >= 0);
              const std::size_t dense_shard =
                  4 * (ps.shard_begin(n, mine + 1) - ps.shard_begin(n, mine));
              CHECK(ps.bytes_sent() - pulled_elsewhere ==
                    dense_sent - dense_shard * static_cast<std::size_t>(p - 1));
            } else {
              CHECK(ps.bytes_sent() == dense_sent);
            }
            if (density == 0.01 && kind != overlap::dense) {
              for (int s = 0; s < servers; ++s) { // the union saves more than half the pull
                const std::size_t shard = ps.shard_begin(n, s + 1) - ps.shard_begin(n, s);
                CHECK(2 * expected_pull_bytes(ps, n, s, pushes, enc) < 4 * shard);
                CHECK(ps.pull_was_sparse(s));
              }
            }
          }
        }
      }
    }
  }
  averages.check();
}

TEST_CASE("parameter server: ranks passing different lengths all get an exception",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    SUCCEED("a single rank cannot disagree with itself");
    return;
  }
  for (mpi::server_placement placement :
       {mpi::server_placement::colocated, mpi::server_placement::dedicated}) {
    CAPTURE(static_cast<int>(placement));
    mpi::parameter_server ps(comm, {.servers = 1, .placement = placement});
    // the last rank (a server when dedicated) passes one element more
    const std::size_t n = comm.rank() == comm.size() - 1 ? 101 : 100;
    sparse_message push;
    push.clear(n);
    std::vector<float> average(n);
    CHECK_THROWS_WITH(ps(push, average), Catch::Contains("different lengths"));
    // the object and the communicator stay usable afterwards
    const sparse_message fine = push_of(comm.rank(), 100, 0.1, overlap::random);
    std::vector<float> ok(100);
    ps(fine, ok);
    CHECK(ok == expected_average(ps, 100, 0.1, overlap::random));
  }
}

TEST_CASE("parameter server: an invalid push makes every rank throw", "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::parameter_server ps(comm, {.servers = std::min(2, comm.size())});
  const int culprit = comm.size() - 1;
  std::vector<float> average(100);
  {
    sparse_message push;
    push.clear(100);
    if (comm.rank() == culprit) { // unsorted indices
      push.indices = {50, 10};
      push.values = {1.0f, 2.0f};
    }
    CHECK_THROWS_WITH(ps(push, average), Catch::Contains("invalid push"));
  }
  {
    sparse_message push; // a push whose dense length differs from the output's
    push.clear(comm.rank() == culprit ? 99 : 100);
    CHECK_THROWS_WITH(ps(push, average), Catch::Contains("invalid push"));
  }
  {
    sparse_message push;
    push.clear(100);
    if (comm.rank() == culprit) { // an index beyond the dense length
      push.indices = {100};
      push.values = {1.0f};
    }
    CHECK_THROWS_AS(ps(push, average), mpi::mpi_error);
  }
  const sparse_message fine = push_of(comm.rank(), 100, 0.1, overlap::random);
  ps(fine, average);
  CHECK(average == expected_average(ps, 100, 0.1, overlap::random));
}

// Fault injection through MPI's profiling interface: this executable's MPI_Ialltoall replaces
// the library's for every caller and forwards to PMPI_Ialltoall. While `corrupt_stated_size` is
// set on a rank, the header that rank sends to rank 0 in the parameter server's alltoall (8
// int64 fields per destination, the push size last) states `corrupt_value` bytes instead.
namespace {
bool corrupt_stated_size = false;
std::int64_t corrupt_value = 0;
std::vector<std::int64_t> corrupted_headers;
} // namespace

extern "C" int MPI_Ialltoall(const void* sendbuf,
                             int sendcount,
                             MPI_Datatype sendtype,
                             void* recvbuf,
                             int recvcount,
                             MPI_Datatype recvtype,
                             MPI_Comm comm,
                             MPI_Request* request) {
  constexpr int header_fields = 8;
  if (corrupt_stated_size && sendtype == MPI_INT64_T && sendcount == header_fields) {
    int p = 0;
    PMPI_Comm_size(comm, &p);
    const auto* headers = static_cast<const std::int64_t*>(sendbuf);
    corrupted_headers.assign(headers, headers + static_cast<std::ptrdiff_t>(header_fields) * p);
    corrupted_headers[header_fields - 1] = corrupt_value; // destination 0's push size
    sendbuf = corrupted_headers.data();
  }
  return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

TEST_CASE("parameter server: a push size stated out of bounds makes every rank throw",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() < 2) {
    return; // no remote push to state a size for
  }
  mpi::parameter_server ps(comm, {.servers = 1}); // rank 0 serves everything
  const sparse_message push = push_of(comm.rank(), 1000, 0.1, overlap::random);
  std::vector<float> average(1000);
  for (const std::int64_t bad :
       {std::int64_t{-1}, std::int64_t{0}, std::int64_t{31},
        static_cast<std::int64_t>(max_encoded_bytes(1000) + 1), INT64_MAX}) {
    CAPTURE(bad);
    corrupt_stated_size = comm.rank() == comm.size() - 1; // the last worker lies
    corrupt_value = bad;
    std::string what;
    try {
      ps(push, average);
    } catch (const wire_error& e) {
      what = e.what();
    }
    corrupt_stated_size = false;
    CHECK_THAT(what, Catch::Contains("server rank 0 rejected the push size stated by worker rank " +
                                     std::to_string(comm.size() - 1)));
    if (comm.rank() == 0) {
      CHECK_THAT(what, Catch::Contains("states a push of " + std::to_string(bad) + " bytes"));
    }
    // the object and the communicator stay usable: no message of the failed round is left over
    ps(push, average);
    CHECK(average == expected_average(ps, 1000, 0.1, overlap::random));
  }
}

TEST_CASE("parameter server: a push its server rejects makes every rank throw a wire_error",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  for (int servers : {1, std::min(2, comm.size())}) {
    CAPTURE(servers);
    mpi::parameter_server ps(comm, {.servers = servers});
    sparse_message push;
    push.clear(100);
    if (comm.rank() == comm.size() - 1) { // valid, but NaN does not pass the wire decoder
      push.indices = {3, 99};
      push.values = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    }
    std::vector<float> average(100);
    CHECK_THROWS_AS(ps(push, average), wire_error);
    const sparse_message fine = push_of(comm.rank(), 100, 0.1, overlap::random);
    ps(fine, average);
    CHECK(average == expected_average(ps, 100, 0.1, overlap::random));
  }
}

TEST_CASE("parameter server: a sparse pull corrupted on the wire makes its receivers throw",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  if (p < 2) {
    return; // nothing is pulled over the wire
  }
  using gradcomp::test::corrupt_sparse_sends;
  // the pull's payload goes with tag_base + 2: the injected fault's tag
  mpi::parameter_server ps(comm, {.servers = 1, .tag_base = gradcomp::test::corrupting_tag - 2});
  const sparse_message push = push_of(comm.rank(), 1000, 0.01, overlap::random);
  std::vector<float> average(1000);
  corrupt_sparse_sends = comm.rank() == 0; // the server
  std::string what;
  try {
    ps(push, average);
  } catch (const wire_error& e) {
    what = e.what();
  }
  corrupt_sparse_sends = false;
  REQUIRE(ps.pull_was_sparse(0));
  if (comm.rank() == 0) {
    CHECK(what.empty()); // the server keeps its own (uncorrupted) shard
  } else {
    CHECK_THAT(what, Catch::Contains("the pull of server rank 0 does not decode"));
    CHECK_THAT(what, Catch::Contains("NaN"));
  }
  // nothing of the failed round is left over: the next round is exact on every rank
  ps(push, average);
  CHECK(average == expected_average(ps, 1000, 0.01, overlap::random));
  gradcomp::test::forget_corrupted_messages();
}

TEST_CASE("parameter server averages quantized pushes (shards keep the scale)",
          "[mpi][parameter_server][quantizer]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 2000;
  const auto push_of_rank = [&](int r) {
    sparse_message m;
    scaled_sign().compress(gradcomp::test::rank_values(n, r, 11), m);
    return m;
  };
  mpi::parameter_server ps(comm, {.servers = std::min(2, comm.size())});
  const sparse_message push = push_of_rank(comm.rank());
  std::vector<float> average(n, -1.0f);
  ps(push, average);
  std::vector<float> sum(n, 0.0f);
  for (int w = 0; w < ps.workers(); ++w) {
    accumulate(push_of_rank(mpi::parameter_server::worker_rank(w)), sum);
  }
  for (float& v : sum) {
    v /= static_cast<float>(ps.workers());
  }
  CHECK(average == sum);
  CHECK(identical_on_all_ranks(average));
}

} // namespace mpi_parameter_server_test
