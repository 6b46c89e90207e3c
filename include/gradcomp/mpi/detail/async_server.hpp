// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The server side of gradcomp::mpi::async_parameter_server (its receive loop, pull
//! answers, bounded staleness and failure draining) and its message protocol.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/detail/transfer_queue.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi::detail {

//! Tag offsets (from tag_base) of the four messages of async_parameter_server.
enum async_tag : int {
  async_push_tag = 0,    //!< worker -> server: one shard part of a push, wire format (bytes)
  async_control_tag = 1, //!< worker -> server: {async_request, clock} (2 int64)
  async_header_tag = 2,  //!< server -> worker: {version, async_status, culprit, gap} (4 int64)
  async_shard_tag = 3,   //!< server -> worker: the server's shard, n_s floats (none if n_s = 0)
};
inline constexpr int async_tag_count = 4;
inline constexpr std::size_t async_control_fields = 2;
inline constexpr std::size_t async_header_fields = 4;

//! What a control message asks of a server.
enum class async_request : std::int64_t {
  pull = 1,   //!< answer with the shard (once my clock's pushes are applied and SSP allows)
  finish = 2, //!< I push no more; answer with the final shard once every worker is done
  leave = 3,  //!< I push no more and want no answer (a worker destroyed before finish())
};

//! The state a pull answer reports.
enum class async_status : std::int64_t {
  ok = 0,
  bad_arguments = 1, //!< the server's serve() arguments were invalid
  rule_failed = 2,   //!< the update rule threw at a push of the culprit worker
  rejected_push = 3, //!< a push (or control message) of the culprit did not decode / validate
};

//! @brief The server loop of async_parameter_server on one dedicated server rank: receives
//! pushes and control messages from any worker in arrival order (MPI_Improbe / MPI_Imrecv,
//! one at a time), applies each push at once, answers pulls (deferred by the staleness bound),
//! and after a failure keeps draining every message while answering every pull with the
//! failure, so that no worker waits forever. Not collective; one run() per object.
class async_server {
public:
  static constexpr std::uint64_t no_clock = std::numeric_limits<std::uint64_t>::max();

  async_server(const communicator& comm, int workers, int bound, int tag_base, wait_policy wait)
      : comm_(&comm), bound_(static_cast<std::uint64_t>(bound)), tag_base_(tag_base), wait_(wait),
        peers_(static_cast<std::size_t>(workers)) {}
  async_server(const async_server&) = delete;
  async_server& operator=(const async_server&) = delete;
  ~async_server() { abandon(); }

  //! Records a failure found before the loop (the serve() arguments): the loop then only
  //! drains, answers every pull with it, and run() rethrows it.
  void fail_arguments(std::exception_ptr e) { fail(async_status::bad_arguments, -1, e); }

  //! Serves `shard` (n_s floats) with `rule(shard, part)` until every worker is done.
  //! @throws what fail() recorded (after draining), or mpi_error on an MPI failure.
  template <class Rule>
  void run(std::span<float> shard, Rule& rule) {
    shard_ = shard;
    try {
      loop(rule);
    } catch (...) {
      abandon();
      throw;
    }
    if (failure_) {
      std::rethrow_exception(failure_);
    }
  }

  //! Per-worker state; public for the statistics.
  struct peer {
    std::uint64_t received = 0;       // pushes received (= applied unless the server failed)
    std::uint64_t applied = 0;        // pushes applied by the rule
    std::uint64_t pulled_version = 0; // version sent in the last answer (0: the initial values)
    std::int64_t pull_clock = -1;     // clock of the pending pull, -1 if none
    std::int64_t final_clock = -1;    // clock of its finish / leave, -1 before it
    bool wants_final = false;         // finish (answer when all are done), not leave
    bool deferred = false;            // its pending pull was counted as deferred
    std::array<std::int64_t, async_header_fields> header{};
    std::vector<float> snapshot; // the shard as answered (the sends read it)
    std::array<MPI_Request, 2> replies{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  };

  [[nodiscard]] const std::vector<peer>& peers() const noexcept { return peers_; }
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
  [[nodiscard]] std::uint64_t max_staleness() const noexcept { return max_staleness_; }
  [[nodiscard]] double staleness_sum() const noexcept { return staleness_sum_; }
  [[nodiscard]] std::uint64_t pulls_answered() const noexcept { return answered_; }
  [[nodiscard]] std::uint64_t pulls_deferred() const noexcept { return deferred_; }
  [[nodiscard]] std::uint64_t max_clock_gap() const noexcept { return max_gap_; }
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }

private:
  template <class Rule>
  void loop(Rule& rule) {
    bool control_first = false;
    for (unsigned idle = 0;;) {
      bool moved = false;
      if (receiving_ != MPI_REQUEST_NULL) {
        if (complete(receiving_)) {
          handle_received(rule);
          moved = true;
        }
      } else {
        moved = probe(control_first) || probe(!control_first);
        control_first = !control_first; // neither kind starves the other
      }
      moved = progress_replies() || moved;
      moved = answer_pulls() || moved;
      if (receiving_ == MPI_REQUEST_NULL && all_done()) {
        break;
      }
      if (moved) {
        idle = 0;
      } else {
        wait_.pause(idle++);
      }
    }
    wait_replies();
    for (std::size_t w = 0; w < peers_.size(); ++w) {
      if (peers_[w].wants_final) {
        answer(w, static_cast<std::uint64_t>(peers_[w].final_clock), no_clock);
      }
    }
    wait_replies();
  }

  // Starts receiving the next message of one kind, if one has arrived.
  bool probe(bool control) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    const int tag = tag_base_ + (control ? async_control_tag : async_push_tag);
    check(MPI_Improbe(MPI_ANY_SOURCE, tag, comm_->native(), &flag, &message, &status),
          "MPI_Improbe");
    if (flag == 0) {
      return false;
    }
    int count = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    source_ = status.MPI_SOURCE;
    control_ = control;
    bytes_.resize(static_cast<std::size_t>(count));
    check(MPI_Imrecv(bytes_.data(), count, MPI_BYTE, &message, &receiving_), "MPI_Imrecv");
    return true;
  }

  template <class Rule>
  void handle_received(Rule& rule) {
    const int w = source_;
    if (w < 0 || static_cast<std::size_t>(w) >= peers_.size()) {
      reject(w, gradcomp::detail::concat("a message from rank ", w, ", which is not a worker"));
      return;
    }
    if (control_) {
      handle_control(peers_[static_cast<std::size_t>(w)], w);
    } else {
      handle_push(peers_[static_cast<std::size_t>(w)], w, rule);
    }
  }

  template <class Rule>
  void handle_push(peer& p, int w, Rule& rule) {
    bytes_received_ += bytes_.size();
    if (p.final_clock >= 0 && p.received >= static_cast<std::uint64_t>(p.final_clock)) {
      reject(w, gradcomp::detail::concat("a push after its finish at clock ", p.final_clock));
      return;
    }
    ++p.received;
    if (failure_) {
      return; // draining
    }
    try {
      decode(bytes_, message_);
      check_length(message_, shard_.size(), w);
    } catch (const wire_error& e) {
      reject(w, gradcomp::detail::concat("push ", p.received, ": ", e.what()));
      return;
    }
    try {
      rule(shard_, std::as_const(message_));
    } catch (...) {
      fail(async_status::rule_failed, w, std::current_exception());
      return;
    }
    const std::uint64_t staleness = version_ - p.pulled_version;
    max_staleness_ = std::max(max_staleness_, staleness);
    staleness_sum_ += static_cast<double>(staleness);
    ++p.applied;
    ++version_;
  }

  void handle_control(peer& p, int w) {
    std::array<std::int64_t, async_control_fields> m{};
    if (bytes_.size() != sizeof(m)) {
      reject(w, gradcomp::detail::concat("a control message of ", bytes_.size(), " bytes, not ",
                                         sizeof(m)));
      return;
    }
    std::memcpy(m.data(), bytes_.data(), sizeof(m));
    const auto kind = static_cast<async_request>(m[0]);
    const std::int64_t clock = m[1];
    if (kind == async_request::leave) { // destroyed: a pull it dropped is not answered
      p.pull_clock = -1;
    }
    const bool known = kind == async_request::pull || kind == async_request::finish ||
                       kind == async_request::leave;
    if (!known || p.final_clock >= 0 || p.pull_clock >= 0 || clock < 0 ||
        static_cast<std::uint64_t>(clock) < p.received) {
      reject(w, gradcomp::detail::concat("a control message (request ", m[0], ", clock ", clock,
                                         ") out of protocol after ", p.received, " pushes"));
      return;
    }
    if (kind == async_request::pull) {
      p.pull_clock = clock;
      p.deferred = false;
    } else {
      p.final_clock = clock;
      p.wants_final = kind == async_request::finish;
    }
  }

  [[nodiscard]] static bool done(const peer& p) noexcept {
    return p.final_clock >= 0 && p.received == static_cast<std::uint64_t>(p.final_clock);
  }
  [[nodiscard]] bool all_done() const noexcept {
    return std::all_of(peers_.begin(), peers_.end(), [](const peer& p) { return done(p); });
  }
  // SSP: the smallest clock (pushes received) of the workers that are not done; a done worker
  // counts as infinity (no_clock when every worker is done).
  [[nodiscard]] std::uint64_t slowest_clock() const noexcept {
    std::uint64_t slowest = no_clock;
    for (const peer& p : peers_) {
      if (!done(p)) {
        slowest = std::min(slowest, p.received);
      }
    }
    return slowest;
  }

  // Answers every pending pull that may be answered now.
  bool answer_pulls() {
    bool moved = false;
    const std::uint64_t slowest = slowest_clock();
    for (std::size_t w = 0; w < peers_.size(); ++w) {
      peer& p = peers_[w];
      if (p.pull_clock < 0 || p.replies[0] != MPI_REQUEST_NULL ||
          p.replies[1] != MPI_REQUEST_NULL) {
        continue;
      }
      const auto clock = static_cast<std::uint64_t>(p.pull_clock);
      if (!failure_) {
        if (p.received < clock) {
          continue; // its pushes before the pull are still on the way
        }
        if (bound_ > 0 && clock > slowest + bound_) {
          deferred_ += p.deferred ? 0 : 1;
          p.deferred = true;
          continue;
        }
      }
      answer(w, clock, slowest);
      p.pull_clock = -1;
      moved = true;
    }
    return moved;
  }

  void answer(std::size_t w, std::uint64_t clock, std::uint64_t slowest) {
    peer& p = peers_[w];
    const std::uint64_t gap = slowest == no_clock || clock < slowest ? 0 : clock - slowest;
    max_gap_ = std::max(max_gap_, gap);
    p.header = {static_cast<std::int64_t>(version_), static_cast<std::int64_t>(status_), culprit_,
                static_cast<std::int64_t>(gap)};
    p.snapshot.assign(shard_.begin(), shard_.end());
    p.pulled_version = version_;
    ++answered_;
    const int rank = static_cast<int>(w);
    const MPI_Comm comm = comm_->native();
    check(MPI_Isend(p.header.data(), static_cast<int>(async_header_fields), MPI_INT64_T, rank,
                    tag_base_ + async_header_tag, comm, &p.replies[0]),
          "MPI_Isend");
    if (!p.snapshot.empty()) {
      check(MPI_Isend(p.snapshot.data(), static_cast<int>(p.snapshot.size()), MPI_FLOAT, rank,
                      tag_base_ + async_shard_tag, comm, &p.replies[1]),
            "MPI_Isend");
      bytes_sent_ += p.snapshot.size() * sizeof(float);
    }
  }

  bool progress_replies() {
    bool moved = false;
    for (peer& p : peers_) {
      for (MPI_Request& r : p.replies) {
        if (r != MPI_REQUEST_NULL && complete(r)) {
          moved = true;
        }
      }
    }
    return moved;
  }

  void wait_replies() {
    for (unsigned round = 0;; ++round) {
      progress_replies();
      const bool pending = std::any_of(peers_.begin(), peers_.end(), [](const peer& p) {
        return p.replies[0] != MPI_REQUEST_NULL || p.replies[1] != MPI_REQUEST_NULL;
      });
      if (!pending) {
        return;
      }
      wait_.pause(round);
    }
  }

  void reject(int worker, const std::string& what) {
    fail(async_status::rejected_push, worker,
         std::make_exception_ptr(wire_error(gradcomp::detail::concat(
             "gradcomp wire: async_parameter_server: server rank ", comm_->rank(),
             " rejected worker rank ", worker, ": ", what))));
  }

  // The first failure is kept; from then on the loop drains and answers with it.
  void fail(async_status status, int worker, std::exception_ptr e) {
    if (!failure_) {
      failure_ = std::move(e);
      status_ = status;
      culprit_ = worker;
    }
  }

  // Completes what is pending when run() is left by an exception (an MPI failure): the reply
  // sends are waited for (detail::abandon), the receive in progress, matched already, completes
  // when its message has arrived.
  void abandon() noexcept {
    for (peer& p : peers_) {
      detail::abandon(std::span<MPI_Request>(p.replies), request_kind::point_to_point);
    }
    detail::abandon(receiving_, request_kind::point_to_point);
  }

  const communicator* comm_;
  std::uint64_t bound_;
  int tag_base_;
  wait_policy wait_;
  std::vector<peer> peers_;
  std::span<float> shard_;
  std::vector<std::byte> bytes_;
  sparse_message message_;
  MPI_Request receiving_ = MPI_REQUEST_NULL;
  int source_ = -1;
  bool control_ = false;
  std::uint64_t version_ = 0, max_staleness_ = 0, answered_ = 0, deferred_ = 0, max_gap_ = 0;
  double staleness_sum_ = 0.0;
  std::size_t bytes_received_ = 0, bytes_sent_ = 0;
  std::exception_ptr failure_;
  async_status status_ = async_status::ok;
  std::int64_t culprit_ = -1;
};

} // namespace gradcomp::mpi::detail
