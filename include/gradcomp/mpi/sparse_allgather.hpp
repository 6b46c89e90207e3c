// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::sparse_allgather: every rank's sparse message to every rank, summed
//! into a dense result, with SparCML's switch to a dense allreduce when that is cheaper.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/allgather_plan.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <climits>
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::mpi {

//! @brief Options of sparse_allgather.
struct sparse_allgather_options {
  //! Index encoding on the wire (delta + varint: ~1.3 bytes per index at density 0.01).
  index_encoding indices = index_encoding::delta_varint;
  //! Switch to a dense ring allreduce when the bytes the most-receiving rank (the one with the
  //! smallest message) would receive exceed the ring's per-rank traffic 2 (P-1)/P x 4n
  //! (SparCML's rule, here on measured message sizes; the same decision on every rank).
  bool dense_switch = true;
  //! Options of the dense ring allreduce used after the switch (its tag range included).
  ring_allreduce_options dense{};
  wait_policy wait{};
};

//! @brief Sparse allgather (the reference top-k exchange, "TopkA"): each rank encodes its
//! message in the wire format, the byte counts and dense lengths are allgathered, then the
//! encoded messages (MPI_Iallgatherv); every rank decodes every message (validating it) and sums
//! them in rank order into its dense result, so results are bit-identical on every rank.
//!
//! Collective: every rank must call start() (or operator()) with a message of the same dense
//! length and an output of that length, in the same order relative to other collectives on the
//! communicator. Any rank count, empty messages, empty tensors. Bytes sent per rank: 24 (counts)
//! + its encoded message; received: the other ranks' encoded messages (up to 8 k (P-1) for
//! u32/fp32 pairs). If the dense switch fires (decided identically on every rank from the
//! gathered sizes), the exchange is a ring allreduce of the densified messages instead.
//! @throws mpi_error on an MPI failure, on different dense lengths (on every rank), or when the
//! gathered bytes exceed MPI's int counts and the dense switch is off; gradcomp::wire_error if
//! a rank's message is malformed (on every rank, since every rank decodes every message).
class sparse_allgather : public detail::nonblocking_operation<sparse_allgather> {
  friend class detail::nonblocking_operation<sparse_allgather>;

public:
  using options = sparse_allgather_options;

  explicit sparse_allgather(const communicator& comm, options o = {})
      : comm_(&comm), options_(o), dense_(comm, o.dense) {}
  sparse_allgather(const sparse_allgather&) = delete;
  sparse_allgather& operator=(const sparse_allgather&) = delete;
  ~sparse_allgather() { reset(); }

  //! Starts the exchange; `sum` (n floats) receives the sum of every rank's message.
  //! `mine` may be reused as soon as start() returns (it is encoded here).
  void start(const sparse_message& mine, std::span<float> sum) {
    gradcomp::detail::require(phase_ == phase::idle || phase_ == phase::done,
                              "sparse_allgather: start() while an operation is in progress");
    gradcomp::detail::require(
        sum.size() == mine.dense_length_elements, "sparse_allgather: output has ", sum.size(),
        " elements, the message's dense length is ", mine.dense_length_elements);
    sum_ = sum;
    encode(mine, options_.indices, encoded_);
    const auto p = static_cast<std::size_t>(comm_->size());
    headers_.assign(3 * p, 0);
    const std::int64_t mine_header[3] = {static_cast<std::int64_t>(encoded_.size()),
                                         static_cast<std::int64_t>(mine.dense_length_elements),
                                         static_cast<std::int64_t>(mine.nnz())};
    detail::check(MPI_Iallgather(mine_header, 3, MPI_INT64_T, headers_.data(), 3, MPI_INT64_T,
                                 comm_->native(), &request_),
                  "MPI_Iallgather");
    used_dense_ = false;
    phase_ = phase::headers;
  }

  //! @private The nonblocking_operation hooks.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }
  //! @private
  bool progress() {
    for (;;) {
      switch (phase_) {
      case phase::idle:
      case phase::done:
        return true;
      case phase::headers:
        if (!detail::complete(request_)) {
          return false;
        }
        after_headers();
        continue;
      case phase::messages:
        if (!detail::complete(request_)) {
          return false;
        }
        sum_messages();
        phase_ = phase::done;
        return true;
      case phase::dense:
        if (!dense_.test()) {
          return false;
        }
        phase_ = phase::done;
        return true;
      }
    }
  }

  //! Whether the last operation switched to the dense ring allreduce.
  [[nodiscard]] bool used_dense() const noexcept { return used_dense_; }
  //! Bytes this rank received in the last operation (messages or ring traffic; headers excluded).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! Bytes this rank sent in the last operation (headers excluded).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }

private:
  enum class phase { idle, headers, messages, dense, done };

  // An operation dropped mid-way (an exception, or destruction): release what is pending and
  // make the object ready for a new start().
  void reset() noexcept {
    phase_ = phase::idle;
    if (request_ != MPI_REQUEST_NULL) {
      MPI_Request_free(&request_);
    }
  }

  void after_headers() {
    const int p = comm_->size();
    const int me = comm_->rank();
    detail::allgather_plan plan = detail::plan_allgather(headers_, options_.dense_switch);
    if (plan.length_mismatch_rank >= 0) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: sparse_allgather: ranks pass different dense lengths (rank 0: ",
          headers_[1], ", rank ", plan.length_mismatch_rank, ": ",
          headers_[detail::allgather_header_fields *
                       static_cast<std::size_t>(plan.length_mismatch_rank) +
                   1],
          ")"));
    }
    if (plan.use_dense) {
      used_dense_ = true;
      decompress(decode(encoded_), sum_);
      bytes_sent_ = bytes_received_ = static_cast<std::size_t>(plan.ring_bytes);
      dense_.start(sum_);
      phase_ = phase::dense;
      return;
    }
    if (plan.exceeds_int_count) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: sparse_allgather: ", plan.total_bytes,
          " gathered bytes exceed MPI's int count limit and the dense switch is off"));
    }
    counts_ = std::move(plan.counts);
    displacements_ = std::move(plan.displacements);
    gathered_.resize(static_cast<std::size_t>(plan.total_bytes));
    bytes_sent_ = encoded_.size() * static_cast<std::size_t>(p - 1);
    bytes_received_ =
        static_cast<std::size_t>(plan.total_bytes) - static_cast<std::size_t>(counts_[me]);
    detail::check(MPI_Iallgatherv(encoded_.data(), static_cast<int>(encoded_.size()), MPI_BYTE,
                                  gathered_.data(), counts_.data(), displacements_.data(), MPI_BYTE,
                                  comm_->native(), &request_),
                  "MPI_Iallgatherv");
    phase_ = phase::messages;
  }

  void sum_messages() {
    std::fill(sum_.begin(), sum_.end(), 0.0f);
    const auto bytes = std::span<const std::byte>(gathered_);
    for (std::size_t j = 0; j < counts_.size(); ++j) {
      decode(bytes.subspan(static_cast<std::size_t>(displacements_[j]),
                           static_cast<std::size_t>(counts_[j])),
             received_);
      detail::check_length(received_, sum_.size(), static_cast<int>(j));
      const std::int64_t stated_nnz = headers_[detail::allgather_header_fields * j + 2];
      if (static_cast<std::int64_t>(received_.nnz()) != stated_nnz) {
        throw wire_error(gradcomp::detail::concat("gradcomp wire: sparse_allgather: rank ", j,
                                                  "'s message carries ", received_.nnz(),
                                                  " values, its header stated ", stated_nnz));
      }
      accumulate(received_, sum_);
    }
  }

  const communicator* comm_;
  options options_;
  ring_allreduce dense_;
  phase phase_ = phase::idle;
  std::span<float> sum_;
  std::vector<std::byte> encoded_, gathered_;
  std::vector<std::int64_t> headers_;
  std::vector<int> counts_, displacements_;
  sparse_message received_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool used_dense_ = false;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

} // namespace gradcomp::mpi
