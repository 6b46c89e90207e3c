// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::cuda::basic_device_message: what a CUDA compressor selected, still in the
//! backend's memory, and its copy into a host gradcomp::sparse_message for the transport (whose
//! wire encoding, sparse/wire.hpp, is the same for both).
#pragma once

#include <gradcomp/cuda/buffer.cuh>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/value_type.hpp>

#include <cstddef>
#include <cstdint>

namespace gradcomp::cuda {

//! @brief `nnz()` (index, value) pairs with strictly ascending 32-bit indices, in Backend's
//! memory (device memory for device_backend), plus the gradient's dense length and the value
//! type the values are representable in. Memory: 8 bytes per pair of capacity, grown on demand
//! and kept across reuse. Not thread-safe.
template <class Backend>
class basic_device_message {
public:
  //! The backend whose memory holds the pairs (device_backend or host_backend).
  using backend_type = Backend;

  //! Length of the gradient the message was taken from, in elements.
  [[nodiscard]] std::uint64_t dense_length_elements() const noexcept { return dense_length_; }
  //! Pairs carried.
  [[nodiscard]] std::size_t nnz() const noexcept { return nnz_; }
  //! The type every value is exactly representable in (and encoded as on the wire).
  [[nodiscard]] value_type values_type() const noexcept { return values_type_; }
  //! Indices in Backend's memory (nnz() of them).
  [[nodiscard]] const std::uint32_t* indices() const noexcept { return indices_.data(); }
  //! Values in Backend's memory (nnz() of them).
  [[nodiscard]] const float* values() const noexcept { return values_.data(); }

  //! @brief Copies the pairs into host message `m` (sparse layout; its vectors keep their
  //! capacity), ordered on `stream` and waited for. O(nnz); 8 x nnz bytes device to host.
  //! @throws what the backend's copy throws (cuda_error).
  void copy_to(sparse_message& m, typename Backend::stream_type stream = {}) const {
    m.clear(dense_length_);
    m.values_type = values_type_;
    m.indices.resize(nnz_);
    m.values.resize(nnz_);
    const Backend backend{stream};
    backend.copy_to_host(m.indices.data(), indices_.data(), nnz_ * sizeof(std::uint32_t));
    backend.copy_to_host(m.values.data(), values_.data(), nnz_ * sizeof(float));
  }

  //! @private Used by the compressors: empties the message for a gradient of `n` elements and
  //! makes room for `capacity` pairs.
  void prepare(std::uint64_t n, std::size_t capacity) {
    dense_length_ = n;
    nnz_ = 0;
    values_type_ = value_type::fp32;
    indices_.reserve(capacity);
    values_.reserve(capacity);
  }
  //! @private Writable storage for the compressors.
  [[nodiscard]] std::uint32_t* index_storage() noexcept { return indices_.data(); }
  //! @private Writable storage for the compressors.
  [[nodiscard]] float* value_storage() noexcept { return values_.data(); }
  //! @private Set by the compressors once the selection is complete.
  void set_result(std::size_t nnz, value_type t) noexcept {
    nnz_ = nnz;
    values_type_ = t;
  }

private:
  std::uint64_t dense_length_ = 0;
  std::size_t nnz_ = 0;
  value_type values_type_ = value_type::fp32;
  buffer<std::uint32_t, Backend> indices_;
  buffer<float, Backend> values_;
};

#if defined(__CUDACC__)
//! @brief A message in CUDA device memory.
using device_message = basic_device_message<device_backend>;
#endif

} // namespace gradcomp::cuda
