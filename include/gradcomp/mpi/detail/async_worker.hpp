// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The worker side of gradcomp::mpi::async_parameter_server: its pushes in flight (each
//! split by shard, encoded and sent to every server) and its requests to the servers (pull,
//! finish, leave) with the answers received.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/async_parameter_server_options.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/async_server.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/detail/transfer_queue.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! @brief The worker half of async_parameter_server's protocol on one worker rank (the class
//! comment's "Protocol"): up to max_pushes_in_flight pushes in flight, each in a slot with one
//! encoded part per server and their sends, and one exchange of requests and answers at a time.
//! The servers' ranks and shards come from the async_parameter_server (`Server`: server_rank(s),
//! shard_begin(s)). Not collective.
class async_worker {
public:
  //! A worker of the object with options `o` on `comm` (o.max_pushes_in_flight slots).
  async_worker(const communicator& comm, const async_parameter_server_options& o)
      : comm_(&comm), options_(o) {
    for (int i = 0; i < o.max_pushes_in_flight; ++i) {
      slots_.emplace_back(o.servers);
    }
    headers_.resize(static_cast<std::size_t>(o.servers) * async_header_fields);
  }

  //! Sends push number `clock` (from 0): waits for the sends of the slot it reuses, splits
  //! `gradient` by shard (indices rebased), encodes each part and posts its send to its server;
  //! adds the bytes to `bytes_sent`. @throws std::invalid_argument (before sending) if a part
  //! encodes to more than INT_MAX bytes; mpi_error on an MPI failure.
  template <class Server>
  void push(const Server& ps,
            const sparse_message& gradient,
            std::uint64_t clock,
            std::size_t& bytes_sent) {
    push_slot& slot = slots_[clock % slots_.size()];
    wait_for(slot.sends);
    slot.sends.clear();
    for (int s = 0; s < options_.servers; ++s) {
      std::vector<std::byte>& bytes = slot.parts[static_cast<std::size_t>(s)];
      slice_message(gradient, ps.shard_begin(s), ps.shard_begin(s + 1), part_);
      encode(part_, options_.indices, bytes);
      gradcomp::detail::require(bytes.size() <= INT_MAX, "async_parameter_server: the part for ",
                                "server ", s, " encodes to ", bytes.size(),
                                " bytes, above INT_MAX (one MPI message)");
    }
    for (int s = 0; s < options_.servers; ++s) {
      const std::vector<std::byte>& bytes = slot.parts[static_cast<std::size_t>(s)];
      slot.sends.add(true, bytes.data(), bytes.size(), 1, MPI_BYTE, INT_MAX, ps.server_rank(s),
                     options_.tag_base + async_push_tag);
      bytes_sent += bytes.size();
    }
  }

  //! Posts and tests the pushes' sends without blocking.
  void progress_pushes() {
    for (push_slot& slot : slots_) {
      slot.sends.progress(comm_->native());
    }
  }

  //! One request `kind` with clock `clock` to every server, and (unless leaving) every server's
  //! answer: its header (header()) and its shard into `params` (n floats), waited for through
  //! the wait policy while the pushes progress; for finish and leave, every push's sends too.
  //! @throws mpi_error on an MPI failure (what is in flight is then completed).
  template <class Server>
  void
  exchange(const Server& ps, async_request kind, std::uint64_t clock, std::span<float> params) {
    const int tag = options_.tag_base;
    request_ = {static_cast<std::int64_t>(kind), static_cast<std::int64_t>(clock)};
    pulling_.clear();
    for (int s = 0; s < options_.servers; ++s) {
      pulling_.add(true, request_.data(), request_.size(), sizeof(std::int64_t), MPI_INT64_T,
                   request_.size(), ps.server_rank(s), tag + async_control_tag);
    }
    if (kind != async_request::leave) {
      for (int s = 0; s < options_.servers; ++s) {
        const std::size_t lo = ps.shard_begin(s);
        const std::size_t length = ps.shard_begin(s + 1) - lo;
        pulling_.add(false, &headers_[static_cast<std::size_t>(s) * async_header_fields],
                     async_header_fields, sizeof(std::int64_t), MPI_INT64_T, async_header_fields,
                     ps.server_rank(s), tag + async_header_tag);
        pulling_.add(false, params.data() + lo, length, sizeof(float), MPI_FLOAT, INT_MAX,
                     ps.server_rank(s), tag + async_shard_tag);
      }
    }
    try {
      for (unsigned round = 0; !pulling_.progress(comm_->native()); ++round) {
        progress_pushes();
        options_.wait.pause(round);
      }
      if (kind != async_request::pull) { // every push has gone out when this returns
        for (push_slot& slot : slots_) {
          wait_for(slot.sends);
        }
      }
    } catch (...) {
      pulling_.abandon();
      throw;
    }
    pulling_.clear();
  }

  //! Completes an exchange left in flight (detail::abandon). Never throws.
  void abandon() noexcept { pulling_.abandon(); }

  //! Server s's answer header of the last exchange: {version, async_status, culprit, gap}.
  [[nodiscard]] const std::int64_t* header(int s) const noexcept {
    return &headers_[static_cast<std::size_t>(s) * async_header_fields];
  }

private:
  static constexpr std::size_t transfer_window = 16;

  struct push_slot {
    explicit push_slot(int servers)
        : parts(static_cast<std::size_t>(servers)), sends(transfer_window) {}
    std::vector<std::vector<std::byte>> parts;
    transfer_queue sends;
  };

  void wait_for(transfer_queue& queue) {
    for (unsigned round = 0; !queue.progress(comm_->native()); ++round) {
      options_.wait.pause(round);
    }
  }

  const communicator* comm_;
  async_parameter_server_options options_;
  std::deque<push_slot> slots_; // deque: a transfer_queue does not move
  sparse_message part_;
  std::array<std::int64_t, async_control_fields> request_{};
  std::vector<std::int64_t> headers_;
  transfer_queue pulling_{transfer_window};
};

} // namespace gradcomp::mpi::detail
