// SPDX-License-Identifier: Apache-2.0
// Calibration: sizes and times are sane, identical on every rank, and alpha / beta follow from
// the fit by S4's formula.
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/calibrate.hpp>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_calibrate_test {

using namespace gradcomp;

TEST_CASE("calibration fits S4's ring formula to measured times", "[mpi][calibrate]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  // either line-up: the barrier's compares the run times once per size, which every rank must
  // still see as the slowest rank's
  const auto line_up =
      GENERATE(mpi::calibration_line_up::ring_allreduce, mpi::calibration_line_up::barrier);
  const mpi::calibration c = mpi::calibrate_ring_allreduce(
      comm, {.min_bytes = 1 << 12, .max_bytes = 1 << 20, .repetitions = 3, .line_up = line_up});
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
  // one size only: no line to fit
  CHECK_THROWS_WITH(mpi::calibrate_ring_allreduce(comm, {.min_bytes = 1024, .max_bytes = 2048}),
                    Catch::Contains("a line needs two sizes"));
}

TEST_CASE("sparse allgather calibration fits its own cost formula", "[mpi][calibrate]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const mpi::calibration c = mpi::calibrate_sparse_allgather(
      comm, {.min_pairs = 1 << 8, .max_pairs = 1 << 14, .repetitions = 3});
  REQUIRE(c.bytes.size() == 4); // 256, 1024, 4096, 16384 pairs
  for (std::size_t i = 0; i < c.bytes.size(); ++i) {
    // delta + varint at density 0.01: every gap is 99 (one byte), plus a 4-byte value and the
    // 32-byte header
    CHECK(c.bytes[i] == 32.0 + 5.0 * static_cast<double>(std::size_t{256} << (2 * i)));
  }
  std::vector<float> as_float(c.seconds.begin(), c.seconds.end());
  CHECK(test::identical_on_all_ranks(as_float));
  const int p = comm.size();
  if (p == 1) {
    CHECK(c.net.alpha_seconds == 0.0);
    CHECK(c.net.beta_seconds_per_byte == 0.0);
  } else {
    // the fit, converted back through cost::sparse_allgather_seconds, reproduces the line
    const double b = std::max(0.0, c.fit.slope);
    CHECK(c.net.beta_seconds_per_byte == Approx(b / (p - 1)));
    // (only where no clamp applied: on a loaded machine the fitted slope can even be negative)
    if (c.fit.slope > 0.0 && c.fit.intercept - 24.0 * b > 0.0) {
      for (const double m : c.bytes) {
        CHECK(cost::sparse_allgather_seconds(1.0, m, p, c.net) ==
              Approx(c.fit.intercept + c.fit.slope * m).epsilon(1e-9));
      }
    }
  }
  CHECK_THROWS_WITH(mpi::calibrate_sparse_allgather(comm, {.min_pairs = 0}),
                    Catch::Contains("0 .. "));
  CHECK_THROWS_WITH(mpi::calibrate_sparse_allgather(comm, {.min_pairs = 64, .max_pairs = 255}),
                    Catch::Contains("a line needs two sizes"));
  CHECK_THROWS_WITH(mpi::calibrate_sparse_allgather(comm, {.density = 1.5}),
                    Catch::Contains("density 1.5"));
  CHECK_THROWS_WITH(mpi::calibrate_sparse_allgather(comm, {.max_pairs = 1u << 30, .density = 0.01}),
                    Catch::Contains("32-bit index limit"));
}

} // namespace mpi_calibrate_test
