// SPDX-License-Identifier: Apache-2.0
// Sparse allgather: the sum of every rank's message, bit-identical to a locally computed sum in
// rank order, with overlapping, disjoint and empty messages; the dense switch; and faults (a
// dense-length mismatch, a malformed message) that every rank reports.
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "../common/catch.hpp"
#include "fault_injection.hpp"
#include "mpi_test_util.hpp"

namespace mpi_sparse_allgather_test {

using namespace gradcomp;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::world_rank;

namespace {

enum class overlap { random, disjoint, identical, empty_on_odd_ranks };

// Rank r's message, computable by every rank.
sparse_message message_of(int rank, std::size_t n, double density, overlap kind) {
  sparse_message m;
  m.clear(n);
  std::mt19937_64 rng(static_cast<std::uint64_t>(kind == overlap::identical ? 0 : rank) * 7 + n);
  std::bernoulli_distribution pick(density);
  std::normal_distribution<float> normal;
  if (kind == overlap::empty_on_odd_ranks && rank % 2 == 1) {
    return m;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const bool mine =
        kind == overlap::disjoint ? i % 64 == static_cast<std::size_t>(rank) % 64 : pick(rng);
    if (mine) {
      m.indices.push_back(static_cast<std::uint32_t>(i));
      m.values.push_back(normal(rng));
    }
  }
  return m;
}

} // namespace

TEST_CASE("sparse allgather sums every rank's message, identically on every rank",
          "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  for (overlap kind :
       {overlap::random, overlap::disjoint, overlap::identical, overlap::empty_on_odd_ranks}) {
    for (std::size_t n : {0, 1, 100, 50000}) {
      for (index_encoding enc : {index_encoding::u32, index_encoding::delta_varint}) {
        for (auto algorithm : {mpi::sparse_allgather_algorithm::pairwise,
                               mpi::sparse_allgather_algorithm::mpi_allgatherv}) {
          CAPTURE(static_cast<int>(kind), n, to_string(enc), static_cast<int>(algorithm),
                  comm.size());
          const sparse_message mine = message_of(comm.rank(), n, 0.01, kind);
          std::vector<float> sum(n, -1.0f);
          mpi::sparse_allgather exchange(
              comm, {.indices = enc, .dense_switch = false, .algorithm = algorithm});
          std::vector<float> expected(n, 0.0f);
          for (int r = 0; r < comm.size(); ++r) {
            accumulate(message_of(r, n, 0.01, kind), expected);
          }
          for (int repeat = 0; repeat < 2; ++repeat) { // buffers reused by the second call
            exchange(mine, sum);
            CHECK_FALSE(exchange.used_dense());
            CHECK(sum == expected);
            CHECK(identical_on_all_ranks(sum));
          }
          const std::size_t others_bytes = [&] {
            std::size_t b = 0;
            for (int r = 0; r < comm.size(); ++r) {
              b += r == comm.rank() ? 0 : encode(message_of(r, n, 0.01, kind), enc).size();
            }
            return b;
          }();
          CHECK(exchange.bytes_received() == others_bytes);
          CHECK(exchange.bytes_sent() ==
                encode(mine, enc).size() * static_cast<std::size_t>(comm.size() - 1));
        }
      }
    }
  }
}

TEST_CASE("sparse allgather switches to a dense allreduce when that moves fewer bytes",
          "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 20000;
  const sparse_message mine = message_of(comm.rank(), n, 0.9, overlap::random);
  std::vector<float> sum(n);
  mpi::sparse_allgather exchange(comm);
  exchange(mine, sum);
  std::vector<float> expected(n, 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    accumulate(message_of(r, n, 0.9, overlap::random), expected);
  }
  CHECK(exchange.used_dense() == (comm.size() > 1));
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(sum[i]) - expected[i]));
  }
  CHECK(worst <= 1e-5 * comm.size());
  CHECK(identical_on_all_ranks(sum));
}

TEST_CASE("the dense switch decides the same on every rank when message sizes differ",
          "[mpi][sparse_allgather]") {
  // rank 0 sends a nearly dense message, the others almost nothing: only the ranks with small
  // messages receive more than the ring would move. Deciding from each rank's own received
  // bytes made rank 0 stay sparse and the others go dense (found by gradcomp-train's tests
  // with gaussian_threshold, whose counts differ per rank).
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 1000;
  const double density = comm.rank() == 0 ? 0.95 : 0.002;
  const sparse_message mine = message_of(comm.rank(), n, density, overlap::random);
  std::vector<float> sum(n);
  mpi::sparse_allgather exchange(comm);
  exchange(mine, sum);
  std::vector<float> expected(n, 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    accumulate(message_of(r, n, r == 0 ? 0.95 : 0.002, overlap::random), expected);
  }
  // the same decision on every rank; with 2 ranks rank 1 receives ~5 KB > the ring's 4 KB
  const float dense_here = exchange.used_dense() ? 1.0f : 0.0f;
  CHECK(identical_on_all_ranks(std::span<const float>(&dense_here, 1)));
  if (comm.size() == 2) {
    CHECK(exchange.used_dense());
  }
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(sum[i] == Approx(expected[i]).margin(1e-5));
  }
  CHECK(identical_on_all_ranks(sum));
}

TEST_CASE("a dense-length mismatch makes every rank throw", "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    SUCCEED("a single rank cannot disagree with itself");
    return;
  }
  const std::size_t n = comm.rank() == comm.size() - 1 ? 101 : 100;
  sparse_message mine;
  mine.clear(n);
  std::vector<float> sum(n);
  mpi::sparse_allgather exchange(comm);
  CHECK_THROWS_WITH(exchange(mine, sum), Catch::Contains("different dense lengths"));
}

TEST_CASE("invalid arguments on one rank make every rank throw, that rank its own error",
          "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  for (auto algorithm : {mpi::sparse_allgather_algorithm::pairwise,
                         mpi::sparse_allgather_algorithm::mpi_allgatherv}) {
    // one bad rank, or two (every other rank must name the lower one)
    for (const auto& bad : {std::vector<int>{0}, std::vector<int>{p - 1}, std::vector<int>{1, 2}}) {
      for (const bool wrong_output : {false, true}) {
        CAPTURE(static_cast<int>(algorithm), bad, wrong_output, p);
        const bool mine_bad = std::find(bad.begin(), bad.end(), comm.rank()) != bad.end();
        sparse_message mine;
        mine.clear(100);
        if (mine_bad && !wrong_output) {
          // unsorted indices: encodable, but rejected by every decoder (the sender's own first)
          mine.indices = {50, static_cast<std::uint32_t>(10 + comm.rank())};
          mine.values = {1.0f, 2.0f};
        }
        std::vector<float> sum(mine_bad && wrong_output ? 99 : 100);
        mpi::sparse_allgather exchange(comm,
                                       {.indices = index_encoding::u32, .algorithm = algorithm});
        std::string what;
        int kind = 0; // 1 wire_error, 2 mpi_error, 3 invalid_argument
        try {
          exchange(mine, sum);
        } catch (const wire_error& e) {
          what = e.what();
          kind = 1;
        } catch (const mpi::mpi_error& e) {
          what = e.what();
          kind = 2;
        } catch (const std::invalid_argument& e) {
          what = e.what();
          kind = 3;
        }
        const int first_bad = *std::min_element(bad.begin(), bad.end());
        if (first_bad >= p) {
          CHECK(kind == 0);
        } else if (comm.rank() == first_bad) { // its own check, not a relayed one
          CHECK(kind == (wrong_output ? 3 : 1));
          CHECK_THAT(what,
                     Catch::Contains(wrong_output ? "output has 99 elements"
                                                  : "index " + std::to_string(10 + first_bad)));
        } else {
          CHECK(kind == 2);
          CHECK_THAT(what, Catch::Contains("rank " + std::to_string(first_bad) +
                                           " passed invalid arguments"));
        }
        // the communicator and the object stay usable afterwards
        sparse_message fine;
        fine.clear(100);
        fine.indices = {static_cast<std::uint32_t>(comm.rank())};
        fine.values = {1.0f};
        sum.assign(100, -1.0f);
        exchange(fine, sum);
        CHECK(sum[0] == 1.0f);
        CHECK(sum[static_cast<std::size_t>(p - 1)] == 1.0f);
      }
    }
  }
}

// Fault injection: fault_injection.hpp (a byte message sent with corrupting_tag, or gathered,
// while corrupt_sparse_sends is set, leaves with its last fp32 value replaced by a NaN).
using gradcomp::test::corrupt_sparse_sends;
using gradcomp::test::corrupting_tag;

TEST_CASE("a message corrupted on the wire makes every receiver throw a wire_error naming the "
          "lowest bad sender, after the exchange",
          "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  for (auto algorithm : {mpi::sparse_allgather_algorithm::pairwise,
                         mpi::sparse_allgather_algorithm::mpi_allgatherv}) {
    for (const auto& bad : {std::vector<int>{p - 1}, std::vector<int>{1, 2}}) {
      CAPTURE(static_cast<int>(algorithm), bad, p);
      sparse_message mine;
      mine.clear(100);
      mine.indices = {static_cast<std::uint32_t>(comm.rank())};
      mine.values = {1.0f};
      std::vector<float> sum(100);
      mpi::sparse_allgather exchange(
          comm, {.indices = index_encoding::u32, .algorithm = algorithm, .tag = corrupting_tag});
      corrupt_sparse_sends = std::find(bad.begin(), bad.end(), comm.rank()) != bad.end();
      std::string what;
      try {
        exchange(mine, sum);
      } catch (const wire_error& e) {
        what = e.what();
      }
      corrupt_sparse_sends = false;
      // a sender decodes its own bytes, not what left: it sees only the others' corruption
      int expected = -1;
      for (const int b : bad) {
        if (b < p && b != comm.rank() && (expected < 0 || b < expected)) {
          expected = b;
        }
      }
      if (expected < 0) {
        CHECK(what.empty());
      } else {
        CHECK_THAT(what, Catch::Contains("rank " + std::to_string(expected) + "'s message"));
        CHECK_THAT(what, Catch::Contains("is NaN"));
      }
      exchange(mine, sum); // usable afterwards
      CHECK(sum[0] == 1.0f);
      CHECK(sum[static_cast<std::size_t>(p - 1)] == 1.0f);
    }
  }
  gradcomp::test::forget_corrupted_messages();
}

TEST_CASE("ranks with different options throw on every rank instead of waiting",
          "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    return; // nobody to disagree with
  }
  const bool last = comm.rank() == comm.size() - 1;
  const std::vector<mpi::sparse_allgather_options> differing = {
      {.algorithm = last ? mpi::sparse_allgather_algorithm::mpi_allgatherv
                         : mpi::sparse_allgather_algorithm::pairwise},
      {.tag = last ? 7 : 8},
      {.dense_switch = !last},
      {.dense = {.segment_bytes = last ? std::size_t{4096} : std::size_t{8192}}},
  };
  for (std::size_t c = 0; c < differing.size(); ++c) {
    CAPTURE(c);
    sparse_message mine;
    mine.clear(100);
    std::vector<float> sum(100);
    mpi::sparse_allgather exchange(comm, differing[c]);
    CHECK_THROWS_WITH(exchange(mine, sum), Catch::Contains("ranks pass different options (rank 0 "
                                                           "and rank " +
                                                           std::to_string(comm.size() - 1)));
    exchange.wait(); // nothing pending
  }
}

TEST_CASE("sparse allgather rejects a tag outside [0, MPI_TAG_UB]", "[mpi][sparse_allgather]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  CHECK_THROWS_WITH(mpi::sparse_allgather(comm, {.tag = -1}),
                    Catch::Contains("tag -1 is outside [0, MPI_TAG_UB = "));
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  REQUIRE(found);
  const int ub = *static_cast<int*>(value);
  if (ub < INT_MAX) {
    CHECK_THROWS_WITH(mpi::sparse_allgather(comm, {.tag = ub + 1}),
                      Catch::Contains("is outside [0, MPI_TAG_UB"));
  }
  CHECK_NOTHROW(mpi::sparse_allgather(comm, {.tag = ub}));
}

TEST_CASE("quantized messages travel packed and sum as their values",
          "[mpi][sparse_allgather][quantizer]") {
  // every rank's QSGD message (its own seed), gathered: the sum equals the local sum of every
  // rank's message in rank order, and each message costs 32 + 9 + ceil(n x 5 / 8) bytes plus the
  // segment table of its buckets of 512 (a u32 count, then a 2-byte varint count and an f32 scale
  // for each of the ceil(3001 / 512) = 6 buckets)
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 3001;
  const auto message_of_rank = [&](int r) {
    sparse_message m;
    qsgd(15, static_cast<std::uint64_t>(r)).compress(gradcomp::test::rank_values(n, r, 5), m);
    return m;
  };
  const sparse_message mine = message_of_rank(comm.rank());
  std::vector<float> expected(n, 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    accumulate(message_of_rank(r), expected);
  }
  mpi::sparse_allgather exchange(comm, {.dense_switch = false});
  std::vector<float> sum(n, -1.0f);
  exchange(mine, sum);
  CHECK(sum == expected);
  CHECK(identical_on_all_ranks(sum));
  REQUIRE(mine.quantization_segments.size() == 6);
  const std::size_t bytes = 32 + 9 + (n * 5 + 7) / 8 + 4 + 6 * (2 + 4);
  CHECK(encode(mine).size() == bytes);
  CHECK(exchange.bytes_sent() == bytes * static_cast<std::size_t>(comm.size() - 1));
}

} // namespace mpi_sparse_allgather_test
