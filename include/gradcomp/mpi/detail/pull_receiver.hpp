// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::detail::pull_receiver: how a rank of a gradcomp::mpi::parameter_server
//! receives the servers' statuses and averaged shards in a round (step 4 of its class comment,
//! the receiving side): every status first, in server order; each server's pull once its status
//! has come, a dense shard straight into the output and a sparse one into a buffer, decoded
//! (validated) once the round has completed on this rank.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/detail/transfer_queue.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief The statuses and pulls one rank of a parameter_server receives in a round: the
//! status receives (posted into the round's status queue), the pull receives posted as the
//! statuses arrive (into its pull queue), the received sparse pulls and their decoding, and the
//! first fault found in a pull (a stated size outside its bounds, a pull that does not decode),
//! reported once the round has completed. The servers' ranks and shards come from the
//! parameter_server (`Server`: servers(), server_rank(s), shard_begin(n, s)). Memory: the
//! statuses (16 bytes per server) and the encoded sparse pulls received, kept between rounds.
class pull_receiver {
public:
  //! @{
  //! Fields of a server's status to every rank (int64 each): the first worker rank whose push it
  //! rejected (-1: none), and the size of the sparse pull that follows, bytes (-1: dense).
  static constexpr std::size_t status_rejected = 0, status_pull_bytes = 1, status_fields = 2;
  //! @}

  //! Sizes the receiver for `servers` servers (at construction; statuses -1 until received).
  void resize(int servers) {
    statuses_.assign(static_cast<std::size_t>(servers) * status_fields, -1);
    status_items_.resize(static_cast<std::size_t>(servers));
    pulled_.resize(static_cast<std::size_t>(servers));
  }

  //! Starts a round on rank `me`: adds the receive of every other server's status (tag
  //! `tag` + 1) to `statuses`, in server order, and forgets the last round's pulls and fault.
  template <class Server>
  void post_statuses(const Server& ps, int me, int tag, transfer_queue& statuses) {
    for (int s = 0; s < ps.servers(); ++s) {
      pulled_[static_cast<std::size_t>(s)].clear();
      if (ps.server_rank(s) != me) {
        statuses.add(false, &statuses_[static_cast<std::size_t>(s) * status_fields], status_fields,
                     sizeof(std::int64_t), MPI_INT64_T, status_fields, ps.server_rank(s), tag + 1);
      }
      status_items_[static_cast<std::size_t>(s)] = statuses.size();
    }
    next_pull_ = 0;
    pull_problem_.clear();
  }

  //! Posts the pull receives (tag `tag` + 2) whose status has come, in server order: a dense
  //! shard straight into its place in `average`, a sparse one into a buffer that finish()
  //! decodes; adds the bytes to be received to `bytes_received`. Messages of at most
  //! `byte_chunk` bytes (sparse) or `float_chunk` floats (dense).
  template <class Server>
  void post_ready(const Server& ps,
                  int me,
                  int tag_base,
                  std::span<float> average,
                  std::size_t byte_chunk,
                  std::size_t float_chunk,
                  const transfer_queue& statuses,
                  transfer_queue& pulls,
                  std::size_t& bytes_received) {
    const std::size_t n = average.size();
    while (next_pull_ < ps.servers()) {
      const auto s = static_cast<std::size_t>(next_pull_);
      if (ps.server_rank(next_pull_) == me) {
        ++next_pull_;
        continue;
      }
      if (statuses.completed() < status_items_[s]) {
        return;
      }
      const std::size_t lo = ps.shard_begin(n, next_pull_);
      const std::size_t length = ps.shard_begin(n, next_pull_ + 1) - lo;
      const std::int64_t stated = statuses_[s * status_fields + status_pull_bytes];
      const int tag = tag_base + 2;
      if (stated < 0) {
        pulls.add(false, average.data() + lo, length, sizeof(float), MPI_FLOAT, float_chunk,
                  ps.server_rank(next_pull_), tag);
        bytes_received += length * sizeof(float);
      } else {
        // A sparse pull is sent only when smaller than the dense shard. A size outside that
        // range is a fault: the receive is clamped (a longer message then fails as truncated,
        // an mpi_error) and finish() reports it.
        const std::size_t dense_bytes = length * sizeof(float);
        const auto bytes = std::min(static_cast<std::size_t>(stated), dense_bytes);
        if (static_cast<std::size_t>(stated) < wire_header_bytes ||
            static_cast<std::size_t>(stated) >= dense_bytes) {
          note_pull_problem(gradcomp::detail::concat(
              "server rank ", ps.server_rank(next_pull_), " states a sparse pull of ", stated,
              " bytes for a shard of ", length, " elements, outside [", wire_header_bytes, ", ",
              dense_bytes, ")"));
        }
        std::vector<std::byte>& buffer = pulled_[s];
        buffer.resize(std::max<std::size_t>(bytes, 1)); // non-empty: marks a sparse pull
        pulls.add(false, buffer.data(), bytes, 1, MPI_BYTE, byte_chunk, ps.server_rank(next_pull_),
                  tag);
        bytes_received += bytes;
      }
      ++next_pull_;
    }
  }

  //! Whether every server's pull receive is posted (or is this rank's own shard).
  [[nodiscard]] bool posted_all(int servers) const noexcept { return next_pull_ == servers; }

  //! Decodes every sparse pull into the output's shard (zeros outside the union). Called once
  //! the whole exchange has completed on this rank.
  template <class Server>
  void finish(const Server& ps, std::span<float> average) {
    const std::size_t n = average.size();
    for (int s = 0; s < ps.servers() && pull_problem_.empty(); ++s) {
      const std::vector<std::byte>& bytes = pulled_[static_cast<std::size_t>(s)];
      if (bytes.empty()) {
        continue;
      }
      const std::size_t lo = ps.shard_begin(n, s);
      const std::span<float> shard = average.subspan(lo, ps.shard_begin(n, s + 1) - lo);
      try {
        decode(bytes, received_);
        check_length(received_, shard.size(), ps.server_rank(s));
        decompress(received_, shard);
      } catch (const wire_error& e) {
        note_pull_problem(gradcomp::detail::concat("the pull of server rank ", ps.server_rank(s),
                                                   " does not decode: ", e.what()));
      }
    }
  }

  //! Field `field` of server s's status as received (-1 before it came; not this rank's own).
  [[nodiscard]] std::int64_t status(int s, std::size_t field) const noexcept {
    return statuses_[static_cast<std::size_t>(s) * status_fields + field];
  }
  //! The first fault found in this round's pulls (empty: none).
  [[nodiscard]] const std::string& problem() const noexcept { return pull_problem_; }

private:
  void note_pull_problem(std::string what) {
    if (pull_problem_.empty()) {
      pull_problem_ = std::move(what);
    }
  }

  sparse_message received_;
  std::vector<std::vector<std::byte>> pulled_; // per server: its sparse pull (empty: dense)
  std::vector<std::size_t> status_items_;      // per server: status receives added through it
  std::vector<std::int64_t> statuses_;
  std::string pull_problem_;
  int next_pull_ = 0;
};

} // namespace gradcomp::mpi::detail
