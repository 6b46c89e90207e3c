// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::server_shard: what a parameter_server server computes on its
//! shard in a round: the sum of the workers' parts, the union of their indices, the average
//! and the sparse pull. MPI-free.
#pragma once

#include <gradcomp/mpi/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief A parameter_server server's shard in one round (steps 3 and 4 of its class comment):
//! the workers' encoded parts decoded (validated) and summed into the shard in worker-rank
//! order, starting from zero; the union of their indices (unless the pull is dense); then the
//! average and, when the union in the wire format is smaller than the dense shard, that
//! encoding as the pull. Memory: the shard's union mark (1 byte per element) and the encoded
//! pull, kept between rounds.
class server_shard {
public:
  //! Starts a round on `shard` (zeroed here), marking the union unless `dense_pull`. O(shard).
  void begin(std::span<float> shard, bool dense_pull) {
    shard_ = shard;
    std::fill(shard.begin(), shard.end(), 0.0f);
    union_dense_ = dense_pull;
    if (!union_dense_) {
      in_union_.assign(shard.size(), 0);
    }
    rejected_ = -1;
    rejection_.clear();
  }

  //! Adds the encoded part of worker rank `source`, unless a part was rejected: decodes it,
  //! checks its length, sums it into the shard (gradcomp::accumulate) and marks its indices; a
  //! dense part makes the pull dense. A part that does not decode is rejected (rejected(),
  //! rejection()), not thrown: the round completes first. O(part).
  void add(std::span<const std::byte> part, int source) {
    if (rejected_ >= 0) {
      return;
    }
    try {
      decode(part, received_);
      check_length(received_, shard_.size(), source);
      accumulate(received_, shard_);
      union_dense_ = union_dense_ || received_.dense;
      if (!union_dense_) {
        for (const std::uint32_t i : received_.indices) {
          in_union_[i] = 1;
        }
      }
    } catch (const wire_error& e) {
      rejected_ = source;
      rejection_ = e.what();
    }
  }

  //! The first worker rank whose part was rejected, or -1.
  [[nodiscard]] std::int64_t rejected() const noexcept { return rejected_; }
  //! Why (the wire_error's message), when rejected() >= 0.
  [[nodiscard]] const std::string& rejection() const noexcept { return rejection_; }

  //! Once every part was added and none rejected: divides the shard by `workers` and encodes
  //! the union (indices and averaged values, `indices` encoding) into pull() when that is
  //! smaller than the dense shard. Returns the sparse pull's size, bytes, or -1 for a dense
  //! pull. O(shard).
  [[nodiscard]] std::int64_t average(int workers, index_encoding indices) {
    const auto w = static_cast<float>(workers);
    for (float& v : shard_) {
      v /= w;
    }
    if (union_dense_) {
      return -1;
    }
    pull_message_.clear(shard_.size());
    for (std::size_t i = 0; i < shard_.size(); ++i) {
      if (in_union_[i] != 0) {
        pull_message_.indices.push_back(static_cast<std::uint32_t>(i));
        pull_message_.values.push_back(shard_[i]);
      }
    }
    if (encoded_size_bytes(pull_message_, indices) >= shard_.size() * sizeof(float)) {
      return -1;
    }
    encode(pull_message_, indices, pull_bytes_);
    return static_cast<std::int64_t>(pull_bytes_.size());
  }

  //! The encoded sparse pull (after average() returned its size).
  [[nodiscard]] const std::vector<std::byte>& pull() const noexcept { return pull_bytes_; }

private:
  std::span<float> shard_;
  std::vector<std::uint8_t> in_union_; // 1 where a part has a value
  bool union_dense_ = true;            // a dense pull: option dense, or a dense part
  std::int64_t rejected_ = -1;
  std::string rejection_;
  sparse_message received_, pull_message_;
  std::vector<std::byte> pull_bytes_;
};

} // namespace gradcomp::mpi::detail
