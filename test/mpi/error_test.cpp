// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::mpi_error, timeout_error and check() (mpi/error.hpp): check() passes
// MPI_SUCCESS and turns any other return code into mpi_error with that code and a message naming
// the call and MPI's own error string (MPI_Error_string, asked here independently), also for a
// real failing call on a gradcomp communicator (MPI_ERRORS_RETURN: the job goes on);
// timeout_error is an mpi_error carrying the operation, the peer and the time waited;
// check_length names the rank and both lengths. Not collective (each rank checks alone).
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "../common/catch.hpp"

namespace mpi_error_test {

using namespace gradcomp;

static_assert(std::is_base_of_v<std::runtime_error, mpi::mpi_error>);
static_assert(std::is_base_of_v<mpi::mpi_error, mpi::timeout_error>);

namespace {

// MPI's description of an error code, asked directly.
std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

} // namespace

TEST_CASE("check() turns an MPI error code into mpi_error naming the call and MPI's text",
          "[mpi][error]") {
  CHECK_NOTHROW(mpi::check(MPI_SUCCESS, "MPI_Anything"));
  for (const int code : {MPI_ERR_TAG, MPI_ERR_COUNT, MPI_ERR_RANK}) {
    CAPTURE(code);
    try {
      mpi::check(code, "MPI_Example");
      FAIL("check() returned on an error code");
    } catch (const mpi::mpi_error& e) {
      CHECK(e.code() == code);
      CHECK(std::string(e.what()) == "gradcomp mpi: MPI_Example failed: " + mpi_error_string(code));
    }
  }
  // the library's own calls spell it detail::check: the same function
  CHECK_THROWS_AS(mpi::detail::check(MPI_ERR_TAG, "MPI_Example"), mpi::mpi_error);
}

TEST_CASE("a failing MPI call on a gradcomp communicator returns its error to check()",
          "[mpi][error]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  int value = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  // rank size() does not exist: MPI returns MPI_ERR_RANK instead of aborting the job
  const int rc = MPI_Isend(&value, 1, MPI_INT, comm.size(), 0, comm.native(), &request);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(rc, &error_class);
  CHECK(error_class == MPI_ERR_RANK);
  try {
    mpi::check(rc, "MPI_Isend");
    FAIL("check() returned on a failed MPI_Isend");
  } catch (const mpi::mpi_error& e) {
    CHECK(e.code() == rc);
    CHECK(std::string(e.what()) == "gradcomp mpi: MPI_Isend failed: " + mpi_error_string(rc));
  }
}

TEST_CASE("mpi_error and timeout_error carry what the header says", "[mpi][error]") {
  const mpi::mpi_error disagreement("ranks disagree");
  CHECK(disagreement.code() == MPI_SUCCESS); // a disagreement between ranks has no MPI code
  CHECK(std::string(disagreement.what()) == "ranks disagree");
  const mpi::timeout_error timeout("timed out", "ring_allreduce", 3, 2.5);
  CHECK(timeout.operation() == "ring_allreduce");
  CHECK(timeout.peer() == 3);
  CHECK(timeout.elapsed_seconds() == 2.5);
  CHECK(timeout.code() == MPI_SUCCESS);
  const mpi::mpi_error& as_base = timeout;
  CHECK(std::string(as_base.what()) == "timed out");
}

TEST_CASE("check_length names the rank and both lengths", "[mpi][error]") {
  sparse_message m;
  m.clear(5);
  CHECK_NOTHROW(mpi::detail::check_length(m, 5, 3));
  CHECK_THROWS_AS(mpi::detail::check_length(m, 6, 3), wire_error);
  CHECK_THROWS_WITH(mpi::detail::check_length(m, 6, 3),
                    Catch::Contains("message from rank 3 has dense length 5, expected 6"));
}

} // namespace mpi_error_test
