// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief detail::communication_thread: the pipeline's communication thread (the groups'
//! exchanges strictly in group order, one at a time) and the state it shares with the training
//! thread; detail::timed_exchange: one exchange, timed, its exception caught.
#pragma once

#include <gradcomp/detail/thread_cpu_time.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace gradcomp::detail {

//! @brief What the exchange of one group took and moved, or the sums over an iteration's groups
//! (communication_thread::collect()).
struct exchange_report {
  double seconds = 0.0; //!< busy: start() to wait(), on the pipeline's clock (s).
  //! The communication thread's CPU time meanwhile (s); negative where the platform has no
  //! per-thread CPU clock (detail::thread_cpu_seconds).
  double cpu_seconds = 0.0;
  std::size_t bytes_sent = 0;     //!< as the transport counts them (0 where it does not).
  std::size_t bytes_received = 0; //!< as the transport counts them (0 where it does not).
  std::exception_ptr error;       //!< what the exchange threw (the first one, summed).
};

//! @brief Runs `exchange(report)` (the transport's start() to wait(); it may set the report's
//! bytes) timed on Clock and on the thread's CPU clock, and returns the report with whatever
//! it threw caught in `error`.
template <class Clock, class Exchange>
exchange_report timed_exchange(Exchange&& exchange) {
  exchange_report report;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  try {
    exchange(report);
  } catch (...) {
    report.error = std::current_exception();
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  report.cpu_seconds = cpu0 < 0.0 ? -1.0 : thread_cpu_seconds() - cpu0;
  return report;
}

//! @brief The pipeline's communication thread: the exchanges of an iteration's groups, strictly
//! in group order, one at a time, FIFO (a group that is ready waits for the previous ones), so
//! every rank issues the same sequence of collectives whatever order the groups become ready
//! in. The training thread marks groups ready (mark_ready()) and collects the iteration's
//! sums once the thread is idle (collect()); after a failed exchange the iteration's later
//! groups are handed to the exchange as skipped. The ready flags, the position in the
//! iteration and the sums are shared under a mutex; what an exchange reads and writes (the
//! group's messages and buffers) is handed over by the ready flag and by collect()'s wait.
class communication_thread {
public:
  communication_thread() = default;
  communication_thread(const communication_thread&) = delete;
  communication_thread& operator=(const communication_thread&) = delete;
  //! Stops the thread if it runs (see stop()).
  ~communication_thread() {
    if (thread_.joinable()) {
      stop();
    }
  }

  //! @brief Starts the thread for iterations of `groups` groups, none ready: it calls
  //! `exchange(group, skip)` -> exchange_report for each group in turn once it is ready (skip:
  //! an earlier exchange of the iteration failed; it should then do nothing but reset what it
  //! keeps per group). Once only. Allocates.
  template <class Exchange>
  void start(std::size_t groups, Exchange exchange) {
    ready_.assign(groups, false);
    thread_ = std::thread([this, exchange = std::move(exchange)]() mutable { run(exchange); });
  }

  //! Stops the thread after the exchange it runs, if any, and joins it. A started iteration is
  //! abandoned.
  void stop() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
  }

  //! Group `group` of this iteration is ready for its exchange (training thread).
  void mark_ready(std::size_t group) {
    {
      const std::lock_guard lock(mutex_);
      ready_[group] = true;
    }
    work_cv_.notify_one();
  }

  //! @brief Waits until the thread is idle: no exchange runs and the next group is not ready
  //! (every group exchanged, or one never marked ready); returns the iteration's sums (the first
  //! error) and starts a new iteration, no group ready (training thread).
  exchange_report collect() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return !busy_ && (next_ == ready_.size() || !ready_[next_]); });
    exchange_report sums = std::exchange(sums_, exchange_report{});
    next_ = 0;
    ready_.assign(ready_.size(), false);
    return sums;
  }

  //! @brief From the next iteration on, iterations of `groups` groups, none ready. Between
  //! iterations only (the thread is idle: after collect(), before the next mark_ready()).
  //! Allocates outside the lock.
  void restart(std::size_t groups) {
    std::vector<bool> ready(groups, false);
    const std::lock_guard lock(mutex_);
    ready_.swap(ready);
    next_ = 0;
  }

private:
  // The thread: groups in order, one at a time.
  template <class Exchange>
  void run(Exchange& exchange) {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [this] { return stop_ || (next_ < ready_.size() && ready_[next_]); });
      if (stop_) {
        return;
      }
      const std::size_t group = next_;
      const bool skip = sums_.error != nullptr;
      busy_ = true;
      lock.unlock();
      const exchange_report report = exchange(group, skip);
      lock.lock();
      sums_.seconds += report.seconds;
      sums_.cpu_seconds = sums_.cpu_seconds < 0.0 || report.cpu_seconds < 0.0
                              ? -1.0
                              : sums_.cpu_seconds + report.cpu_seconds;
      sums_.bytes_sent += report.bytes_sent;
      sums_.bytes_received += report.bytes_received;
      if (report.error && !sums_.error) {
        sums_.error = report.error;
      }
      busy_ = false;
      ++next_;
      done_cv_.notify_all();
    }
  }

  // shared between the threads, under mutex_
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<bool> ready_; // per group of this iteration
  std::size_t next_ = 0;    // the group to exchange next
  bool busy_ = false;       // an exchange runs
  bool stop_ = false;
  exchange_report sums_; // of this iteration's exchanges so far
  std::thread thread_;   // last: starts after every other member exists
};

} // namespace gradcomp::detail
