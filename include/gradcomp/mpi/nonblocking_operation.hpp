// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::nonblocking_operation: test(), wait() (with the wait policy and its
//! deadline) and the blocking call that every gradcomp MPI operation inherits.
#pragma once

#include <gradcomp/mpi/wait_policy.hpp>

#include <string>
#include <utility>

namespace gradcomp::mpi {

//! @brief The CRTP base of every gradcomp MPI operation (ring_allreduce, sparse_allgather,
//! parameter_server, ...): the blocking call, test() and wait() they share. Every rank must
//! start an operation for it to complete (each operation's start() says what it collects).
//!
//! Derived provides `start(args...)`, `bool progress()` (as much progress as possible without
//! blocking; true when the operation is complete), `void reset() noexcept` (drop what is
//! pending, become ready for a new start), `const wait_policy& waiting() const` and `static
//! constexpr const char* operation_name`; optionally `int pending_peer() const` and
//! `std::string pending_description() const` for the timeout message. gradcomp's collectives
//! get progress(), reset() and both timeout hooks from detail::phased_operation
//! (detail/phases.hpp), on which each states its algorithm as phases. A transport of your own
//! may derive from it too (docs/extending.md shows one that does not need to).
//! @tparam Derived the operation class itself.
template <class Derived>
class nonblocking_operation {
public:
  //! Blocking form: start(args...) then wait(). Collective as start() is.
  template <class... Args>
  void operator()(Args&&... args) {
    derived().start(std::forward<Args>(args)...);
    wait();
  }

  //! Makes whatever progress is possible without blocking; true once the result is in place on
  //! this rank. After an exception the object is reset and ready for a new start().
  bool test() {
    try {
      return derived().progress();
    } catch (...) {
      derived().reset();
      throw;
    }
  }

  //! Completes the operation, pausing between tests as the wait policy says.
  //! @throws timeout_error after the wait policy's timeout_seconds (if set), naming the
  //! operation (Derived::operation_name) and what it waited for (Derived's
  //! `pending_peer()` and `pending_description()` when it has them); the operation is reset
  //! first, its pending requests dropped (peers_lost()).
  void wait() {
    const wait_policy& policy = derived().waiting();
    const detail::wait_clock clock(policy, Derived::operation_name);
    for (unsigned round = 0; !test(); ++round) {
      try {
        clock.check([this] { return detail::pending_wait{timeout_peer(), timeout_description()}; });
      } catch (...) {
        derived().reset();
        throw;
      }
      policy.pause(round);
    }
  }

  //! Drops the operation in progress, if any, on this rank: completes or cancels its pending
  //! requests (Derived's reset(): collectives are waited for, receives cancelled, sends
  //! completed; see detail::abandon) so that MPI touches none of its buffers afterwards, and
  //! makes the object ready for a new start(). No-op when idle. For an operation that contains
  //! another (hierarchical_allreduce's inter-group ring) and for callers that give up on an
  //! operation of their own accord; test() and wait() already do this when they throw. Waits
  //! as long as the peers take to post what this rank's pending collectives need (forever if a
  //! peer dropped the operation earlier). Never throws.
  void abandon() noexcept { derived().reset(); }

private:
  Derived& derived() noexcept { return static_cast<Derived&>(*this); }
  // Derived's pending_peer() / pending_description() if it has them (names of their own: the
  // requires-expressions must not find these helpers through Derived)
  [[nodiscard]] int timeout_peer() const {
    if constexpr (requires(const Derived& d) { d.pending_peer(); }) {
      return static_cast<const Derived&>(*this).pending_peer();
    } else {
      return -1;
    }
  }
  [[nodiscard]] std::string timeout_description() const {
    if constexpr (requires(const Derived& d) { d.pending_description(); }) {
      return static_cast<const Derived&>(*this).pending_description();
    } else {
      return {};
    }
  }
};

} // namespace gradcomp::mpi
