// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Pipeline transports over MPI: dense exchanges (densify, allreduce in place: ring,
//! MPI's own, hierarchical; divide by P), sparse_exchange (sparse allgather, sum, divide by P)
//! and parameter_server_exchange (push/pull). Needs gradcomp::mpi.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/hierarchical_allreduce.hpp>
#include <gradcomp/mpi/native_allreduce.hpp>
#include <gradcomp/mpi/parameter_server.hpp>
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

//! @brief Averages compressed messages with a dense in-place allreduce: start() decompresses
//! the message into the output (O(n + nnz)), `Allreduce` sums it across ranks in place, and
//! completion divides by P (O(n)). Bit-identical results on every rank when the allreduce gives
//! them (ring_allreduce and hierarchical_allreduce do; native_allreduce does with MPICH), then
//! the same division.
//!
//! Bytes per rank reported (bytes_sent / bytes_received): the ring's exact traffic, about
//! 2 (P-1)/P x 4n each way (the length check's 16 bytes excluded). For the other allreduces
//! this is the bandwidth-optimal volume, a lower bound: MPI's and the hierarchical schedule's
//! own traffic is not observable from here.
//!
//! Collective: every rank must call start() with a message of the same dense length, in the
//! same order relative to other collectives on the communicator. One operation at a time.
//! @tparam Allreduce ring_allreduce, native_allreduce or hierarchical_allreduce (an in-place
//!                   nonblocking float sum constructed from (communicator, options)).
//! @throws mpi_error as the allreduce does; std::invalid_argument from start() if the output
//! length differs from the message's dense length.
template <class Allreduce>
class basic_dense_exchange {
public:
  explicit basic_dense_exchange(const communicator& comm, typename Allreduce::options o = {})
      : comm_(&comm), allreduce_(comm, o) {}

  void start(const sparse_message& m, std::span<float> average) {
    decompress(m, average);
    average_ = average;
    done_ = false;
    allreduce_.start(average);
  }

  bool test() {
    if (!done_ && allreduce_.test()) {
      complete();
    }
    return done_;
  }

  void wait() {
    if (!done_) {
      allreduce_.wait();
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
  Allreduce allreduce_;
  std::span<float> average_;
  bool done_ = true;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

//! gradcomp's ring allreduce of the densified group (S4's ring).
using dense_exchange = basic_dense_exchange<ring_allreduce>;
//! MPI_Iallreduce of the densified group: the dense baseline of MPI itself (with
//! schedule::strategy::size_threshold's 25 MiB buckets, what PyTorch DDP does).
using native_dense_exchange = basic_dense_exchange<native_allreduce>;
//! S4's hierarchical allreduce of the densified group.
using hierarchical_exchange = basic_dense_exchange<hierarchical_allreduce>;

//! @brief Averages compressed messages through gradcomp::mpi::parameter_server (S1's
//! push/pull): every worker pushes its message, the servers sum and average, every worker pulls
//! the average into `average`. The server's average is already divided by the worker count.
//! Bytes as parameter_server counts them. Only co-located servers make sense in a pipeline
//! (every rank is a worker with gradients to average); dedicated servers are rejected.
//!
//! Collective: every rank must call start() with a message of the same dense length, in the
//! same order relative to other collectives on the communicator. One operation at a time.
//! @throws std::invalid_argument at construction if the placement is not co-located; as
//! parameter_server does otherwise.
class parameter_server_exchange {
public:
  explicit parameter_server_exchange(const communicator& comm, parameter_server_options o = {})
      : server_((require_colocated(o), comm), o) {}

  void start(const sparse_message& m, std::span<float> average) { server_.start(m, average); }
  bool test() { return server_.test(); }
  void wait() { server_.wait(); }
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return server_.bytes_sent(); }
  [[nodiscard]] std::size_t bytes_received() const noexcept { return server_.bytes_received(); }

private:
  static void require_colocated(const parameter_server_options& o) {
    gradcomp::detail::require(o.placement == server_placement::colocated,
                              "parameter_server_exchange: servers must be co-located with the "
                              "workers in a pipeline (every rank averages gradients)");
  }

  parameter_server server_;
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
static_assert(gradcomp::pipeline_policy::byte_counting_transport<native_dense_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<hierarchical_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<parameter_server_exchange>);
static_assert(gradcomp::pipeline_policy::byte_counting_transport<sparse_exchange>);

} // namespace gradcomp::mpi
