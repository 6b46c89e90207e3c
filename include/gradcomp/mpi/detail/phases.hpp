// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::phased_operation: the engine under gradcomp's nonblocking MPI
//! collectives. A collective states its algorithm as phases, "post these requests, then on
//! completion do this"; the engine tests the pending phase, runs the next step once it has
//! completed, abandons what is pending when the operation is dropped and says what the pending
//! phase waits for when a wait times out.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/nonblocking_operation.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief The engine of a gradcomp nonblocking MPI operation (CRTP, between
//! nonblocking_operation and the collective): the collective writes its algorithm as steps, each
//! of which posts requests and names the phase they form and the step that follows it; the
//! engine provides what nonblocking_operation needs (progress() and reset()) and the timeout
//! hooks (pending_peer(), pending_description()).
//!
//! A phase waits for exactly one of:
//! - its collectives: requests posted into collective() (at most two per phase), completed in
//!   posting order (detail::complete(), the second tested once the first completed); then();
//! - a poll: a step of the collective that makes what progress it can without blocking and
//!   returns true once the phase is done (pipelined rings, windows of point-to-point messages);
//!   poll();
//! - an inner operation (a nonblocking_operation, or a detail helper with progress() and
//!   abandon()): await().
//! When the phase is done the engine runs its next step, which posts the next phase; a step
//! that posts none completes the operation. test() then returns true. One phase is pending at a
//! time, so what is pending is always the pending phase's: its collectives, the point-to-point
//! requests it names with sends() and receives(), and the operations it names with pending()
//! or await(). reset() (an exception in test() or wait(), a timeout, abandon(), destruction)
//! completes them in the order detail::abandon asks for: every send first (waited for, while
//! this rank's receives stay posted so that the peers' sends to it can complete), then every
//! receive (cancelled and completed), then the inner operations (each its own abandon()), then
//! the collectives (waited for: they cannot be cancelled). Why each of these completes is the
//! collective's to say, where it posts them.
//!
//! Derived provides `waiting()` and `operation_name` (see nonblocking_operation), its start(),
//! which calls begin_operation() first, and a destructor that calls reset() (the engine cannot:
//! Derived's buffers are gone by the time its own destructor runs). Steps are private member
//! functions of Derived; the engine calls them through member pointers. Not thread-safe; the
//! engine allocates only when a phase names more requests than any phase before it.
//! @tparam Derived the collective.
template <class Derived>
class phased_operation : public nonblocking_operation<Derived> {
  friend class nonblocking_operation<Derived>;

public:
  //! @private For timeout messages: the rank the pending phase waits for (-1: none named, a
  //! collective of every rank, or no operation pending).
  [[nodiscard]] int pending_peer() const noexcept {
    if (!running_) {
      return -1;
    }
    if (phase_.peer_ != nullptr) {
      return (derived().*phase_.peer_)();
    }
    return phase_.inner_peer_ != nullptr ? phase_.inner_peer_(phase_.inner_) : -1;
  }

  //! @private For timeout messages: what the pending phase waits for (empty when the phase says
  //! nothing, or no operation is pending).
  [[nodiscard]] std::string pending_description() const {
    if (!running_) {
      return {};
    }
    if (phase_.describe_ != nullptr) {
      return (derived().*phase_.describe_)();
    }
    std::string what = phase_.what_ != nullptr ? phase_.what_ : "";
    if (phase_.inner_describe_ != nullptr) {
      what += phase_.inner_describe_(phase_.inner_);
    }
    return what;
  }

protected:
  //! A step of the algorithm: posts a phase (or none, which completes the operation).
  using step = void (Derived::*)();
  //! A poll: progress without blocking; true once the phase is done.
  using poll_step = bool (Derived::*)();

  //! @brief The pending phase, as the step that posts it declares it (then(), poll() and await()
  //! return it): what a timeout names, and the point-to-point requests and inner operations it
  //! leaves pending.
  class phase {
  public:
    //! A timeout names `what` (a literal: it is not copied) as what the phase waits for; after
    //! await(), followed by the inner operation's own description.
    phase& describe(const char* what) noexcept {
      what_ = what;
      return *this;
    }
    //! A timeout names what `describe` returns as what the phase waits for.
    phase& describe(std::string (Derived::*describe)() const) noexcept {
      describe_ = describe;
      return *this;
    }
    //! A timeout names the rank `peer` returns (-1: none) as the one the phase waits for.
    phase& peer(int (Derived::*peer)() const noexcept) noexcept {
      peer_ = peer;
      return *this;
    }
    //! Point-to-point sends of the phase, for reset(): MPI_Request, std::vector<MPI_Request>
    //! (read when reset() runs, so it may grow during the phase), std::span<MPI_Request>, or an
    //! object with abandon() that holds sends only (a transfer_queue).
    template <class... Requests>
    phase& sends(Requests&&... requests) {
      (add(std::forward<Requests>(requests), order::sends), ...);
      return *this;
    }
    //! Point-to-point receives of the phase, for reset() (as sends()).
    template <class... Requests>
    phase& receives(Requests&&... requests) {
      (add(std::forward<Requests>(requests), order::receives), ...);
      return *this;
    }
    //! Collectives of the phase that the collective keeps itself (beside collective()'s), for
    //! reset(): MPI_Request, std::vector<MPI_Request> or std::span<MPI_Request>.
    template <class... Requests>
    phase& collectives(Requests&&... requests) {
      (add(std::forward<Requests>(requests), order::collectives), ...);
      return *this;
    }
    //! An inner operation (anything with abandon()) that a poll drives; reset() abandons it.
    template <class Operation>
    phase& pending(Operation& operation) {
      add(operation, order::operations);
      return *this;
    }

  private:
    friend class phased_operation;
    enum class order { sends, receives, operations, collectives }; // reset()'s order
    struct item {
      void* object;
      std::size_t count; // requests of a span
      order kind;
      void (*abandon)(void* object, std::size_t count, request_kind kind) noexcept;
    };

    void add(MPI_Request& request, order kind) { add(std::span(&request, 1), kind); }
    void add(std::span<MPI_Request> requests, order kind) {
      items_.push_back({requests.data(), requests.size(), kind,
                        [](void* o, std::size_t n, request_kind k) noexcept {
                          detail::abandon(std::span(static_cast<MPI_Request*>(o), n), k);
                        }});
    }
    void add(std::vector<MPI_Request>& requests, order kind) {
      items_.push_back({&requests, 0, kind, [](void* o, std::size_t, request_kind k) noexcept {
                          detail::abandon(*static_cast<std::vector<MPI_Request>*>(o), k);
                        }});
    }
    template <class Abandonable>
    void add(Abandonable& x, order kind) {
      items_.push_back({&x, 0, kind, [](void* o, std::size_t, request_kind) noexcept {
                          static_cast<Abandonable*>(o)->abandon();
                        }});
    }

    // Back to no phase; keeps the capacity of items_.
    void clear() noexcept {
      std::vector<item> items = std::move(items_);
      items.clear();
      *this = phase{};
      items_ = std::move(items);
    }

    step next_ = nullptr;
    poll_step poll_ = nullptr;
    bool verify_lengths_ = false; // the length agreement: verify it before next_
    // await(): the inner operation, its test and its timeout hooks
    void* inner_ = nullptr;
    bool (*inner_test_)(void*) = nullptr;
    int (*inner_peer_)(const void*) noexcept = nullptr;
    std::string (*inner_describe_)(const void*) = nullptr;
    const char* what_ = nullptr;
    std::string (Derived::*describe_)() const = nullptr;
    int (Derived::*peer_)() const noexcept = nullptr;
    std::vector<item> items_;
  };

  //! @brief Guards start()'s posting: if start() leaves by an exception after
  //! begin_operation(), whatever it posted is abandoned (reset()) and the object is ready for a
  //! new start(). Move-only.
  class posting {
  public:
    explicit posting(phased_operation& operation) noexcept
        : operation_(&operation), exceptions_(std::uncaught_exceptions()) {}
    posting(posting&& other) noexcept
        : operation_(std::exchange(other.operation_, nullptr)), exceptions_(other.exceptions_) {}
    posting& operator=(posting&&) = delete;
    ~posting() {
      if (operation_ != nullptr && std::uncaught_exceptions() > exceptions_) {
        operation_->reset();
      }
    }

  private:
    phased_operation* operation_;
    int exceptions_;
  };

  phased_operation() = default;
  phased_operation(const phased_operation&) = delete;
  phased_operation& operator=(const phased_operation&) = delete;
  ~phased_operation() = default; // Derived's destructor calls reset()

  //! Whether an operation is in progress (a phase is pending).
  [[nodiscard]] bool running() const noexcept { return running_; }

  //! The first call of start(). Hold the result until start() returns (see posting).
  //! @throws std::invalid_argument ("<operation_name>: start() while an operation is in
  //! progress") if one is.
  [[nodiscard]] posting begin_operation() {
    gradcomp::detail::require(!running_, Derived::operation_name,
                              ": start() while an operation is in progress");
    return posting(*this);
  }

  //! Where to post a collective of the phase being posted (MPI_Iallreduce, MPI_Iallgather, ...:
  //! completed by waiting, never cancelled). At most two per phase.
  [[nodiscard]] MPI_Request* collective() {
    if (posted_ == collectives_.size()) {
      throw std::logic_error("gradcomp mpi: more than two collectives in one phase");
    }
    return &collectives_[posted_++];
  }

  //! The phase just posted waits for its collectives (collective(); none: it is done at once);
  //! once they completed, `next` runs (nullptr: the operation is complete).
  phase& then(step next = nullptr) noexcept {
    running_ = true;
    phase_.next_ = next;
    return phase_;
  }

  //! The phase polls `progress` until it returns true; then `next` runs (nullptr: the operation
  //! is complete). Declare it, and the requests it leaves pending, before posting them.
  phase& poll(poll_step progress, step next = nullptr) noexcept {
    phase_.poll_ = progress;
    return then(next);
  }

  //! The phase waits for `inner` (started by the caller; its test(), or progress() for a detail
  //! helper); then `next` runs (nullptr: the operation is complete). reset() abandons it; a
  //! timeout names its pending_peer() and, after describe()'s text, its pending_description()
  //! where it has them.
  template <class Operation>
  phase& await(Operation& inner, step next = nullptr) {
    phase_.pending(inner);
    phase_.inner_ = &inner;
    phase_.inner_test_ = [](void* o) {
      if constexpr (requires(Operation & x) { x.test(); }) {
        return static_cast<Operation*>(o)->test();
      } else {
        return static_cast<Operation*>(o)->progress();
      }
    };
    if constexpr (requires(const Operation& x) { x.pending_peer(); }) {
      phase_.inner_peer_ = [](const void* o) noexcept {
        return static_cast<const Operation*>(o)->pending_peer();
      };
      phase_.inner_describe_ = [](const void* o) {
        return static_cast<const Operation*>(o)->pending_description();
      };
    }
    return then(next);
  }

  //! The length agreement (detail::length_agreement: one 16-byte MPI_Iallreduce; a mismatch
  //! throws mpi_error naming operation_name on every rank), then `next`. With `enabled` false
  //! or one rank there is nothing to agree: `next` runs at once. `what`, if not null, is what a
  //! timeout names as pending (length_agreement::description). Collective: dropped while
  //! pending, the allreduce is waited for, and completes because every rank begins it.
  void agree_lengths(const communicator& comm,
                     std::size_t n,
                     bool enabled,
                     step next,
                     const char* what = nullptr) {
    if (!enabled || comm.size() == 1) {
      (derived().*next)();
      return;
    }
    length_check_.start(comm, n, *collective());
    then(next).describe(what).verify_lengths_ = true;
  }

  //! Drops the operation in progress, if any (see the class): completes what the pending phase
  //! left pending, sends first, and makes the object ready for a new start(). Never throws.
  void reset() noexcept {
    using order = typename phase::order;
    for (const order kind :
         {order::sends, order::receives, order::operations, order::collectives}) {
      for (const typename phase::item& x : phase_.items_) {
        if (x.kind == kind) {
          x.abandon(x.object, x.count,
                    kind == order::collectives ? request_kind::collective
                                               : request_kind::point_to_point);
        }
      }
    }
    detail::abandon(collectives_, request_kind::collective);
    running_ = false;
    posted_ = 0;
    phase_.clear();
  }

private:
  [[nodiscard]] Derived& derived() noexcept { return static_cast<Derived&>(*this); }
  [[nodiscard]] const Derived& derived() const noexcept {
    return static_cast<const Derived&>(*this);
  }

  // Whether the pending phase is done (never blocks).
  bool settled() {
    if (phase_.poll_ != nullptr) {
      return (derived().*phase_.poll_)();
    }
    if (phase_.inner_test_ != nullptr) {
      return phase_.inner_test_(phase_.inner_);
    }
    for (std::size_t i = 0; i < posted_; ++i) {
      if (!complete(collectives_[i])) {
        return false;
      }
    }
    return true;
  }

  // nonblocking_operation's hook: runs the steps whose phases have completed; true once the
  // operation is complete (or none was started).
  bool progress() {
    while (running_) {
      if (!settled()) {
        return false;
      }
      const step next = phase_.next_;
      const bool verify_lengths = phase_.verify_lengths_;
      running_ = false;
      posted_ = 0;
      phase_.clear();
      if (verify_lengths) {
        length_check_.verify(Derived::operation_name);
      }
      if (next != nullptr) {
        (derived().*next)();
      }
    }
    return true;
  }

  bool running_ = false;
  phase phase_;
  std::array<MPI_Request, 2> collectives_{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::size_t posted_ = 0; // collectives_[0 .. posted_) belong to the pending phase
  length_agreement length_check_;
};

} // namespace gradcomp::mpi::detail
