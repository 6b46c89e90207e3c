// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The pipeline's transport concept: a nonblocking averaging exchange of one compressed
//! group (start / test / wait), and the optional byte counters a transport may report.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <concepts>
#include <cstddef>
#include <span>

namespace gradcomp::pipeline_policy {

//! @brief A pipeline transport: averages one compressed message across the workers.
//!
//! Required members:
//! * `start(message, average)`: starts the exchange of `message` (a group's compressed
//!   gradient, dense length n); `average` (n floats) receives the element-wise mean over the
//!   workers of their decompressed messages. `message` may be reused once start() returns;
//!   `average` must not be touched until the operation completes.
//! * `bool test()`: makes progress without blocking; true once `average` holds the result.
//! * `void wait()`: completes the operation.
//! One operation at a time per object. Adapters: gradcomp::loopback_exchange (one process),
//! gradcomp::mpi::dense_exchange and gradcomp::mpi::sparse_exchange (pipeline/mpi_exchange.hpp).
template <class T>
concept transport = requires(T& t, const sparse_message& m, std::span<float> out) {
  t.start(m, out);
  { t.test() } -> std::same_as<bool>;
  t.wait();
};

//! @brief A transport that reports the bytes this rank sent and received in its last operation.
template <class T>
concept byte_counting_transport = transport<T> && requires(const T& t) {
  { t.bytes_sent() } -> std::convertible_to<std::size_t>;
  { t.bytes_received() } -> std::convertible_to<std::size_t>;
};

} // namespace gradcomp::pipeline_policy
