// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::native_allreduce against a blocking MPI_Allreduce on the same data, in pieces
// and whole; mismatched lengths throw on every rank.
#include <gradcomp/mpi.hpp>

#include <catch2/catch.hpp>

#include <vector>

#include "mpi_test_util.hpp"

using namespace gradcomp;

TEST_CASE("native_allreduce equals MPI_Allreduce, whole and in pieces", "[native_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{10001}}) {
    for (const std::size_t piece_bytes : {std::size_t{4}, std::size_t{4096}, std::size_t{1} << 30}) {
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
      REQUIRE(data == expected);
      REQUIRE(test::identical_on_all_ranks(data));
    }
  }
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
