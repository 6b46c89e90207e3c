// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::native_allreduce against a blocking MPI_Allreduce on the same data, in pieces
// and whole; mismatched lengths throw on every rank; an operation dropped mid-way completes its
// collectives instead of freeing them (checked through a PMPI override of MPI_Request_free).
#include <gradcomp/mpi.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_native_allreduce_test {

using namespace gradcomp;
using gradcomp::test::same_bits;

TEST_CASE("native_allreduce equals MPI_Allreduce, whole and in pieces", "[native_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  test::identity_batch sums; // compared across ranks once, at the end
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{10001}}) {
    for (const std::size_t piece_bytes :
         {std::size_t{4}, std::size_t{4096}, std::size_t{1} << 30}) {
      CAPTURE(n, piece_bytes);
      mpi::native_allreduce_options o;
      o.piece_bytes = piece_bytes;
      mpi::native_allreduce op(comm, o);
      std::vector<float> data = test::rank_values(n, me, n + piece_bytes);
      std::vector<float> expected(n);
      MPI_Allreduce(data.data(), expected.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      op.start(std::span<float>(data));
      op.wait();
      REQUIRE(same_bits(data, expected));
      sums.add(data, test::describe("n ", n, ", piece_bytes ", piece_bytes));
    }
  }
  sums.check();
}

TEST_CASE("native_allreduce rejects different lengths on every rank", "[native_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::native_allreduce op(comm);
  std::vector<float> data(static_cast<std::size_t>(10 + test::world_rank()), 1.0f);
  if (test::world_size() == 1) {
    op(std::span<float>(data));
    CHECK(data == std::vector<float>(10, 1.0f));
    return;
  }
  REQUIRE_THROWS_WITH(op(std::span<float>(data)), Catch::Contains("different lengths"));
  // usable again afterwards
  std::vector<float> same(5, 1.0f);
  op(std::span<float>(same));
  CHECK(same == std::vector<float>(5, static_cast<float>(test::world_size())));
}

TEST_CASE("native_allreduce rejects a piece below one float", "[native_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::native_allreduce_options o;
  o.piece_bytes = 3;
  REQUIRE_THROWS_WITH(mpi::native_allreduce(comm, o), Catch::Contains("piece_bytes 3"));
}

// Fault detection through MPI's profiling interface: this executable's MPI_Request_free
// replaces the library's for every caller and forwards to PMPI_Request_free, counting the calls
// on a request that has not completed (MPI_Request_get_status, which does not free it). Freeing
// a pending nonblocking collective is erroneous (MPICH aborts the job), and a freed pending
// receive still writes into its buffer when its message arrives: a dropped gradcomp operation
// completes those instead (detail::abandon).
namespace {
std::atomic<int> active_frees{0};
} // namespace

extern "C" int MPI_Request_free(MPI_Request* request) {
  int done = 1;
  if (request != nullptr && *request != MPI_REQUEST_NULL) {
    PMPI_Request_get_status(*request, &done, MPI_STATUS_IGNORE);
  }
  if (done == 0) {
    ++active_frees;
  }
  return PMPI_Request_free(request);
}

} // namespace mpi_native_allreduce_test

// (outside the file's namespace: gradcomp::test's function, declared in mpi_test_util.hpp)
int gradcomp::test::active_request_frees() {
  return mpi_native_allreduce_test::active_frees.load();
}

namespace mpi_native_allreduce_test {

TEST_CASE("native_allreduce dropped mid-way completes its collective instead of freeing it",
          "[native_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const auto p = static_cast<float>(comm.size());
  for (const bool check_lengths : {false, true}) {
    CAPTURE(check_lengths);
    const int before = test::active_request_frees();
    std::vector<float> data(std::size_t{1} << 16, 1.0f);
    {
      mpi::native_allreduce op(comm, {.check_lengths = check_lengths});
      if (comm.rank() != 0) { // rank 0 drops its operation before the others have posted theirs
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      op.start(std::span<float>(data));
    } // destroyed mid-way on every rank: the pending collective is waited for, not freed
    CHECK(test::active_request_frees() == before);
    // what was pending has completed: the sum itself, or only the length agreement
    CHECK(data.front() == (check_lengths ? 1.0f : p));
    CHECK(data.back() == (check_lengths ? 1.0f : p));
    // and the communicator stays usable
    mpi::native_allreduce op(comm);
    std::vector<float> ones(8, 1.0f);
    op(std::span<float>(ones));
    CHECK(ones == std::vector<float>(8, p));
  }
}

} // namespace mpi_native_allreduce_test
