// SPDX-License-Identifier: Apache-2.0
// Hierarchical allreduce, both variants, grouped by node or by 1, 2, 3 consecutive ranks (groups
// that do and do not divide the rank count): against MPI_Allreduce, or the sum of every rank's
// data that every rank computes in double (tolerance for reassociation), exact on integer data,
// bit-identical on every rank, several pieces, nonblocking progress, the group layout, and a
// length mismatch that every rank reports.
// Collective: every rank runs every test.
#include <gradcomp/cost/transport.hpp>
#include <gradcomp/mpi.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <thread>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_hierarchical_allreduce_test {

using namespace gradcomp;
using gradcomp::test::describe;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::identity_batch;
using gradcomp::test::rank_values;
using gradcomp::test::sum_of_rank_values;
using gradcomp::test::world_rank;

namespace {

constexpr mpi::hierarchical_variant variants[] = {mpi::hierarchical_variant::leader,
                                                  mpi::hierarchical_variant::reduce_scatter};

double worst_error(std::span<const float> got, std::span<const float> expected) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - expected[i]));
  }
  return worst;
}

} // namespace

TEST_CASE("hierarchical allreduce equals MPI_Allreduce and is bit-identical on every rank",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  identity_batch sums; // compared across ranks once, at the end
  constexpr std::size_t sizes[] = {0, 1, 2, 3, 5, 7, 1000, 65537};
  // what MPI_Allreduce sums, computed on every rank: the ranks' data, summed in double
  std::vector<std::vector<float>> expected_sums;
  for (const std::size_t n : sizes) {
    expected_sums.push_back(sum_of_rank_values(n, comm.size(), n + 3));
  }
  for (mpi::hierarchical_variant variant : variants) {
    for (int group_size : {0, 1, 2, 3, 4}) {
      mpi::hierarchical_allreduce allreduce(comm, {.group_size = group_size, .variant = variant});
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        const std::size_t n = sizes[k];
        CAPTURE(static_cast<int>(variant), group_size, n, comm.size());
        std::vector<float> data = rank_values(n, world_rank(), n + 3);
        const std::vector<float>& expected = expected_sums[k];
        allreduce(data);
        CHECK(worst_error(data, expected) <= 1e-5 * comm.size());
        sums.add(data, describe("variant ", static_cast<int>(variant), ", group_size ", group_size,
                                ", n ", n));
      }
    }
  }
  sums.check();
}

TEST_CASE("hierarchical allreduce sums exactly on integer-valued data",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 12345;
  for (mpi::hierarchical_variant variant : variants) {
    for (int group_size : {1, 2, 3}) {
      CAPTURE(static_cast<int>(variant), group_size, p);
      std::vector<float> data(n);
      for (std::size_t i = 0; i < n; ++i) {
        data[i] = static_cast<float>((i % 17) * (comm.rank() + 1));
      }
      mpi::hierarchical_allreduce allreduce(comm, {.group_size = group_size, .variant = variant});
      allreduce(data);
      bool all_exact = true;
      for (std::size_t i = 0; i < n; ++i) {
        all_exact = all_exact && data[i] == static_cast<float>((i % 17) * p * (p + 1) / 2);
      }
      CHECK(all_exact);
    }
  }
}

TEST_CASE("hierarchical allreduce processes long vectors piece by piece",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  struct sizes {
    std::size_t n, piece_bytes;
  };
  identity_batch sums; // compared across ranks once, at the end
  for (mpi::hierarchical_variant variant : variants) {
    for (int group_size : {2, 3}) {
      for (auto [n, piece_bytes] : {sizes{37, 4}, sizes{10007, 1000}, sizes{10007, 8000}}) {
        std::vector<float> serial_result;
        for (const bool pipelined : {false, true}) {
          CAPTURE(static_cast<int>(variant), group_size, n, piece_bytes, pipelined, comm.size());
          std::vector<float> data = rank_values(n, world_rank(), 5);
          const std::vector<float> expected = sum_of_rank_values(n, comm.size(), 5);
          mpi::hierarchical_allreduce allreduce(comm, {.group_size = group_size,
                                                       .variant = variant,
                                                       .segment_bytes = 64,
                                                       .piece_bytes = piece_bytes,
                                                       .pipelined = pipelined});
          allreduce(data);
          CHECK(worst_error(data, expected) <= 1e-5 * comm.size());
          sums.add(data,
                   describe("variant ", static_cast<int>(variant), ", group_size ", group_size,
                            ", n ", n, ", piece_bytes ", piece_bytes, ", pipelined ", pipelined));
          const std::size_t pieces = (n * 4 + piece_bytes / 4 * 4 - 1) / (piece_bytes / 4 * 4);
          CHECK(allreduce.piece_count() == (comm.size() == 1 ? 0 : pieces));
          if (comm.size() > 1) { // pipelined: the first two reduces go out together
            const std::size_t peak = allreduce.peak_pieces_in_flight();
            CHECK(peak >= (pipelined ? std::min<std::size_t>(pieces, 2) : 1));
            CHECK(peak <= (pipelined ? 3 : 1));
          }
          if (!pipelined) {
            serial_result = data;
          } else { // the schedule overlaps pieces but sums each element in the same order
            CHECK(data == serial_result);
          }
        }
      }
    }
  }
  sums.check();
}

TEST_CASE("hierarchical allreduce pipelines pieces exactly on integer-valued data",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 50001; // 49 pieces of 1024 floats and a shorter one
  for (mpi::hierarchical_variant variant : variants) {
    for (int group_size : {2, 3}) {
      CAPTURE(static_cast<int>(variant), group_size, p);
      mpi::hierarchical_allreduce allreduce(
          comm, {.group_size = group_size, .variant = variant, .piece_bytes = 4096});
      for (int round = 0; round < 2; ++round) { // the slots are reused across operations
        std::vector<float> data(n);
        for (std::size_t i = 0; i < n; ++i) {
          data[i] = static_cast<float>((i % 29 + static_cast<std::size_t>(round)) *
                                       static_cast<std::size_t>(comm.rank() + 1));
        }
        allreduce(data);
        bool all_exact = true;
        for (std::size_t i = 0; i < n; ++i) {
          all_exact =
              all_exact && data[i] == static_cast<float>((i % 29 + round) * p * (p + 1) / 2);
        }
        CHECK(all_exact);
      }
    }
  }
}

TEST_CASE("hierarchical allreduce progresses through test() while the caller computes",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  for (mpi::hierarchical_variant variant : variants) {
    CAPTURE(static_cast<int>(variant), comm.size());
    std::vector<float> data = rank_values(200000, world_rank(), 42);
    std::vector<float> expected(data.size());
    MPI_Allreduce(data.data(), expected.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    mpi::hierarchical_allreduce allreduce(
        comm, {.group_size = 2, .variant = variant, .segment_bytes = 8192});
    allreduce.start(data);
    volatile double busy = 0.0;
    while (!allreduce.test()) {
      for (int i = 0; i < 1000; ++i) {
        busy = busy + std::sqrt(static_cast<double>(i)); // work overlapped with communication
      }
      std::this_thread::yield();
    }
    CHECK(worst_error(data, expected) <= 1e-5 * comm.size());
    CHECK(identical_on_all_ranks(data));
    // the object is reusable
    allreduce(data);
    CHECK(identical_on_all_ranks(data));
  }
}

TEST_CASE("hierarchical allreduce with groups of one rank is a flat ring, in one piece",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  std::vector<float> data = rank_values(10007, world_rank(), 11);
  std::vector<float> ring_result = data;
  mpi::ring_allreduce(comm, {.segment_bytes = 64})(ring_result);
  mpi::hierarchical_allreduce allreduce(comm,
                                        {.group_size = 1, .segment_bytes = 64, .piece_bytes = 400});
  allreduce(data);
  CHECK(data == ring_result); // the same ring over the whole vector, bit for bit
  CHECK(allreduce.piece_count() == (comm.size() == 1 ? 0 : 1));
}

TEST_CASE("hierarchical allreduce groups consecutive ranks", "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int r = comm.rank();
  for (mpi::hierarchical_variant variant : variants) {
    for (int g : {1, 2, 3, 7}) {
      CAPTURE(static_cast<int>(variant), g, p);
      mpi::hierarchical_allreduce allreduce(comm, {.group_size = g, .variant = variant});
      const int groups = (p + g - 1) / g;
      const int smallest = std::min(g, p - (groups - 1) * g);
      CHECK(allreduce.group_count() == groups);
      CHECK(allreduce.group_rank() == r % g);
      CHECK(allreduce.group_size() == std::min(g, p - r / g * g));
      CHECK(allreduce.smallest_group_size() == smallest);
      if (variant == mpi::hierarchical_variant::leader) {
        CHECK(allreduce.in_inter_group_stage() == (r % g == 0));
      } else {
        CHECK(allreduce.in_inter_group_stage() == (r % g < smallest));
      }
    }
  }
  mpi::hierarchical_allreduce by_node(comm); // one node here: one group of every rank
  CHECK(by_node.group_count() == 1);
  CHECK(by_node.group_size() == p);
}

TEST_CASE("hierarchical allreduce: ranks passing different lengths all get an exception",
          "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    SUCCEED("a single rank cannot disagree with itself");
    return;
  }
  for (mpi::hierarchical_variant variant : variants) {
    CAPTURE(static_cast<int>(variant));
    mpi::hierarchical_allreduce allreduce(comm, {.group_size = 2, .variant = variant});
    std::vector<float> data(100 + static_cast<std::size_t>(comm.rank() == 1 ? 1 : 0), 1.0f);
    CHECK_THROWS_WITH(allreduce(data), Catch::Contains("different lengths"));
    // the object and the communicator stay usable afterwards
    std::vector<float> ok(10, 1.0f);
    allreduce(ok);
    CHECK(ok[9] == static_cast<float>(comm.size()));
  }
}

TEST_CASE("hierarchical allreduce and its ring can be abandoned on every rank and reused",
          "[mpi][hierarchical_allreduce]") {
  // Every rank drops the operation at the same point, right after start(): the ring has posted
  // its first step (eager-sized messages: its sends complete without the receivers), the
  // hierarchical allreduce only its length agreement (every rank posted it). A drop in the
  // middle of the pipeline cannot be tested this way: ranks reach different pieces.
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  std::vector<float> data(64, 1.0f);
  mpi::ring_allreduce ring(comm);
  ring.start(data);
  ring.abandon();
  ring.abandon(); // idle: no-op
  std::vector<float> ones(1000, 1.0f);
  ring(ones);
  CHECK(ones[999] == static_cast<float>(p));
  for (mpi::hierarchical_variant variant : variants) {
    CAPTURE(static_cast<int>(variant), p);
    mpi::hierarchical_allreduce allreduce(
        comm, {.group_size = 2, .variant = variant, .piece_bytes = 256});
    allreduce.start(data);
    allreduce.abandon();
    std::fill(ones.begin(), ones.end(), 1.0f);
    allreduce(ones); // 16 pieces
    CHECK(ones[0] == static_cast<float>(p));
    CHECK(ones[999] == static_cast<float>(p));
  }
}

TEST_CASE("hierarchical allreduce's cost model prices the transport's default pieces",
          "[mpi][hierarchical_allreduce]") {
  CHECK(cost::transport_options{}.piece_bytes ==
        static_cast<double>(mpi::hierarchical_allreduce_options{}.piece_bytes));
}

TEST_CASE("hierarchical allreduce options are validated", "[mpi][hierarchical_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  CHECK_THROWS_AS(mpi::hierarchical_allreduce(comm, {.group_size = -1}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::hierarchical_allreduce(comm, {.segment_bytes = 3}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::hierarchical_allreduce(comm, {.piece_bytes = 2}), std::invalid_argument);
}

} // namespace mpi_hierarchical_allreduce_test
