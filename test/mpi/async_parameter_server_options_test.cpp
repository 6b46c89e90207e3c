// SPDX-License-Identifier: Apache-2.0
// The options of the asynchronous parameter server (mpi/async_parameter_server_options.hpp):
// each invalid option is rejected at construction with a message naming it, and options or
// lengths that differ between ranks, or one rank's invalid options, make every rank throw (none
// waits). Collective: every rank runs every test; with one rank (no worker possible) only the
// checks that need no worker run.
#include <gradcomp/mpi/async_parameter_server.hpp>
#include <gradcomp/mpi/async_parameter_server_options.hpp>
#include <gradcomp/mpi/communicator.hpp>

#include <limits>
#include <stdexcept>
#include <string>

#include "../common/catch.hpp"

namespace mpi_async_parameter_server_options_test {

using namespace gradcomp;

namespace {

using asgd = mpi::async_parameter_server;

} // namespace

TEST_CASE("async parameter server: options are validated and agreed on every rank",
          "[mpi][async_parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  CHECK_THROWS_WITH(asgd(comm, 10, {.servers = 0}), Catch::Contains("servers 0 is below 1"));
  CHECK_THROWS_WITH(asgd(comm, 10, {.servers = p}), Catch::Contains("leave no worker"));
  if (p == 1) {
    return; // every option below would also fail for want of a worker
  }
  CHECK_THROWS_WITH(asgd(comm, 10, {.staleness_bound = -1}), Catch::Contains("negative"));
  CHECK_THROWS_WITH(asgd(comm, 10, {.max_pushes_in_flight = 0}), Catch::Contains("below 1"));
  CHECK_THROWS_WITH(asgd(comm, 10, {.tag_base = -1}), Catch::Contains("tag_base -1"));
  CHECK_THROWS_WITH(asgd(comm, 10, {.tag_base = std::numeric_limits<int>::max()}),
                    Catch::Contains("MPI_TAG_UB"));
  CHECK_THROWS_AS(asgd(comm, 10, {.indices = index_encoding::none}), std::invalid_argument);
  // one rank disagrees: every rank throws, none waits
  CHECK_THROWS_WITH(asgd(comm, 10, {.staleness_bound = comm.rank() == 0 ? 1 : 0}),
                    Catch::Contains("different options (staleness_bound from 0 to 1"));
  CHECK_THROWS_WITH(asgd(comm, comm.rank() == p - 1 ? 11 : 10),
                    Catch::Contains("different options (n from 10 to 11"));
  // one rank's options are invalid: it gets the reason, the others its rank
  if (comm.rank() == p - 1) {
    CHECK_THROWS_AS(asgd(comm, 10, {.max_pushes_in_flight = 0}), std::invalid_argument);
  } else {
    CHECK_THROWS_WITH(asgd(comm, 10),
                      Catch::Contains("rank " + std::to_string(p - 1) + " passed invalid options"));
  }
}

} // namespace mpi_async_parameter_server_options_test
