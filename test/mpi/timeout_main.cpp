// SPDX-License-Identifier: Apache-2.0
// Deadlines of gradcomp's MPI operations (wait_policy::timeout_seconds), on 2 or more ranks.
// Its own program: a timeout leaves the communicator unusable and sets the process-wide
// peers_lost() flag, which the other MPI tests must not see.
//
//  1. A ring_allreduce with a generous deadline completes with the right sum (no false alarm).
//  2. Rank 1 stalls (sleeps 2 s) before its ring_allreduce; every other rank, with a 0.3 s
//     deadline, gets timeout_error within [0.3, 1.5] s naming ring_allreduce, its left neighbour
//     (the peer its step waits for) and the time, and its reset does not hang; rank 1 then runs
//     the operation with the same deadline and times out too (its peers are gone).
//  2b. The same with native_allreduce, which names no peer (a collective of every rank).
//  2c. The same with hierarchical_allreduce, whose message counts the pieces done.
//  3. mpi::wait on a receive nobody sends to times out naming "MPI request".
// Rank 0 prints "timeout: all P ranks ok" and the program exits 0 without MPI_Finalize (the
// dropped requests of a timed-out communicator can make MPI_Finalize wait for ever).
#include <gradcomp/mpi.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace gm = gradcomp::mpi;

namespace {

int failures = 0;

void expect(bool condition, const std::string& what, int rank) {
  if (!condition) {
    std::fprintf(stderr, "timeout: rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

// Rank 1 stalls 2 s before `run` (an operation of every rank, with a 0.3 s deadline); every
// other rank must get a timeout_error naming `name`, no peer, and containing `expected`. Rank 1
// may complete or time out afterwards: the others' contributions were posted before they gave up.
template <class Run>
void expect_stalled_peer_timeout(Run run,
                                 const std::string& name,
                                 const std::string& expected,
                                 int rank) {
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  try {
    run();
    expect(rank == 1, name + " returned although rank 1 stalled", rank);
  } catch (const gm::timeout_error& e) {
    const std::string what = e.what();
    std::printf("timeout: rank %d caught: %s\n", rank, what.c_str());
    expect(e.operation() == name && e.peer() == -1 &&
               what.find(name + " timed out after") != std::string::npos &&
               what.find(expected) != std::string::npos,
           name + ": " + what, rank);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  gm::environment env;
  const gm::communicator comm(MPI_COMM_WORLD);
  const int rank = comm.rank();
  const int p = comm.size();
  if (p < 2) {
    std::printf("timeout: needs 2 or more ranks\n");
    return 1;
  }
  const int left = (rank + p - 1) % p;
  std::vector<float> data(100000, static_cast<float>(rank + 1));

  // 1. no false alarm
  {
    gm::ring_allreduce ring(comm, {.wait = {.timeout_seconds = 30.0}});
    ring(std::span<float>(data));
    const float want = static_cast<float>(p * (p + 1) / 2);
    expect(data.front() == want && data.back() == want, "sum with a generous deadline", rank);
    expect(!gm::detail::peers_lost().load(), "no peers lost after a completed operation", rank);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // 2. a stalled peer
  const gm::communicator ring_comm(MPI_COMM_WORLD);
  // without the length agreement, so that the ring's own steps are what waits
  gm::ring_allreduce ring(ring_comm, {.check_lengths = false, .wait = {.timeout_seconds = 0.3}});
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ring(std::span<float>(data));
    expect(false, "ring_allreduce returned although rank 1 stalled", rank);
  } catch (const gm::timeout_error& e) {
    const double waited = seconds_since(t0);
    const std::string what = e.what();
    std::printf("timeout: rank %d caught: %s\n", rank, what.c_str());
    expect(e.operation() == "ring_allreduce", "operation() is " + e.operation(), rank);
    expect(waited >= 0.3 && waited < 1.5, "waited " + std::to_string(waited) + " s", rank);
    expect(e.elapsed_seconds() >= 0.3 && e.elapsed_seconds() <= waited,
           "elapsed_seconds() " + std::to_string(e.elapsed_seconds()), rank);
    expect(e.peer() == left,
           "peer() " + std::to_string(e.peer()) + ", left neighbour " + std::to_string(left), rank);
    expect(what.find("ring_allreduce timed out after") != std::string::npos &&
               what.find("waiting for rank " + std::to_string(left)) != std::string::npos,
           "message: " + what, rank);
    expect(gm::detail::peers_lost().load(), "peers_lost() set", rank);
  }

  // 2b. an operation without pending_peer()/pending_description() (native_allreduce): the
  // message has no peer
  {
    const gm::communicator native_comm(MPI_COMM_WORLD);
    gm::native_allreduce native(native_comm,
                                {.check_lengths = false, .wait = {.timeout_seconds = 0.3}});
    expect_stalled_peer_timeout([&] { native(std::span<float>(data)); }, "native_allreduce", "",
                                rank);
  }

  // 2c. hierarchical_allreduce (groups of 2, 256 KiB pieces: 2 pieces of the 400 KB vector):
  // the message says how many pieces are done and which stage waits
  MPI_Barrier(MPI_COMM_WORLD); // the ranks left 2b at different times
  {
    const gm::communicator hierarchical_comm(MPI_COMM_WORLD);
    gm::hierarchical_allreduce hierarchical(
        hierarchical_comm,
        {.group_size = 2, .check_lengths = false, .wait = {.timeout_seconds = 0.3}});
    expect_stalled_peer_timeout([&] { hierarchical(std::span<float>(data)); },
                                "hierarchical_allreduce", "0 of 2 pieces done", rank);
  }

  // 3. the free wait on a receive nobody matches
  int value = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Irecv(&value, 1, MPI_INT, rank, 999, MPI_COMM_WORLD, &request);
  try {
    gm::wait(request, {.timeout_seconds = 0.05});
    expect(false, "wait returned without a message", rank);
  } catch (const gm::timeout_error& e) {
    expect(e.operation() == "MPI request" && e.peer() == -1, e.what(), rank);
  }

  // MPI_COMM_WORLD itself never timed out: count the failures of every rank on rank 0
  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && total == 0) {
    std::printf("timeout: all %d ranks ok\n", p);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Barrier(MPI_COMM_WORLD);
  std::_Exit(failures == 0 ? 0 : 1);
}
