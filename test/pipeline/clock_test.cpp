// SPDX-License-Identifier: Apache-2.0
// pipeline_policy::monotonic_clock (pipeline/clock.hpp): a std::chrono clock that is steady;
// steady_clock and a test's hand-advanced clock qualify, a non-steady or non-clock type does not.
#include <gradcomp/pipeline/clock.hpp>

#include <chrono>
#include <cstdint>

#include "../common/catch.hpp"
#include "../common/pipeline_testing.hpp"

namespace pipeline_clock_test {

using gradcomp::pipeline_policy::monotonic_clock;
using gradcomp::test::manual_clock;

// Every member std::chrono::is_clock_v asks for, but not steady (a wall clock may jump).
struct wall_clock {
  using rep = std::int64_t;
  using period = std::milli;
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<wall_clock>;
  static constexpr bool is_steady = false;
  static time_point now() noexcept { return time_point(duration(0)); }
};

// Steady, but no now(): not a std::chrono clock.
struct no_now_clock {
  using rep = std::int64_t;
  using period = std::milli;
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<no_now_clock>;
  static constexpr bool is_steady = true;
};

TEST_CASE("monotonic_clock: a steady std::chrono clock, nothing else", "[pipeline][clock]") {
  STATIC_REQUIRE(monotonic_clock<std::chrono::steady_clock>);       // the pipeline's default
  STATIC_REQUIRE(monotonic_clock<manual_clock>);                    // a clock the test advances
  STATIC_REQUIRE_FALSE(monotonic_clock<std::chrono::system_clock>); // not steady
  STATIC_REQUIRE_FALSE(monotonic_clock<wall_clock>);
  STATIC_REQUIRE_FALSE(monotonic_clock<no_now_clock>);
  STATIC_REQUIRE_FALSE(monotonic_clock<int>);
}

} // namespace pipeline_clock_test
