// SPDX-License-Identifier: Apache-2.0
// The options of the parameter server (mpi/parameter_server_options.hpp): each invalid option is
// rejected at construction, the message naming the value and the limit it breaks, and the
// limits themselves are accepted; options that differ between ranks (the server count, the pull
// format) make every rank throw before any payload moves. Collective: every rank runs every
// test.
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/parameter_server.hpp>
#include <gradcomp/mpi/parameter_server_options.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <climits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/catch.hpp"

namespace mpi_parameter_server_options_test {

using namespace gradcomp;

TEST_CASE("parameter server options are validated", "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  using mpi::server_placement;
  CHECK_THROWS_AS(mpi::parameter_server(comm, {.servers = 0}), std::invalid_argument);
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.servers = p + 1}),
                    Catch::Contains("co-located servers exceed"));
  CHECK_THROWS_WITH(
      mpi::parameter_server(comm, {.servers = p, .placement = server_placement::dedicated}),
      Catch::Contains("leave no worker"));
  CHECK_THROWS_AS(mpi::parameter_server(comm, {.max_message_bytes = 3}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::parameter_server(comm, {.tag_base = -1}), std::invalid_argument);
  CHECK_THROWS_AS(mpi::parameter_server(comm, {.indices = index_encoding::none}),
                  std::invalid_argument);
}

TEST_CASE("parameter server: ranks passing different options all get an exception",
          "[mpi][parameter_server]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (comm.size() == 1) {
    SUCCEED("a single rank cannot disagree with itself");
    return;
  }
  // rank 0 asks for 2 servers, the others for 1: every rank notices before any payload moves
  mpi::parameter_server ps(comm, {.servers = comm.rank() == 0 ? 2 : 1});
  sparse_message push;
  push.clear(10);
  std::vector<float> average(10);
  CHECK_THROWS_WITH(ps(push, average), Catch::Contains("different options"));
  // the pull format too
  mpi::parameter_server pulls(
      comm, {.pull = comm.rank() == 0 ? mpi::pull_format::dense : mpi::pull_format::adaptive});
  CHECK_THROWS_WITH(pulls(push, average), Catch::Contains("pull dense"));
}

TEST_CASE("parameter server options: each message names the value and its limit",
          "[mpi][parameter_server]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::string ranks = std::to_string(p);
  using mpi::server_placement;
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.servers = 0}),
                    "gradcomp: parameter_server: servers 0 is below 1");
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.servers = p + 1}),
                    "gradcomp: parameter_server: " + std::to_string(p + 1) +
                        " co-located servers exceed the " + ranks + " ranks");
  CHECK_THROWS_WITH(
      mpi::parameter_server(comm, {.servers = p, .placement = server_placement::dedicated}),
      Catch::Contains(ranks + " dedicated servers leave no worker among the " + ranks + " ranks"));
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.max_message_bytes = 3}),
                    "gradcomp: parameter_server: max_message_bytes 3 is below the minimum 4");
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.tag_base = -1}),
                    "gradcomp: parameter_server: tag_base -1 is outside [0, INT_MAX - 2]");
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.tag_base = INT_MAX - 1}),
                    Catch::Contains("tag_base " + std::to_string(INT_MAX - 1) + " is outside"));
  CHECK_THROWS_WITH(mpi::parameter_server(comm, {.indices = index_encoding::none}),
                    Catch::Contains("index encoding none"));
  // the limits themselves are valid (construction is local: nothing is sent)
  CHECK_NOTHROW(mpi::parameter_server(comm, {.servers = p}));
  CHECK_NOTHROW(mpi::parameter_server(comm, {.max_message_bytes = 4}));
  CHECK_NOTHROW(mpi::parameter_server(comm, {.tag_base = 0}));
  if (p > 1) {
    CHECK_NOTHROW(
        mpi::parameter_server(comm, {.servers = p - 1, .placement = server_placement::dedicated}));
  }
}

} // namespace mpi_parameter_server_options_test
