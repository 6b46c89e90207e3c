// SPDX-License-Identifier: Apache-2.0
// Ring allreduce against MPI_Allreduce, or the sum of every rank's data that every rank computes
// in double (tolerance for reassociation), bit-identical results on every rank, any size and
// segment size, nonblocking progress, and a length mismatch that every rank reports instead of
// hanging, and an operation dropped during its length check. The per-step trace:
// test/mpi/ring_trace_test.cpp; every wait policy: test/mpi/wait_policy_test.cpp.
// Collective: every rank runs every test.
#include <gradcomp/mpi.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_ring_allreduce_test {

using namespace gradcomp;
using gradcomp::test::describe;
using gradcomp::test::identical_on_all_ranks;
using gradcomp::test::identity_batch;
using gradcomp::test::rank_values;
using gradcomp::test::sum_of_rank_values;
using gradcomp::test::world_rank;

TEST_CASE("ring allreduce equals MPI_Allreduce and is bit-identical on every rank",
          "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  identity_batch sums; // compared across ranks once, at the end
  for (std::size_t n : {0, 1, 2, 3, 5, 7, 1000, 65537, 300000}) {
    // what MPI_Allreduce sums, computed on every rank: the ranks' data, summed in double
    const std::vector<float> expected = sum_of_rank_values(n, comm.size(), n);
    for (std::size_t segment_bytes : {4, 1024, 1 << 18}) {
      CAPTURE(n, segment_bytes, comm.size());
      std::vector<float> data = rank_values(n, world_rank(), n);
      std::vector<float> one_step = data;
      mpi::ring_allreduce ring(comm, {.segment_bytes = segment_bytes});
      ring(data);
      double worst = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(data[i]) - expected[i]));
      }
      CHECK(worst <= 1e-5 * comm.size());
      sums.add(data, describe("n ", n, ", segment_bytes ", segment_bytes));
      // pipelined steps (the default, 2 in flight) sum in the same order as one step at a time
      mpi::ring_allreduce sequential(comm, {.segment_bytes = segment_bytes, .steps_in_flight = 1});
      sequential(one_step);
      CHECK(one_step == data);
    }
  }
  sums.check();
}

TEST_CASE("ring allreduce sums exactly on integer-valued data", "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const std::size_t n = 12345;
  std::vector<float> data(n);
  for (std::size_t i = 0; i < n; ++i) {
    data[i] = static_cast<float>((i % 17) * (comm.rank() + 1));
  }
  mpi::ring_allreduce ring(comm, {.segment_bytes = 4096});
  ring(data);
  const int p = comm.size();
  bool all_exact = true;
  for (std::size_t i = 0; i < n; ++i) {
    all_exact = all_exact && data[i] == static_cast<float>((i % 17) * p * (p + 1) / 2);
  }
  CHECK(all_exact);
}

TEST_CASE("ring allreduce progresses through test() while the caller computes",
          "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  std::vector<float> data = rank_values(200000, world_rank(), 42);
  std::vector<float> expected(data.size());
  MPI_Allreduce(data.data(), expected.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  mpi::ring_allreduce ring(comm, {.segment_bytes = 8192});
  ring.start(data);
  volatile double busy = 0.0;
  while (!ring.test()) {
    for (int i = 0; i < 1000; ++i) {
      busy = busy + std::sqrt(static_cast<double>(i)); // work overlapped with communication
    }
    std::this_thread::yield();
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(data[i]) - expected[i]));
  }
  CHECK(worst <= 1e-5 * comm.size());
  CHECK(identical_on_all_ranks(data));
  // the object is reusable
  ring(data);
  CHECK(identical_on_all_ranks(data));
}

TEST_CASE("ranks passing different lengths all get an exception", "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    SUCCEED("a single rank cannot disagree with itself");
    return;
  }
  std::vector<float> data(100 + static_cast<std::size_t>(comm.rank() == 1 ? 1 : 0), 1.0f);
  mpi::ring_allreduce ring(comm);
  CHECK_THROWS_WITH(ring(data), Catch::Contains("different lengths"));
  // the communicator stays usable afterwards
  std::vector<float> ok(10, 1.0f);
  ring(ok);
  CHECK(ok[0] == static_cast<float>(comm.size()));
}

TEST_CASE("ring allreduce options are validated", "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  CHECK_THROWS_AS(mpi::ring_allreduce(comm, {.segment_bytes = 2}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::ring_allreduce(comm, {.tag_base = -1}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::ring_allreduce(comm, {.steps_in_flight = 0}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::ring_allreduce(comm, {.steps_in_flight = 3}), std::invalid_argument);
}

TEST_CASE("ring allreduce dropped during its length check completes the check instead of "
          "freeing it",
          "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int before = test::active_request_frees();
  std::vector<float> data(1000, 1.0f);
  {
    mpi::ring_allreduce ring(comm);
    if (comm.rank() != 0) { // rank 0 drops its operation before the others have begun theirs
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ring.start(data);
  } // destroyed mid-way on every rank: the length agreement (a collective) is waited for
  CHECK(test::active_request_frees() == before);
  CHECK(data[0] == 1.0f); // the ring itself never started
  // the communicator stays usable
  mpi::ring_allreduce ring(comm);
  ring(data);
  CHECK(data[999] == static_cast<float>(comm.size()));
}

} // namespace mpi_ring_allreduce_test
