// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::ring_trace (mpi/ring_trace.hpp), the optional per-step timeline of
// ring_allreduce: one record per step in step order, the ring's exact bytes (counted here from
// the block sizes), times in the documented order (posted, received, sent; pipelined steps
// posted before the step before them ended), the reduction timed in the reduce-scatter only, the
// same sums as an untraced ring; an operation with no ring step (no elements) is counted with its
// start time all the same; the records' clock is steady_clock's.
// Collective: every rank runs every test.
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/ring_trace.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../common/catch.hpp"
#include "mpi_test_util.hpp"

namespace mpi_ring_trace_test {

using namespace gradcomp;
using gradcomp::test::rank_values;
using gradcomp::test::world_rank;

TEST_CASE("ring trace: one record per step, the ring's exact bytes, ordered times, same result",
          "[mpi][ring_allreduce]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int in_flight = GENERATE(1, 2);
  CAPTURE(in_flight);
  // with 2 in flight step s + 1 is posted beside step s (on 3 or more ranks), s + 2 after s ended
  const int overlap = p >= 3 ? in_flight : 1;
  const std::size_t n = 100003; // blocks of unequal size
  mpi::ring_trace trace;
  mpi::ring_allreduce traced(
      comm, {.segment_bytes = 16384, .steps_in_flight = in_flight, .trace = &trace});
  mpi::ring_allreduce plain(comm, {.segment_bytes = 16384});
  for (int operation = 0; operation < 2; ++operation) {
    std::vector<float> a = rank_values(n, world_rank(), 7 + operation);
    std::vector<float> b = a;
    traced(a);
    plain(b);
    CHECK(a == b); // tracing changes no arithmetic
  }
  CHECK(trace.operations == 2);
  REQUIRE(trace.started_seconds.size() == 2);
  const std::size_t steps = p == 1 ? 0 : static_cast<std::size_t>(2 * (p - 1));
  REQUIRE(trace.steps.size() == 2 * steps);
  // independent count of the ring's traffic: a rank sends every block but r + 1 in the
  // reduce-scatter and every block but r + 2 in the allgather (block b: n (b+1)/P - n b/P)
  const auto block = [&](int b) {
    const auto w = static_cast<std::size_t>(((b % p) + p) % p);
    return n * (w + 1) / static_cast<std::size_t>(p) - n * w / static_cast<std::size_t>(p);
  };
  const int r = comm.rank();
  const std::size_t expected_sent =
      p == 1 ? 0 : sizeof(float) * (2 * n - block(r + 1) - block(r + 2));
  for (std::uint64_t op = 0; op < 2; ++op) {
    std::size_t sent = 0, received = 0;
    const mpi::ring_step_record* first = steps > 0 ? &trace.steps[op * steps] : nullptr;
    for (std::size_t s = 0; s < steps; ++s) {
      const mpi::ring_step_record& rec = trace.steps[op * steps + s];
      CAPTURE(op, s);
      CHECK(rec.operation == op);
      CHECK(rec.step == static_cast<int>(s));
      CHECK(rec.segments == (rec.bytes_sent + 16383) / 16384);
      CHECK(rec.posted_seconds >= trace.started_seconds[op]);
      if (s >= static_cast<std::size_t>(overlap)) { // opens once the step `overlap` before ended
        CHECK(rec.posted_seconds >= first[s - static_cast<std::size_t>(overlap)].sent_seconds);
      }
      if (s >= 1) { // posted and ended in step order
        CHECK(rec.posted_seconds >= first[s - 1].posted_seconds);
        CHECK(rec.sent_seconds >= first[s - 1].sent_seconds);
      }
      if (overlap == 2 && s >= 1) { // pipelined: posted before the step before it ended
        CHECK(rec.posted_seconds < first[s - 1].sent_seconds);
      }
      CHECK(rec.received_seconds >= rec.posted_seconds);
      CHECK(rec.sent_seconds >= rec.received_seconds);
      CHECK(rec.reduce_seconds >= 0.0);
      CHECK((rec.reduce_seconds == 0.0) == (s >= static_cast<std::size_t>(p - 1)));
      CHECK(rec.polls >= 1);
      sent += rec.bytes_sent;
      received += rec.bytes_received;
    }
    CHECK(sent == expected_sent);
    CHECK(received == (p == 1 ? 0 : sizeof(float) * (2 * n - block(r) - block(r + 1))));
  }
}

TEST_CASE("ring trace: an operation without ring steps is counted, in steady_clock seconds",
          "[mpi][ring_allreduce]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const mpi::ring_trace fresh;
  CHECK(fresh.operations == 0);
  CHECK(fresh.steps.empty());
  CHECK(fresh.started_seconds.empty());
  mpi::ring_trace trace;
  mpi::ring_allreduce ring(comm, {.trace = &trace});
  const double before =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::vector<float> none;
  ring(std::span<float>(none)); // the length check only: no ring step on any rank count
  const double after = mpi::ring_trace::now_seconds();
  CHECK(trace.operations == 1);
  REQUIRE(trace.started_seconds.size() == 1);
  CHECK(trace.started_seconds[0] >= before);
  CHECK(trace.started_seconds[0] <= after);
  CHECK(trace.steps.empty());
}

} // namespace mpi_ring_trace_test
