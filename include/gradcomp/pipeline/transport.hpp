// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The pipeline's transport concepts: a nonblocking averaging exchange of one compressed
//! group (start / test / wait), its multi-part form (several messages per rank: redundant
//! placement), and the optional byte counters a transport may report.
#pragma once

#include <gradcomp/sparse/sparse_message.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp {

//! @brief Opt-in tag: a pipeline transport declares `using transport_concept = transport_tag;`.
//! The members alone do not make a transport: gradcomp::mpi::sparse_allgather, for one, has
//! start(message, sum), test() and wait(), but leaves the SUM over ranks where the pipeline
//! needs the average, so it must not be accepted by accident. A type that declares the tag
//! promises the semantics of the concept below (the mean over the workers).
struct transport_tag {};

} // namespace gradcomp

namespace gradcomp::pipeline_policy {

//! @brief A pipeline transport: averages one compressed message across the workers.
//!
//! Required members:
//! * `using transport_concept = gradcomp::transport_tag;` (see transport_tag).
//! * `start(message, average)`: starts the exchange of `message` (a group's compressed
//!   gradient, dense length n); `average` (n floats) receives the element-wise mean over the
//!   workers of their decompressed messages. `message` may be reused once start() returns;
//!   `average` must not be touched until the operation completes.
//! * `bool test()`: makes progress without blocking; true once `average` holds the result.
//! * `void wait()`: completes the operation.
//! One operation at a time per object. gradcomp::pipeline itself calls start() and then wait()
//! on its communication thread (test() is for callers that poll). Adapters:
//! gradcomp::loopback_exchange (one process), gradcomp::mpi::dense_exchange and
//! gradcomp::mpi::sparse_exchange (mpi/pipeline_transports.hpp).
template <class T>
concept transport = std::same_as<typename T::transport_concept, transport_tag> &&
    requires(T& t, const sparse_message& m, std::span<float> out) {
  t.start(m, out);
  { t.test() } -> std::same_as<bool>;
  t.wait();
};

//! @brief A pipeline transport that takes several messages per rank and operation: the parts
//! of a redundant placement (S3's CSSGD: every part of the batch is computed by r ranks).
//!
//! Required members:
//! * `using transport_concept = gradcomp::transport_tag;` (see transport_tag).
//! * `std::size_t parts_per_rank() const`: how many messages start() takes on this rank, at
//!   least 1 and fixed for the object's life (the pipeline asks once, at construction).
//! * `start(parts, average)`: `parts` (parts_per_rank() messages, this rank's parts in the
//!   transport's order, each of dense length n); `average` (n floats) receives the element-wise
//!   mean over all parts of all ranks (each part counted once, however many ranks hold it).
//!   The messages may be reused once start() returns; `average` must not be touched until the
//!   operation completes.
//! * `bool test()` and `void wait()`, as for transport.
//! Adapters: gradcomp::mpi::coded_dense_exchange and gradcomp::mpi::coded_sparse_exchange
//! (mpi/pipeline_transports.hpp).
template <class T>
concept multi_part_transport = std::same_as<typename T::transport_concept, transport_tag> &&
    requires(T& t, const T& ct, std::span<const sparse_message> parts, std::span<float> out) {
  { ct.parts_per_rank() } -> std::convertible_to<std::size_t>;
  t.start(parts, out);
  { t.test() } -> std::same_as<bool>;
  t.wait();
};

//! @brief A transport that can also average an uncompressed float32 group in place, which lets
//! the pipeline of a lossless gradcomp::dense compressor skip the message: each layer's
//! gradient is copied once, straight into the group's buffer, and the transport sums it there.
//!
//! Required members, besides transport's:
//! * `start_in_place(values)`: `values` (n floats) holds this rank's group gradient; on
//!   completion (test() / wait(), as for start()) it holds the element-wise mean over the
//!   workers, exactly what start(m, values) gives for a dense float32 message m of the same
//!   values. `values` must not be touched until then.
//! * `bool accepts_in_place() const`: whether start_in_place() may be used (a type-erased
//!   transport may decline at run time); asked once, when the pipeline is built.
//! Adapters: gradcomp::loopback_exchange, gradcomp::mpi::dense_exchange,
//! native_dense_exchange and hierarchical_exchange (mpi/pipeline_transports.hpp).
template <class T>
concept in_place_transport = transport<T> && requires(T& t, const T& ct, std::span<float> values) {
  t.start_in_place(values);
  { ct.accepts_in_place() } -> std::convertible_to<bool>;
};

//! @brief What gradcomp::pipeline accepts: a transport (one message per rank) or a
//! multi_part_transport (several; preferred when a type models both).
template <class T>
concept pipeline_transport = transport<T> || multi_part_transport<T>;

//! @brief A transport that reports the bytes this rank sent and received in its last operation.
template <class T>
concept byte_counting_transport = pipeline_transport<T> && requires(const T& t) {
  { t.bytes_sent() } -> std::convertible_to<std::size_t>;
  { t.bytes_received() } -> std::convertible_to<std::size_t>;
};

//! @brief A transport whose average holds only a global selection of the elements (gTop-k,
//! mpi::gtopk_exchange): `selected_indices()` returns the indices (ascending, within the
//! message's dense length) of the elements its last completed operation summed, or nullptr when
//! every sent value was summed (a type-erased transport over an ordinary one). The pipeline then
//! gives each rank's sent values outside the selection back to the residuals they came from
//! (error feedback on the global selection), so nothing is lost.
template <class T>
concept selecting_transport = pipeline_transport<T> && requires(const T& t) {
  { t.selected_indices() } -> std::same_as<const std::vector<std::uint32_t>*>;
};

} // namespace gradcomp::pipeline_policy
