// SPDX-License-Identifier: Apache-2.0
// detail::communication_thread (pipeline/detail/communication_thread.hpp): the groups' exchanges
// run strictly in group order whatever order they become ready in, on the thread; after a failed
// exchange the iteration's later groups are handed over as skipped; collect() returns the sums
// of every exchange's report and starts the next iteration.
#include <gradcomp/pipeline/detail/communication_thread.hpp>

#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../../common/catch.hpp"

namespace pipeline_detail_communication_thread_test {

using gradcomp::detail::communication_thread;
using gradcomp::detail::exchange_report;

namespace {

// What the exchanges saw: the groups in the order they ran, with their skip flag and thread.
struct exchange_log {
  std::mutex mutex;
  std::vector<std::size_t> groups;
  std::vector<bool> skipped;
  std::vector<std::thread::id> threads;

  // An exchange callable: group g reports seconds g + 1, g + 10 bytes sent and 2 g received;
  // the group `failing` (if any) reports an error; a skipped group reports nothing.
  auto exchange(std::size_t failing = static_cast<std::size_t>(-1)) {
    return [this, failing](std::size_t g, bool skip) {
      {
        const std::lock_guard lock(mutex);
        groups.push_back(g);
        skipped.push_back(skip);
        threads.push_back(std::this_thread::get_id());
      }
      exchange_report r;
      if (skip) {
        return r;
      }
      r.seconds = static_cast<double>(g + 1);
      r.cpu_seconds = 0.5;
      r.bytes_sent = g + 10;
      r.bytes_received = 2 * g;
      if (g == failing) {
        r.error = std::make_exception_ptr(std::runtime_error("group failed"));
      }
      return r;
    };
  }
};

} // namespace

TEST_CASE("communication_thread: exchanges in group order, whatever order groups become ready",
          "[pipeline][communication_thread]") {
  exchange_log log;
  communication_thread comm;
  comm.start(4, log.exchange());
  for (int iteration = 0; iteration < 3; ++iteration) {
    comm.mark_ready(3);
    comm.mark_ready(1);
    comm.mark_ready(2);
    comm.mark_ready(0);
    const exchange_report sums = comm.collect();
    CHECK(sums.seconds == 1.0 + 2.0 + 3.0 + 4.0);
    CHECK(sums.cpu_seconds == 4 * 0.5);
    CHECK(sums.bytes_sent == 10u + 11u + 12u + 13u);
    CHECK(sums.bytes_received == 0u + 2u + 4u + 6u);
    CHECK_FALSE(sums.error);
  }
  const std::lock_guard lock(log.mutex);
  CHECK(log.groups == std::vector<std::size_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(log.threads == std::vector<std::thread::id>(12, log.threads.front()));
  CHECK(log.threads.front() != std::this_thread::get_id());
}

TEST_CASE("communication_thread: after a failed exchange the later groups are skipped",
          "[pipeline][communication_thread]") {
  exchange_log log;
  communication_thread comm;
  comm.start(4, log.exchange(1));
  for (std::size_t g = 0; g < 4; ++g) {
    comm.mark_ready(g);
  }
  const exchange_report sums = comm.collect();
  REQUIRE(sums.error);
  CHECK_THROWS_WITH(std::rethrow_exception(sums.error), "group failed");
  CHECK(sums.seconds == 1.0 + 2.0); // groups 2 and 3 reported nothing
  const std::lock_guard lock(log.mutex);
  CHECK(log.groups == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(log.skipped == std::vector<bool>{false, false, true, true});
}

} // namespace pipeline_detail_communication_thread_test
