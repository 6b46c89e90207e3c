// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::wait_policy: how gradcomp waits for MPI requests to complete.
//!
//! Debian's MPICH (ch4:ucx) busy-polls inside blocking calls. When ranks outnumber cores (4 ranks
//! on 2 cores here), a waiting rank burns the time slice the rank it waits for needs: a blocking
//! MPI_Allgatherv was measured 260x slower than MPI_Iallgatherv completed by MPI_Test +
//! sched_yield (toolchain notes). So gradcomp never calls a blocking MPI operation: it starts
//! the nonblocking form and completes it with MPI_Test in a loop that gives the core away.
#pragma once

#include <gradcomp/mpi/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <utility>

namespace gradcomp::mpi {

//! @brief What a rank does between two MPI_Test calls while it waits.
enum class wait_kind {
  spin,  //!< test again at once (lowest latency when every rank has its own core).
  yield, //!< std::this_thread::yield() (sched_yield): the default; cheap and gives the core away.
  //! sleep, doubling from initial_sleep up to max_sleep, after yield_rounds yields (least CPU
  //! for long waits; a sleeping thread is woken ahead of threads that computed meanwhile).
  sleep,
};

//! @brief A completion policy for every gradcomp MPI wait. Value type; the default (yield) was
//! chosen by measurement on 4 ranks / 2 cores (toolchain notes: yield and a 20 us sleep are both
//! ~260x faster than MPICH's blocking call; yield keeps the latency of short waits lower).
//! A pipeline's communication thread, which waits while backward computes on the same cores,
//! does better with sleep: a yielding thread stays runnable and gets only its fair share of a
//! core, a sleeping one is woken ahead of the computing threads. Measured on 4 emulated hosts
//! (2 cores) training the CNN with the dense ring: sleep with max_sleep 50 us 173 ms per
//! iteration, yield 212 ms, in one run of runs (docs/transport-benchmarks.md, "Dense ring in
//! training"); gradcomp-train uses it by default.
struct wait_policy {
  //! What a rank does between two MPI_Test calls: spin, yield (the default) or sleep.
  wait_kind kind = wait_kind::yield;
  std::chrono::microseconds initial_sleep{5}; //!< first sleep (kind == sleep).
  std::chrono::microseconds max_sleep{200};   //!< back-off cap (kind == sleep).
  //! kind == sleep: the first rounds yield instead of sleeping (short waits then end without a
  //! timer's latency).
  unsigned yield_rounds = 0;
  //! Deadline of one wait, seconds (0, the default: wait forever). A wait still incomplete after
  //! this long throws timeout_error naming the operation, the peer and the time; from then on
  //! gradcomp drops pending requests instead of completing them (peers_lost()). Checked after
  //! every unsuccessful test: the error comes at most one pause after the deadline. Set it well
  //! above the longest legitimate wait (a slow peer's whole backward pass, a large message).
  double timeout_seconds = 0.0;

  //! Called between tests; `round` counts the unsuccessful tests so far.
  void pause(unsigned round) const {
    switch (kind) {
    case wait_kind::spin:
      return;
    case wait_kind::yield:
      std::this_thread::yield();
      return;
    case wait_kind::sleep: {
      if (round < yield_rounds) {
        std::this_thread::yield();
        return;
      }
      const auto factor = std::chrono::microseconds::rep{1} << std::min(round - yield_rounds, 20u);
      std::this_thread::sleep_for(std::min(max_sleep, initial_sleep * factor));
      return;
    }
    }
  }
};

namespace detail {

//! Whether a gradcomp wait timed out in this process (timeout_error): from then on
//! detail::abandon() drops pending requests instead of completing them, so that unwinding and
//! destructors cannot wait forever for a peer that is gone. Process-wide, never cleared.
inline std::atomic<bool>& peers_lost() noexcept {
  static std::atomic<bool> lost{false};
  return lost;
}

//! What a timed-out wait was waiting for: the peer (-1: unknown, or every rank) and what was
//! outstanding (may be empty).
struct pending_wait {
  int peer = -1;
  std::string what;
};

//! The deadline of one wait: started at construction, check() throws timeout_error once the
//! policy's timeout_seconds have passed (never when it is 0). One steady_clock read per check
//! when a deadline is set; the description is built only when it has passed.
class wait_clock {
public:
  wait_clock(const wait_policy& policy, const char* operation) noexcept
      : timeout_seconds_(policy.timeout_seconds), operation_(operation),
        start_(std::chrono::steady_clock::now()) {}

  //! @throws timeout_error naming the operation and what `describe()` (a callable returning a
  //! pending_wait, called only then) says was outstanding, once the deadline has passed; sets
  //! peers_lost() first.
  template <class Describe>
  void check(Describe&& describe) const {
    if (timeout_seconds_ <= 0.0) {
      return;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < timeout_seconds_) {
      return;
    }
    peers_lost().store(true);
    const pending_wait pending = std::forward<Describe>(describe)();
    throw timeout_error(
        gradcomp::detail::concat("gradcomp mpi: ", operation_, " timed out after ", elapsed,
                                 " s (timeout ", timeout_seconds_, " s)",
                                 pending.peer >= 0
                                     ? gradcomp::detail::concat(" waiting for rank ", pending.peer)
                                     : std::string(),
                                 pending.what.empty() ? "" : ": ", pending.what),
        operation_, pending.peer, elapsed);
  }

private:
  double timeout_seconds_;
  const char* operation_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace detail

//! @brief Completes `request` by MPI_Test in a loop, pausing per `policy`. Not collective.
//! @throws mpi_error if MPI_Test fails; timeout_error (operation "MPI request") after the
//! policy's timeout_seconds, leaving `request` pending.
inline void wait(MPI_Request& request, const wait_policy& policy = {}) {
  const detail::wait_clock clock(policy, "MPI request");
  for (unsigned round = 0;; ++round) {
    int done = 0;
    detail::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      return;
    }
    clock.check([] { return detail::pending_wait{}; });
    policy.pause(round);
  }
}

//! @brief Completes every request in `requests` (MPI_Testall in a loop). Not collective.
//! @throws mpi_error if MPI_Testall fails; timeout_error (operation "MPI requests") after the
//! policy's timeout_seconds, leaving the incomplete ones pending.
inline void wait_all(std::span<MPI_Request> requests, const wait_policy& policy = {}) {
  const detail::wait_clock clock(policy, "MPI requests");
  for (unsigned round = 0;; ++round) {
    int done = 0;
    detail::check(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (done) {
      return;
    }
    clock.check([] { return detail::pending_wait{}; });
    policy.pause(round);
  }
}

} // namespace gradcomp::mpi
