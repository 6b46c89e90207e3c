// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::detail::thread_cpu_seconds: the CPU time the calling thread has used.
#pragma once

#if defined(__unix__) || defined(__APPLE__)
#include <time.h>
#endif

namespace gradcomp::detail {

//! CPU seconds the calling thread has used so far (POSIX CLOCK_THREAD_CPUTIME_ID), or a
//! negative value where the platform has no per-thread CPU clock. O(1), one system call
//! (a vDSO read on Linux).
[[nodiscard]] inline double thread_cpu_seconds() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0) {
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
#endif
  return -1.0;
}

} // namespace gradcomp::detail
