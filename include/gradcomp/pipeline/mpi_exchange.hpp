// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Pipeline transports over MPI: dense_exchange (densify, ring allreduce, divide by P)
//! and sparse_exchange (sparse allgather, sum, divide by P). Needs gradcomp::mpi.
#pragma once

#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/sparse_allgather.hpp>
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <span>

namespace gradcomp::mpi {

namespace pipeline_detail {

//! Divides every element by the rank count: the mean of the per-rank sums. O(n).
inline void divide(std::span<float> values, int ranks) {
  const auto p = static_cast<float>(ranks);
  for (float& v : values) {
    v /= p;
  }
}

} // namespace pipeline_detail

//! @brief Averages compressed messages with a dense ring allreduce: start() decompresses the
//! message into the output (O(n + nnz)), the ring sums it across ranks in place, and completion
//! divides by P (O(n)). Bit-identical results on every rank (ring_allreduce's guarantee, then
//! the same division). Bytes per rank: the ring's exact traffic, about 2 (P-1)/P x 4n each way
//! (the length check's 16 bytes excluded).
//!
//! Collective: every rank must call start() with a message of the same dense length, in the
//! same order relative to other collectives on the communicator. One operation at a time.
//! @throws mpi_error as ring_allreduce does; std::invalid_argument from start() if the output
//! length differs from the message's dense length.
class dense_exchange {
public:
  explicit dense_exchange(const communicator& comm, ring_allreduce_options o = {})
      : comm_(&comm), ring_(comm, o) {}

  void start(const sparse_message& m, std::span<float> average) {
    decompress(m, average);
    average_ = average;
    done_ = false;
    ring_.start(average);
  }

  bool test() {
    if (!done_ && ring_.test()) {
      complete();
    }
    return done_;
  }

  void wait() {
    if (!done_) {
      ring_.wait();
      complete();
    }
  }

  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  // Elements of ring block b (wrapped), as ring_allreduce splits n elements over P ranks.
  [[nodiscard]] std::size_t block(int b) const noexcept {
    const int p = comm_->size();
    const auto w = static_cast<std::size_t>(((b % p) + p) % p);
    const std::size_t n = average_.size();
    const auto pp = static_cast<std::size_t>(p);
    return n * (w + 1) / pp - n * w / pp;
  }

  void complete() {
    done_ = true;
    pipeline_detail::divide(average_, comm_->size());
    const int r = comm_->rank();
    const std::size_t n = average_.size();
    if (comm_->size() == 1) {
      bytes_sent_ = bytes_received_ = 0;
      return;
    }
    // reduce-scatter sends every block but r+1 and receives every block but r; the allgather
    // sends every block but r+2 and receives every block but r+1
    bytes_sent_ = sizeof(float) * (2 * n - block(r + 1) - block(r + 2));
    bytes_received_ = sizeof(float) * (2 * n - block(r) - block(r + 1));
  }

  const communicator* comm_;
  ring_allreduce ring_;
  std::span<float> average_;
  bool done_ = true;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

//! @brief Averages compressed messages with sparse_allgather: every rank's message is gathered
//! and summed in rank order, then divided by P (O(n)). Bit-identical results on every rank.
//! Bytes as sparse_allgather reports them (headers excluded).
//!
//! Collective: as sparse_allgather (same dense length on every rank, same order).
//! @throws as sparse_allgather does.
class sparse_exchange {
public:
  explicit sparse_exchange(const communicator& comm, sparse_allgather_options o = {})
      : comm_(&comm), gather_(comm, o) {}

  void start(const sparse_message& m, std::span<float> average) {
    average_ = average;
    done_ = false;
    gather_.start(m, average);
  }

  bool test() {
    if (!done_ && gather_.test()) {
      done_ = true;
      pipeline_detail::divide(average_, comm_->size());
    }
    return done_;
  }

  void wait() {
    if (!done_) {
      gather_.wait();
      done_ = true;
      pipeline_detail::divide(average_, comm_->size());
    }
  }

  [[nodiscard]] std::size_t bytes_sent() const noexcept { return gather_.bytes_sent(); }
  [[nodiscard]] std::size_t bytes_received() const noexcept { return gather_.bytes_received(); }
  //! Whether the last exchange switched to the dense ring allreduce.
  [[nodiscard]] bool used_dense() const noexcept { return gather_.used_dense(); }

private:
  const communicator* comm_;
  sparse_allgather gather_;
  std::span<float> average_;
  bool done_ = true;
};

static_assert(gradcomp::pipeline_policy::byte_counting_transport<dense_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<sparse_exchange>);

} // namespace gradcomp::mpi
