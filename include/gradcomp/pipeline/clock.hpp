// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief pipeline_policy::monotonic_clock: the clock concept of the pipeline's timestamps.
#pragma once

#include <chrono>

namespace gradcomp::pipeline_policy {

//! @brief A clock for the pipeline's timestamps: a std::chrono clock (std::chrono::is_clock_v)
//! that is steady. Its now() is called on the training thread and on the communication thread,
//! so it must be thread-safe. std::chrono::steady_clock (the default); tests may pass a clock
//! they advance themselves.
template <class C>
concept monotonic_clock = std::chrono::is_clock_v<C> && C::is_steady;

} // namespace gradcomp::pipeline_policy
