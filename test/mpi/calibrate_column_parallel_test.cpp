// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::calibrate_model_parallel_fixed_seconds (mpi/calibrate_column_parallel.hpp): the
// fixed cost of one model-parallel FC pass is measured (positive, below 10 s), the same on every
// rank (the slowest rank's median, agreed), and fewer than one repetition is refused naming the
// count. Needs no GEMM (the calibration skips it). Collective: every rank runs every test.
#include <gradcomp/mpi/calibrate_column_parallel.hpp>
#include <gradcomp/mpi/communicator.hpp>

#include <vector>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_calibrate_column_parallel_test {

using namespace gradcomp;

TEST_CASE("the model-parallel fixed cost is measured, the same on every rank",
          "[column_parallel_linear]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const double t =
      mpi::calibrate_model_parallel_fixed_seconds(comm, mpi::fc_exchange::all_to_all, 3);
  CHECK(t > 0.0);
  CHECK(t < 10.0);
  const std::vector<float> mine{static_cast<float>(t)};
  CHECK(test::identical_on_all_ranks(mine)); // the slowest rank's median, agreed
  REQUIRE_THROWS_WITH(
      mpi::calibrate_model_parallel_fixed_seconds(comm, mpi::fc_exchange::all_to_all, 0),
      Catch::Contains("repetitions 0"));
}

} // namespace mpi_calibrate_column_parallel_test
