// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::nonblocking_operation (mpi/nonblocking_operation.hpp), the CRTP base of every
// gradcomp MPI operation, through operations written directly on it: the blocking call is
// start() then wait(); wait() tests until progress() says complete, pausing between tests as the
// wait policy says; an exception from progress() resets the operation before it leaves test()
// or wait(), and the operation can start again; abandon() is the derived reset(). One operation
// over a real MPI_Iallreduce completes with every rank's contribution. (The timeout path sets the
// process-wide peers_lost(): test/mpi/timeout_main.cpp runs it in a program of its own.)
// Collective: every rank runs every test (only the MPI_Iallreduce one communicates).
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/nonblocking_operation.hpp>
#include <gradcomp/mpi/wait_policy.hpp>

#include <mpi.h>

#include <chrono>
#include <stdexcept>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_nonblocking_operation_test {

using namespace gradcomp;

namespace {

// Complete after `polls` calls of progress(); with `fail_at`, progress() throws on that call.
// Counts what the base calls.
class countdown : public mpi::nonblocking_operation<countdown> {
public:
  static constexpr const char* operation_name = "countdown";

  explicit countdown(mpi::wait_policy policy = {}) : policy_(policy) {}

  void start(int polls, int fail_at = 0) {
    ++starts;
    remaining_ = polls;
    fail_at_ = fail_at;
    calls_ = 0;
  }
  bool progress() {
    ++progress_calls;
    if (++calls_ == fail_at_) {
      throw std::runtime_error("countdown failed");
    }
    if (remaining_ > 0) {
      --remaining_;
    }
    return remaining_ == 0;
  }
  void reset() noexcept {
    ++resets;
    remaining_ = 0;
    fail_at_ = 0;
  }
  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return policy_; }

  int starts = 0, progress_calls = 0, resets = 0;

private:
  mpi::wait_policy policy_;
  int remaining_ = 0, fail_at_ = 0, calls_ = 0;
};

// The sum over the ranks of one int, as one MPI_Iallreduce completed by MPI_Test.
class sum_of_ranks : public mpi::nonblocking_operation<sum_of_ranks> {
public:
  static constexpr const char* operation_name = "sum_of_ranks";

  explicit sum_of_ranks(const mpi::communicator& comm) : comm_(&comm) {}
  sum_of_ranks(const sum_of_ranks&) = delete;
  sum_of_ranks& operator=(const sum_of_ranks&) = delete;
  ~sum_of_ranks() { reset(); }

  void start(int value) {
    mine_ = value;
    mpi::check(MPI_Iallreduce(&mine_, &sum, 1, MPI_INT, MPI_SUM, comm_->native(), &request_),
               "MPI_Iallreduce");
  }
  bool progress() {
    int done = 0;
    mpi::check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
  void reset() noexcept { // a collective cannot be cancelled: complete it
    if (request_ != MPI_REQUEST_NULL) {
      MPI_Wait(&request_, MPI_STATUS_IGNORE);
    }
  }
  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return policy_; }

  int sum = 0;

private:
  const mpi::communicator* comm_;
  mpi::wait_policy policy_{};
  int mine_ = 0;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

} // namespace

TEST_CASE("nonblocking_operation: the call starts and waits; wait() tests until complete",
          "[mpi][nonblocking_operation]") {
  countdown op;
  op(5); // start(5), then wait()
  CHECK(op.starts == 1);
  CHECK(op.progress_calls == 5);
  CHECK(op.resets == 0);
  op.start(3);
  CHECK_FALSE(op.test());
  CHECK_FALSE(op.test());
  CHECK(op.test());
  CHECK(op.test()); // complete, and stays so
  CHECK(op.progress_calls == 9);
  op.start(2);
  op.wait();
  CHECK(op.progress_calls == 11);
  CHECK(op.resets == 0);
}

TEST_CASE("nonblocking_operation: wait() pauses between tests as the wait policy says",
          "[mpi][nonblocking_operation]") {
  // sleep: 2, 4 and 8 ms after the first three unsuccessful tests (at least: sleep_for never
  // returns early), none after the last, successful one
  countdown op({.kind = mpi::wait_kind::sleep,
                .initial_sleep = std::chrono::milliseconds(2),
                .max_sleep = std::chrono::milliseconds(50)});
  const auto t0 = std::chrono::steady_clock::now();
  op(4);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  CHECK(op.progress_calls == 4);
  CHECK(elapsed >= std::chrono::milliseconds(2 + 4 + 8));
}

TEST_CASE("nonblocking_operation: an exception from progress() resets the operation first",
          "[mpi][nonblocking_operation]") {
  countdown op;
  op.start(5, 3);
  CHECK_FALSE(op.test());
  CHECK_FALSE(op.test());
  CHECK_THROWS_WITH(op.test(), "countdown failed");
  CHECK(op.resets == 1);
  CHECK(op.test()); // reset: nothing pending
  op.start(5, 2);
  CHECK_THROWS_WITH(op.wait(), "countdown failed");
  CHECK(op.resets == 2);
  op(2); // and it starts again
  CHECK(op.resets == 2);
  CHECK(op.starts == 3);
}

TEST_CASE("nonblocking_operation: abandon() is the operation's reset()",
          "[mpi][nonblocking_operation]") {
  countdown op;
  static_assert(noexcept(op.abandon()));
  op.start(5);
  CHECK_FALSE(op.test());
  op.abandon();
  CHECK(op.resets == 1);
  CHECK(op.test()); // nothing pending
}

TEST_CASE("nonblocking_operation: an MPI collective completes with every rank's part",
          "[mpi][nonblocking_operation]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  sum_of_ranks op(comm);
  op.start(comm.rank() + 1);
  op.wait();
  CHECK(op.sum == p * (p + 1) / 2);
  op(10 * (comm.rank() + 1)); // the blocking form
  CHECK(op.sum == 10 * p * (p + 1) / 2);
}

} // namespace mpi_nonblocking_operation_test
