// SPDX-License-Identifier: Apache-2.0
// The engine under the MPI collectives (mpi/detail/phases.hpp), through small collectives
// written on it as the library's are: phases run one after another (collectives, a poll, an
// inner operation) and the operation completes when a step posts none; the timeout hooks name
// the pending phase; reset() completes every send before cancelling any receive (watched through
// a PMPI override of MPI_Cancel) and leaves nothing pending; an exception in a step or in
// start() drops the operation, which can start again; the length agreement throws on every rank.
// Collective: every rank runs every test.
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/detail/phases.hpp>

#include <mpi.h>

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../common/catch.hpp"

namespace mpi_detail_phases_test {

using namespace gradcomp;

namespace {

bool log_cancels = false;
std::vector<MPI_Request> cancelled; // handles passed to MPI_Cancel while log_cancels is set

} // namespace

extern "C" int MPI_Cancel(MPI_Request* request) {
  if (log_cancels && request != nullptr) {
    cancelled.push_back(*request);
  }
  return PMPI_Cancel(request);
}

namespace {

// A ring of phases: an allreduce counting the ranks (collectives), one message around the ring
// (a poll of a receive from the left neighbour and a send to the right one), a ring_allreduce
// of `data` (an inner operation); each step records its name.
class toy_ring : public mpi::detail::phased_operation<toy_ring> {
public:
  static constexpr const char* operation_name = "toy_ring";

  explicit toy_ring(const mpi::communicator& comm) : comm_(&comm), ring_(comm) {}
  toy_ring(const toy_ring&) = delete;
  toy_ring& operator=(const toy_ring&) = delete;
  ~toy_ring() { reset(); }

  // throw_in: "start" throws in start() after posting, "step" in the last step.
  void start(std::span<float> data, const std::string& throw_in = "") {
    const auto starting = begin_operation();
    data_ = data;
    steps.assign(1, "start");
    throw_in_ = throw_in;
    ranks = 1;
    mpi::detail::check(
        MPI_Iallreduce(MPI_IN_PLACE, &ranks, 1, MPI_INT, MPI_SUM, comm_->native(), collective()),
        "MPI_Iallreduce");
    then(&toy_ring::counted).describe("the rank count");
    if (throw_in_ == "start") {
      throw std::runtime_error("thrown in start()");
    }
  }

  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return wait_; }

  std::vector<std::string> steps;
  int ranks = 0;
  int from_left = -1;

private:
  [[nodiscard]] int left() const noexcept {
    return (comm_->rank() + comm_->size() - 1) % comm_->size();
  }
  [[nodiscard]] std::string around() const { return "the message around the ring"; }

  void counted() {
    steps.emplace_back("counted");
    mine_ = comm_->rank();
    poll(&toy_ring::passed, &toy_ring::sum)
        .sends(send_)
        .receives(receive_)
        .peer(&toy_ring::left)
        .describe(&toy_ring::around);
    mpi::detail::check(MPI_Irecv(&from_left, 1, MPI_INT, left(), 7, comm_->native(), &receive_),
                       "MPI_Irecv");
    mpi::detail::check(MPI_Isend(&mine_, 1, MPI_INT, (comm_->rank() + 1) % comm_->size(), 7,
                                 comm_->native(), &send_),
                       "MPI_Isend");
  }

  bool passed() { return mpi::detail::complete(receive_) && mpi::detail::complete(send_); }

  void sum() {
    steps.emplace_back("passed");
    await(ring_, &toy_ring::summed).describe("the ring allreduce, ");
    ring_.start(data_);
  }

  void summed() {
    steps.emplace_back("summed");
    if (throw_in_ == "step") {
      throw std::runtime_error("thrown in a step");
    }
  }

  const mpi::communicator* comm_;
  mpi::ring_allreduce ring_;
  mpi::wait_policy wait_{};
  std::span<float> data_;
  std::string throw_in_;
  int mine_ = 0;
  MPI_Request send_ = MPI_REQUEST_NULL;
  MPI_Request receive_ = MPI_REQUEST_NULL;
};

// One rank alone: a poll phase that waits for a message with tag 12, which the test sends (or
// never does), beside a message this rank sends itself with tag 11 and receives (posted first:
// MPICH completes a send to oneself only once it is matched). Not collective.
class self_wait : public mpi::detail::phased_operation<self_wait> {
public:
  static constexpr const char* operation_name = "self_wait";

  explicit self_wait(const mpi::communicator& comm) : comm_(&comm) {}
  self_wait(const self_wait&) = delete;
  self_wait& operator=(const self_wait&) = delete;
  ~self_wait() { reset(); }

  void start() {
    const auto starting = begin_operation();
    poll(&self_wait::arrived)
        .sends(send)
        .receives(receive, echo)
        .peer(&self_wait::me)
        .describe(&self_wait::what);
    const int rank = comm_->rank();
    mpi::detail::check(MPI_Irecv(&in_, 1, MPI_INT, rank, 12, comm_->native(), &receive),
                       "MPI_Irecv");
    mpi::detail::check(MPI_Irecv(&echoed_, 1, MPI_INT, rank, 11, comm_->native(), &echo),
                       "MPI_Irecv");
    mpi::detail::check(MPI_Isend(&out_, 1, MPI_INT, rank, 11, comm_->native(), &send), "MPI_Isend");
  }

  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return wait_; }

  MPI_Request send = MPI_REQUEST_NULL;
  MPI_Request receive = MPI_REQUEST_NULL;
  MPI_Request echo = MPI_REQUEST_NULL;

private:
  [[nodiscard]] int me() const noexcept { return comm_->rank(); }
  [[nodiscard]] std::string what() const { return "the message with tag 12"; }
  bool arrived() {
    return mpi::detail::complete(receive) && mpi::detail::complete(echo) &&
           mpi::detail::complete(send);
  }

  const mpi::communicator* comm_;
  mpi::wait_policy wait_{};
  int in_ = 0, echoed_ = 0, out_ = 1;
};

// Awaits a self_wait: the timeout hooks forward the inner operation's.
class outer_wait : public mpi::detail::phased_operation<outer_wait> {
public:
  static constexpr const char* operation_name = "outer_wait";

  explicit outer_wait(const mpi::communicator& comm) : inner(comm) {}
  outer_wait(const outer_wait&) = delete;
  outer_wait& operator=(const outer_wait&) = delete;
  ~outer_wait() { reset(); }

  void start() {
    const auto starting = begin_operation();
    await(inner).describe("the inner wait, ");
    inner.start();
  }

  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return wait_; }

  self_wait inner;

private:
  mpi::wait_policy wait_{};
};

// The length agreement alone, then nothing.
class lengths_only : public mpi::detail::phased_operation<lengths_only> {
public:
  static constexpr const char* operation_name = "lengths_only";

  explicit lengths_only(const mpi::communicator& comm) : comm_(&comm) {}
  lengths_only(const lengths_only&) = delete;
  lengths_only& operator=(const lengths_only&) = delete;
  ~lengths_only() { reset(); }

  void start(std::size_t n) {
    const auto starting = begin_operation();
    agree_lengths(*comm_, n, true, &lengths_only::agreed,
                  mpi::detail::length_agreement::description);
  }

  [[nodiscard]] const mpi::wait_policy& waiting() const noexcept { return wait_; }

  bool agreed_ = false;

private:
  void agreed() { agreed_ = true; }

  const mpi::communicator* comm_;
  mpi::wait_policy wait_{};
};

} // namespace

TEST_CASE("phases run one after another and the operation completes with the last",
          "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  toy_ring op(comm);
  CHECK(op.test()); // nothing started: complete
  for (int round = 0; round < 2; ++round) {
    std::vector<float> data(1000, 1.0f);
    op.start(data);
    op.wait();
    CHECK(op.steps == std::vector<std::string>{"start", "counted", "passed", "summed"});
    CHECK(op.ranks == p);
    CHECK(op.from_left == (comm.rank() + p - 1) % p);
    CHECK(data.front() == static_cast<float>(p));
    CHECK(data.back() == static_cast<float>(p));
    CHECK(op.test()); // complete, and stays so
    CHECK(op.pending_peer() == -1);
    CHECK(op.pending_description().empty());
  }
}

TEST_CASE("a start() while an operation is in progress throws and leaves it running",
          "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  toy_ring op(comm);
  std::vector<float> data(10, 1.0f);
  op.start(data);
  CHECK(op.pending_description() == "the rank count"); // nothing tested yet
  CHECK(op.pending_peer() == -1);
  REQUIRE_THROWS_WITH(op.start(data),
                      "gradcomp: toy_ring: start() while an operation is in progress");
  op.wait();
  CHECK(data.front() == static_cast<float>(comm.size()));
}

TEST_CASE("the timeout hooks name the pending phase, and an awaited operation's", "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  outer_wait op(comm);
  op.start();
  CHECK_FALSE(op.test()); // the message with tag 12 is not sent yet
  CHECK(op.pending_peer() == comm.rank());
  CHECK(op.pending_description() == "the inner wait, the message with tag 12");
  CHECK(op.inner.pending_description() == "the message with tag 12");
  const int value = 5;
  MPI_Send(&value, 1, MPI_INT, comm.rank(), 12, comm.native());
  op.wait();
  CHECK(op.pending_peer() == -1);
  CHECK(op.pending_description().empty());
}

TEST_CASE("reset() completes every send before it cancels a receive, and leaves none pending",
          "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  self_wait op(comm);
  op.start();
  CHECK_FALSE(op.test()); // nobody sends tag 12; the send and its echo are not tested yet
  const std::vector<MPI_Request> pending = {op.send, op.receive, op.echo};
  cancelled.clear();
  log_cancels = true;
  op.abandon();
  log_cancels = false;
  CHECK(op.send == MPI_REQUEST_NULL);
  CHECK(op.receive == MPI_REQUEST_NULL);
  CHECK(op.echo == MPI_REQUEST_NULL);
  CHECK(cancelled == pending); // the send, then the receives in the order the phase named them
  CHECK(op.test());            // idle
  // and it can start again
  op.start();
  const int value = 5;
  MPI_Send(&value, 1, MPI_INT, comm.rank(), 12, comm.native());
  op.wait();
}

TEST_CASE("an exception in a step or in start() drops the operation, which can start again",
          "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  toy_ring op(comm);
  std::vector<float> data(100, 1.0f);
  op.start(data, "step");
  REQUIRE_THROWS_WITH(op.wait(), "thrown in a step");
  CHECK(op.test());                                                  // reset: nothing pending
  REQUIRE_THROWS_WITH(op.start(data, "start"), "thrown in start()"); // after posting the count
  CHECK(op.test()); // what start() posted was completed: nothing pending
  std::vector<float> fresh(100, 1.0f);
  op.start(fresh);
  op.wait();
  CHECK(op.steps.back() == "summed");
  CHECK(fresh.front() == static_cast<float>(comm.size()));
}

TEST_CASE("the length agreement throws on every rank when lengths differ", "[mpi][phases]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  lengths_only op(comm);
  op.start(10);
  if (comm.size() > 1) {
    CHECK(op.pending_description() == mpi::detail::length_agreement::description);
  }
  op.wait();
  CHECK(op.agreed_);
  op.agreed_ = false;
  op.start(static_cast<std::size_t>(10 + comm.rank()));
  if (comm.size() == 1) {
    op.wait();
    CHECK(op.agreed_);
    return;
  }
  REQUIRE_THROWS_WITH(op.wait(), Catch::Contains("lengths_only: ranks pass different lengths"));
  CHECK_FALSE(op.agreed_);
  op.start(3); // usable again
  op.wait();
  CHECK(op.agreed_);
}

} // namespace mpi_detail_phases_test
