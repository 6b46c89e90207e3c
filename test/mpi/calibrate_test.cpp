// SPDX-License-Identifier: Apache-2.0
// Calibration: sizes and times are sane, identical on every rank, and alpha / beta follow from
// the fit by S4's formula.
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/calibrate.hpp>

#include <catch2/catch.hpp>

#include "mpi_test_util.hpp"

using namespace gradcomp;

TEST_CASE("calibration fits S4's ring formula to measured times", "[mpi][calibrate]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const mpi::calibration c = mpi::calibrate_ring_allreduce(
      comm, {.min_bytes = 1 << 12, .max_bytes = 1 << 20, .repetitions = 3});
  REQUIRE(c.bytes.size() == 5); // 4 KiB, 16 KiB, 64 KiB, 256 KiB, 1 MiB
  for (std::size_t i = 1; i < c.bytes.size(); ++i) {
    CHECK(c.bytes[i] == 4 * c.bytes[i - 1]);
  }
  for (double s : c.seconds) {
    CHECK(s >= 0.0);
  }
  std::vector<float> as_float(c.seconds.begin(), c.seconds.end());
  CHECK(test::identical_on_all_ranks(as_float)); // every rank reports the slowest rank's times
  const int p = comm.size();
  if (p == 1) {
    CHECK(c.net.alpha_seconds == 0.0);
    CHECK(c.net.beta_seconds_per_byte == 0.0);
  } else {
    CHECK(c.net.alpha_seconds == Approx(std::max(0.0, c.fit.intercept) / (2.0 * (p - 1))));
    CHECK(c.net.beta_seconds_per_byte == Approx(std::max(0.0, c.fit.slope) * p / (2.0 * (p - 1))));
    // (no check that beta > 0: on a loaded 2-core machine small timings are noise-dominated)
  }
  CHECK_THROWS_AS(mpi::calibrate_ring_allreduce(comm, {.min_bytes = 2}), std::invalid_argument);
}
