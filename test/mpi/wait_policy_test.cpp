// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::wait_policy, wait() and wait_all() (mpi/wait_policy.hpp): the documented
// defaults; every kind completes a ring_allreduce, a collective request (wait: the sum of every
// rank's part) and point-to-point requests (wait_all: the left neighbour's message), and a null
// request or none at once; sleep pauses double from initial_sleep up to max_sleep after
// yield_rounds rounds that yield without sleeping. (A deadline, timeout_seconds, sets the
// process-wide peers_lost(): test/mpi/timeout_main.cpp runs it in a program of its own.)
// Collective: every rank runs every test.
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <array>
#include <chrono>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace mpi_wait_policy_test {

using namespace gradcomp;

namespace {

constexpr mpi::wait_kind every_kind[] = {mpi::wait_kind::spin, mpi::wait_kind::yield,
                                         mpi::wait_kind::sleep};

// How long policy.pause(round) takes, seconds.
double pause_seconds(const mpi::wait_policy& policy, unsigned round) {
  const auto t0 = std::chrono::steady_clock::now();
  policy.pause(round);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

TEST_CASE("every wait policy completes the operation", "[mpi][wait_policy]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  for (mpi::wait_kind kind : {mpi::wait_kind::spin, mpi::wait_kind::yield, mpi::wait_kind::sleep}) {
    std::vector<float> data(1000, 1.0f);
    mpi::ring_allreduce ring(comm, {.wait = {.kind = kind}});
    ring(data);
    CHECK(data[999] == static_cast<float>(comm.size()));
  }
}

TEST_CASE("wait_policy's defaults are the documented ones", "[mpi][wait_policy]") {
  const mpi::wait_policy policy;
  CHECK(policy.kind == mpi::wait_kind::yield);
  CHECK(policy.initial_sleep == std::chrono::microseconds(5));
  CHECK(policy.max_sleep == std::chrono::microseconds(200));
  CHECK(policy.yield_rounds == 0);
  CHECK(policy.timeout_seconds == 0.0); // wait forever
}

TEST_CASE("wait and wait_all complete MPI requests under every kind", "[mpi][wait_policy]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int r = comm.rank();
  for (const mpi::wait_kind kind : every_kind) {
    CAPTURE(static_cast<int>(kind));
    const mpi::wait_policy policy{.kind = kind, .initial_sleep = std::chrono::microseconds(20)};
    // a collective: the sum of every rank's r + 1
    int mine = r + 1, sum = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    REQUIRE(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comm.native(), &request) ==
            MPI_SUCCESS);
    mpi::wait(request, policy);
    CHECK(request == MPI_REQUEST_NULL);
    CHECK(sum == p * (p + 1) / 2);
    // point to point around the ring: a receive from the left, a send to the right
    const int left = (r + p - 1) % p, right = (r + 1) % p;
    int from_left = -1;
    const int out = 100 * r + static_cast<int>(kind);
    std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Irecv(&from_left, 1, MPI_INT, left, 9, comm.native(), &requests[0]);
    MPI_Isend(&out, 1, MPI_INT, right, 9, comm.native(), &requests[1]);
    mpi::wait_all(requests, policy);
    CHECK(requests[0] == MPI_REQUEST_NULL);
    CHECK(requests[1] == MPI_REQUEST_NULL);
    CHECK(from_left == 100 * left + static_cast<int>(kind));
    // nothing to wait for: returns at once
    MPI_Request none = MPI_REQUEST_NULL;
    mpi::wait(none, policy);
    mpi::wait_all(std::span<MPI_Request>(), policy);
  }
}

TEST_CASE("sleep pauses double from initial_sleep up to max_sleep after the yield rounds",
          "[mpi][wait_policy]") {
  // lower bounds only (sleep_for never returns early; a loaded machine may take longer): round
  // yield_rounds + j sleeps at least min(max_sleep, initial_sleep 2^j)
  const mpi::wait_policy sleep{.kind = mpi::wait_kind::sleep,
                               .initial_sleep = std::chrono::milliseconds(2),
                               .max_sleep = std::chrono::milliseconds(8),
                               .yield_rounds = 1};
  CHECK(pause_seconds(sleep, 1) >= 0.002);
  CHECK(pause_seconds(sleep, 2) >= 0.004);
  CHECK(pause_seconds(sleep, 3) >= 0.008);
  CHECK(pause_seconds(sleep, 4) >= 0.008);
  // the cap: round 30 doubles 2^20 times (2 ms -> 35 min) without it
  CHECK(pause_seconds(sleep, 30) < 1.0);
  // the rounds before yield_rounds, and the other kinds, do not sleep: with a 500 ms sleep set,
  // each returns well before it would have
  const mpi::wait_policy long_sleep{.kind = mpi::wait_kind::sleep,
                                    .initial_sleep = std::chrono::milliseconds(500),
                                    .max_sleep = std::chrono::milliseconds(500),
                                    .yield_rounds = 2};
  CHECK(pause_seconds(long_sleep, 0) < 0.25);
  CHECK(pause_seconds(long_sleep, 1) < 0.25);
  for (const mpi::wait_kind kind : {mpi::wait_kind::spin, mpi::wait_kind::yield}) {
    mpi::wait_policy other = long_sleep;
    other.kind = kind;
    CHECK(pause_seconds(other, 5) < 0.25);
  }
}

} // namespace mpi_wait_policy_test
