// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A small persistent thread pool that runs fixed-size chunks of a loop.
//!
//! Work is always cut into chunks of `chunk_elements` elements regardless of the thread count,
//! and partial results are combined in chunk order, so every result is identical for any
//! number of threads (determinism does not depend on the machine).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gradcomp::detail {

//! Elements per chunk of every parallel pass (64 Ki floats = 256 KiB).
inline constexpr std::size_t chunk_elements = std::size_t{1} << 16;

[[nodiscard]] constexpr std::size_t chunk_count(std::size_t n) noexcept {
  return (n + chunk_elements - 1) / chunk_elements;
}

class thread_pool {
public:
  explicit thread_pool(unsigned workers) {
    threads_.reserve(workers);
    for (unsigned w = 0; w < workers; ++w) {
      threads_.emplace_back([this, w] { worker_loop(w + 1); });
    }
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) {
      t.join();
    }
  }

  //! Threads that can take part in a run: the workers plus the caller.
  [[nodiscard]] unsigned size() const noexcept {
    return static_cast<unsigned>(threads_.size()) + 1;
  }

  //! Runs fn(chunk) for every chunk in [0, chunks) on at most `max_threads` threads (the caller
  //! included) and returns when all are done. Rethrows the first exception thrown by fn.
  //! Concurrent runs from different threads are serialised.
  void run(std::size_t chunks, const std::function<void(std::size_t)>& fn, unsigned max_threads) {
    const unsigned participants =
        static_cast<unsigned>(std::min<std::size_t>({chunks, size(), std::max(1u, max_threads)}));
    if (participants <= 1) {
      for (std::size_t c = 0; c < chunks; ++c) {
        fn(c);
      }
      return;
    }
    std::lock_guard run_lock(run_mutex_);
    {
      std::lock_guard lock(mutex_);
      job_ = &fn;
      job_chunks_ = chunks;
      next_chunk_.store(0, std::memory_order_relaxed);
      participants_ = participants;
      pending_ = participants - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work(fn, chunks);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

private:
  void work(const std::function<void(std::size_t)>& fn, std::size_t chunks) {
    try {
      for (std::size_t c = next_chunk_.fetch_add(1); c < chunks; c = next_chunk_.fetch_add(1)) {
        fn(c);
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) {
        error_ = std::current_exception();
      }
      next_chunk_.store(chunks); // stop handing out chunks
    }
  }

  void worker_loop(unsigned id) {
    std::size_t seen = 0;
    for (;;) {
      const std::function<void(std::size_t)>* fn = nullptr;
      std::size_t chunks = 0;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) {
          return;
        }
        seen = generation_;
        if (id >= participants_) {
          continue;
        }
        fn = job_;
        chunks = job_chunks_;
      }
      work(*fn, chunks);
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t job_chunks_ = 0;
  std::atomic<std::size_t> next_chunk_{0};
  unsigned participants_ = 0;
  unsigned pending_ = 0;
  std::size_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

//! The process-wide pool: one thread per hardware thread (the caller counts as one).
[[nodiscard]] inline thread_pool& default_pool() {
  static thread_pool pool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return pool;
}

//! Runs fn(chunk_index, begin, end) over [0, n) in chunks of chunk_elements, on up to
//! `max_threads` threads (0 = all of the default pool).
template <class Fn>
void parallel_chunks(std::size_t n, unsigned max_threads, Fn&& fn) {
  const std::size_t chunks = chunk_count(n);
  auto body = [&](std::size_t c) {
    const std::size_t begin = c * chunk_elements;
    fn(c, begin, std::min(n, begin + chunk_elements));
  };
  if (chunks <= 1) {
    if (chunks == 1) {
      body(0);
    }
    return;
  }
  thread_pool& pool = default_pool();
  pool.run(chunks, std::function<void(std::size_t)>(body),
           max_threads == 0 ? pool.size() : max_threads);
}

} // namespace gradcomp::detail
