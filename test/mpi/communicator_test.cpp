// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::communicator and environment (mpi/communicator.hpp): the communicator is a
// duplicate of the parent (same ranks, its own context: messages on the parent never match a
// receive on it), with rank() and size() as MPI_Comm_rank / MPI_Comm_size give them, of any
// parent (a split of MPI_COMM_WORLD too), with MPI_ERRORS_RETURN set; a move hands the handle
// over and leaves the source with none; an environment made after MPI_Init neither initialises
// nor finalises MPI and reports MPI's thread level; thread levels are named, and the check the
// pipeline transports make refuses exactly a thread other than MPI's main one below
// MPI_THREAD_SERIALIZED (the end-to-end case, MPI initialised with MPI_THREAD_FUNNELED, is its
// own program: thread_level_main.cpp). Collective: every rank runs every test.
#include <gradcomp/mpi/communicator.hpp>

#include <mpi.h>

#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_communicator_test {

using namespace gradcomp;

TEST_CASE("communicator duplicates its parent: same ranks, its own messages, errors returned",
          "[mpi][communicator]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  int world_rank = -1, world_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CHECK(comm.rank() == world_rank);
  CHECK(comm.size() == world_size);
  REQUIRE(comm.native() != MPI_COMM_NULL);
  CHECK(comm.native() != MPI_COMM_WORLD);
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(comm.native(), MPI_COMM_WORLD, &relation);
  CHECK(relation == MPI_CONGRUENT); // the same group in the same order, another context
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(comm.native(), &handler);
  CHECK(handler == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&handler);

  // a message sent to this rank on MPI_COMM_WORLD does not match a receive posted on the
  // duplicate first, with the same source and tag (rank-local: each rank messages itself)
  int on_duplicate = -1, on_world = -1;
  const int to_world = 1, to_duplicate = 2;
  MPI_Request duplicate_receive = MPI_REQUEST_NULL;
  MPI_Irecv(&on_duplicate, 1, MPI_INT, world_rank, 5, comm.native(), &duplicate_receive);
  MPI_Sendrecv(&to_world, 1, MPI_INT, world_rank, 5, &on_world, 1, MPI_INT, world_rank, 5,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(on_world == to_world);
  int arrived = 1;
  MPI_Test(&duplicate_receive, &arrived, MPI_STATUS_IGNORE);
  CHECK(arrived == 0);
  MPI_Send(&to_duplicate, 1, MPI_INT, world_rank, 5, comm.native());
  test::wait_yielding(duplicate_receive);
  CHECK(on_duplicate == to_duplicate);
}

TEST_CASE("communicator of a split parent numbers the ranks of its part", "[mpi][communicator]") {
  const int world_rank = test::world_rank();
  const int world_size = test::world_size();
  MPI_Comm halves = MPI_COMM_NULL; // even and odd ranks, each in world order
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &halves) == MPI_SUCCESS);
  {
    const mpi::communicator comm(halves);
    CHECK(comm.rank() == world_rank / 2);
    CHECK(comm.size() == (world_size + 1 - world_rank % 2) / 2);
    int relation = MPI_UNEQUAL;
    MPI_Comm_compare(comm.native(), halves, &relation);
    CHECK(relation == MPI_CONGRUENT);
  } // freed (collective over the half) before the parent
  MPI_Comm_free(&halves);
}

TEST_CASE("a moved communicator hands its handle over", "[mpi][communicator]") {
  mpi::communicator first(MPI_COMM_WORLD);
  const MPI_Comm handle = first.native();
  mpi::communicator second(std::move(first));
  CHECK(second.native() == handle);
  CHECK(second.rank() == test::world_rank());
  CHECK(second.size() == test::world_size());
  CHECK(first.native() == MPI_COMM_NULL); // NOLINT(bugprone-use-after-move): documented state
  // move assignment: the target's own duplicate is freed, the source's taken over
  mpi::communicator third(MPI_COMM_WORLD);
  third = std::move(second);
  CHECK(third.native() == handle);
  CHECK(second.native() == MPI_COMM_NULL); // NOLINT(bugprone-use-after-move)
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(third.native(), MPI_COMM_WORLD, &relation);
  CHECK(relation == MPI_CONGRUENT);
}

TEST_CASE("an environment made after MPI_Init leaves MPI running and reports its thread level",
          "[mpi][communicator]") {
  int provided = -1;
  MPI_Query_thread(&provided);
  {
    const mpi::environment env(MPI_THREAD_SINGLE);
    CHECK(env.thread_level() == provided);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0); // it did not initialise MPI, so it did not finalise it
  if (provided < MPI_THREAD_MULTIPLE) {
    CHECK_THROWS_AS(mpi::environment(MPI_THREAD_MULTIPLE), mpi::mpi_error);
  } else {
    CHECK(mpi::environment(MPI_THREAD_MULTIPLE).thread_level() == MPI_THREAD_MULTIPLE);
  }
}

TEST_CASE("thread levels are named, an unknown one by its number", "[mpi][communicator]") {
  CHECK(mpi::thread_level_name(MPI_THREAD_SINGLE) == "MPI_THREAD_SINGLE");
  CHECK(mpi::thread_level_name(MPI_THREAD_FUNNELED) == "MPI_THREAD_FUNNELED");
  CHECK(mpi::thread_level_name(MPI_THREAD_SERIALIZED) == "MPI_THREAD_SERIALIZED");
  CHECK(mpi::thread_level_name(MPI_THREAD_MULTIPLE) == "MPI_THREAD_MULTIPLE");
  CHECK(mpi::thread_level_name(-7) == "thread level -7");
}

TEST_CASE("the transports' thread check refuses another thread below MPI_THREAD_SERIALIZED only",
          "[mpi][communicator]") {
  for (const int level :
       {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE}) {
    CAPTURE(level);
    CHECK_NOTHROW(mpi::detail::check_thread_level(level, true, "x")); // MPI's main thread
    if (level >= MPI_THREAD_SERIALIZED) {
      CHECK_NOTHROW(mpi::detail::check_thread_level(level, false, "x"));
      continue;
    }
    try {
      mpi::detail::check_thread_level(level, false, "sparse_exchange");
      FAIL("no error below MPI_THREAD_SERIALIZED");
    } catch (const mpi::mpi_error& e) {
      const std::string what = e.what();
      CHECK(what.find("sparse_exchange") != std::string::npos);
      CHECK(what.find(mpi::thread_level_name(level)) != std::string::npos);
      CHECK(what.find("needs MPI_THREAD_SERIALIZED") != std::string::npos);
    }
  }
  // this program asks for MPI_THREAD_MULTIPLE: the check passes here and on another thread
  CHECK_NOTHROW(mpi::detail::require_thread_level_here("x"));
  std::exception_ptr error;
  std::thread([&] {
    try {
      mpi::detail::require_thread_level_here("x");
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  CHECK((error == nullptr) == (provided >= MPI_THREAD_SERIALIZED));
}

} // namespace mpi_communicator_test
