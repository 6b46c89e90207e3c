// SPDX-License-Identifier: Apache-2.0
// The chunked thread pool: every chunk runs exactly once, exceptions propagate, and
// concurrent callers are serialised safely.
#include <gradcomp/detail/parallel.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../common/catch.hpp"

namespace detail_parallel_test {

using namespace gradcomp::detail;

TEST_CASE("parallel_chunks covers every element exactly once", "[parallel]") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, chunk_elements - 1, chunk_elements,
                        chunk_elements + 1, 7 * chunk_elements + 3}) {
    for (unsigned threads : {0u, 1u, 2u, 8u}) {
      CAPTURE(n, threads);
      std::vector<std::atomic<int>> hits(n);
      std::atomic<bool> misplaced{false}; // Catch2 assertions are not thread-safe: check later
      parallel_chunks(n, threads, [&](std::size_t c, std::size_t b, std::size_t e) {
        if (b != c * chunk_elements) {
          misplaced = true;
        }
        for (std::size_t i = b; i < e; ++i) {
          hits[i].fetch_add(1);
        }
      });
      REQUIRE_FALSE(misplaced.load());
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(hits[i].load() == 1);
      }
    }
  }
}

TEST_CASE("an exception in a chunk reaches the caller", "[parallel]") {
  CHECK_THROWS_WITH(parallel_chunks(10 * chunk_elements, 0,
                                    [](std::size_t c, std::size_t, std::size_t) {
                                      if (c == 5) {
                                        throw std::runtime_error("chunk 5 failed");
                                      }
                                    }),
                    "chunk 5 failed");
  // the pool still works afterwards
  std::atomic<std::size_t> total{0};
  parallel_chunks(4 * chunk_elements, 0,
                  [&](std::size_t, std::size_t b, std::size_t e) { total += e - b; });
  CHECK(total == 4 * chunk_elements);
}

TEST_CASE("concurrent callers share the pool safely", "[parallel]") {
  std::atomic<std::size_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        parallel_chunks(3 * chunk_elements + 1, 0,
                        [&](std::size_t, std::size_t b, std::size_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : callers) {
    t.join();
  }
  CHECK(total == 4 * 20 * (3 * chunk_elements + 1));
}

} // namespace detail_parallel_test
