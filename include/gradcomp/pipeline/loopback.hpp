// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::loopback_exchange: the single-worker transport (no MPI): the average of one
//! worker's message is the message itself.
#pragma once

#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <span>

namespace gradcomp {

//! @brief One-process transport for tests and single-worker runs: start() decompresses the
//! message into the output (O(n + nnz)); the operation is then complete. Deterministic, never
//! blocks. Reports 0 bytes sent and received.
//! @throws std::invalid_argument from start() if the output length differs from the message's
//! dense length.
class loopback_exchange {
public:
  using transport_concept = transport_tag; //!< opts in: start() leaves the mean (see transport).
  //! Decompresses `m` into `average` (zeros, then the message's values; the mean of one
  //! worker is its message). O(n + nnz); complete on return.
  //! @throws std::invalid_argument if average.size() differs from m's dense length.
  void start(const sparse_message& m, std::span<float> average) { decompress(m, average); }
  //! One worker: the values are their own mean; nothing to do.
  void start_in_place(std::span<float>) const noexcept {}
  //! Always true: start_in_place() works for any dense buffer.
  [[nodiscard]] bool accepts_in_place() const noexcept { return true; }
  //! Always true: every operation completes within start().
  [[nodiscard]] bool test() const noexcept { return true; }
  //! Returns at once: every operation completes within start().
  void wait() const noexcept {}
  //! Always 0: nothing goes on a wire.
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return 0; }
  //! Always 0: nothing comes from a wire.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return 0; }
};

static_assert(pipeline_policy::byte_counting_transport<loopback_exchange>);
static_assert(pipeline_policy::in_place_transport<loopback_exchange>);

} // namespace gradcomp
