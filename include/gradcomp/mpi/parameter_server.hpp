// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::parameter_server: synchronous push/pull through S server ranks (S1), with
//! the keys (element indices) sharded by contiguous range, sparse or dense pushes in the wire
//! format, and the averaged gradient pulled back by every rank (sparse when that is smaller).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/parameter_server_agreement.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/detail/pull_receiver.hpp>
#include <gradcomp/mpi/detail/server_shard.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/detail/transfer_queue.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/parameter_server_options.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! @brief Synchronous parameter-server round (S1, eq. 1's (1/W) sum_n C(g_n)): every worker
//! pushes a compressed gradient, S servers each aggregate the contiguous shard of elements they
//! own, and every rank pulls the averaged gradient: the dense shard, or (pull_format::adaptive,
//! the default) the union of the pushes with its averaged values when that is smaller, which is
//! what sparse pushes save on the way back too (S1's setting is this parameter server).
//!
//! A round, per rank:
//! 1. one MPI_Ialltoall of 64 bytes per rank pair: every rank's dense length, options and the
//!    byte size of its push part for each destination; every rank checks that all agree (so a
//!    mismatch makes every rank throw, before any payload moves); then one MPI_Iallreduce of 8
//!    bytes carries every server's verdict on the push sizes stated to it (each must lie within
//!    gradcomp::min_encoded_bytes(0) .. max_encoded_bytes(shard length)), so a bad size makes
//!    every rank throw too;
//! 2. each worker splits its push by shard (indices rebased to the shard), encodes each part in
//!    the wire format (gradcomp::encode) and sends it to its server (MPI_Isend);
//! 3. each server decodes (validating) its W parts and sums them into its shard in worker-rank
//!    order, starting from zero, then divides by W; a co-located server's own part stays local;
//! 4. each server sends a 16-byte status (its verdict on the pushes, and the pull's format and
//!    size) and then its averaged shard to every other rank: raw floats, received straight into
//!    the output, or the sparse union in the wire format, received once the status has come
//!    and decoded (validating) into the output's shard, zeros outside the union.
//! Every element is summed by exactly one server in a fixed order, so the averages are
//! bit-identical on every rank, whatever the pull format, and equal to summing the workers'
//! messages in worker-rank order with gradcomp::accumulate() into zeros and dividing by float(W)
//! (deterministic, run to run).
//!
//! Roles: see server_placement. Dedicated servers pass a push that is ignored (any message,
//! e.g. a default-constructed one) and an output of the same n floats as everyone: they receive
//! the full average too (the other servers' shards), so every rank ends with the same vector.
//!
//! @wirebytes Payloads only (the alltoall's 64 bytes per peer and the 16-byte statuses are
//! excluded), with n_s = the shard's length and u_s = the size of its pushes' index union:
//! a worker sends, to each server other than itself, its part (32 bytes + 4 n_s dense, or 32 +
//! index bytes + 4 nnz_s sparse at fp32) and receives the pull from each such server; a server
//! receives the parts of the W workers other than itself and sends its pull to each of the
//! P - 1 other ranks. A pull is min(4 n_s, 32 + index bytes of u_s + 4 u_s) bytes (adaptive;
//! u_s <= min(n_s, sum of the parts' nnz_s)), or 4 n_s (dense).
//!
//! Messages: two latency rounds plus the alltoall and the 8-byte verdict allreduce; a server
//! handles W pushes and P - 1 pulls (cost::parameter_server_seconds models its link). Work:
//! O(nnz + S log nnz) per worker push, O(sum of the parts' nnz + n_s) per server, O(n_s + u_s)
//! per pulled shard. Memory: the encoded parts of the push; on a server, the W received parts,
//! an n_s-byte union mark and its encoded pull; on every rank, the encoded sparse pulls
//! received. At most 6 x 16 point-to-point requests are in flight per rank (each kind of
//! transfer is posted through a window of 16).
//!
//! Collective: every rank of the communicator must call start() (or operator()) with an output
//! of the same length n (and, on workers, a push of dense length n), with the same options, in
//! the same order relative to other collectives on the communicator. Any rank count (1
//! included), any n (0 included; servers beyond n own empty shards), empty pushes. Nonblocking
//! use: start(), then test() until true, or wait(); `average` must not be touched until then;
//! the push may be reused as soon as start() returns (it is split and encoded there). One
//! operation at a time per object.
//! @throws mpi_error on an MPI failure, or, on every rank, when ranks pass different output
//! lengths or options, or a worker's push is invalid (fails sparse_message::validate(), or its
//! dense length differs from its output's); gradcomp::wire_error on every rank when a server
//! rejects a stated push size or a received part (it does not decode, e.g. a push carries NaN),
//! and on a rank whose received sparse pull does not decode or states an impossible size (a
//! fault on the wire: the other ranks complete the round; the rank throws only after its own
//! part of the round has completed, so nobody is left waiting on it).
class parameter_server : public detail::phased_operation<parameter_server> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "parameter_server";
  //! The options struct (parameter_server_options).
  using options = parameter_server_options;

  //! Not collective (no communicator is created).
  //! @throws std::invalid_argument if servers < 1, servers > P (co-located) or servers >= P
  //! (dedicated: no worker left), max_message_bytes < 4, tag_base outside [0, INT_MAX - 2], or
  //! indices is none.
  explicit parameter_server(const communicator& comm, options o = {})
      : comm_(&comm), options_(o), push_sends_(window), push_receives_(window),
        status_sends_(window), pull_sends_(window), status_receives_(window),
        pull_receives_(window) {
    const int p = comm.size();
    gradcomp::detail::require(o.servers >= 1, "parameter_server: servers ", o.servers,
                              " is below 1");
    if (o.placement == server_placement::colocated) {
      gradcomp::detail::require(o.servers <= p, "parameter_server: ", o.servers,
                                " co-located servers exceed the ", p, " ranks");
    } else {
      gradcomp::detail::require(o.servers < p, "parameter_server: ", o.servers,
                                " dedicated servers leave no worker among the ", p,
                                " ranks (servers must be fewer than ranks)");
    }
    gradcomp::detail::require(o.max_message_bytes >= sizeof(float),
                              "parameter_server: max_message_bytes ", o.max_message_bytes,
                              " is below the minimum 4");
    gradcomp::detail::require(o.tag_base >= 0 && o.tag_base <= INT_MAX - 2,
                              "parameter_server: tag_base ", o.tag_base,
                              " is outside [0, INT_MAX - 2]");
    gradcomp::detail::require(o.indices != index_encoding::none,
                              "parameter_server: index encoding none cannot carry sparse pushes");
    workers_ = o.placement == server_placement::colocated ? p : p - o.servers;
    const int r = comm.rank();
    my_server_ = o.placement == server_placement::colocated ? (r < o.servers ? r : -1)
                                                            : (r >= workers_ ? r - workers_ : -1);
    parts_.resize(static_cast<std::size_t>(o.servers));
    received_parts_.resize(static_cast<std::size_t>(workers_));
    last_transfer_.resize(static_cast<std::size_t>(workers_));
    pulls_.resize(o.servers);
  }
  parameter_server(const parameter_server&) = delete;
  parameter_server& operator=(const parameter_server&) = delete;
  ~parameter_server() { reset(); }

  //! Starts a round: `push` (dense length n; ignored on a dedicated server) goes to the
  //! servers, and `average` (n floats, host memory) receives the average over the W workers.
  //! Argument problems are not thrown here but reported to every rank (see the class).
  void start(const sparse_message& push, std::span<float> average) {
    const auto starting = begin_operation();
    average_ = average;
    problem_.clear();
    std::int64_t status = 0;
    if (is_worker()) {
      try {
        push.validate();
        if (push.dense_length_elements != average.size()) {
          status = 2;
          problem_ =
              gradcomp::detail::concat("its push has dense length ", push.dense_length_elements,
                                       ", its output ", average.size(), " elements");
        } else {
          split_and_encode(push);
        }
      } catch (const std::invalid_argument& e) {
        status = 1;
        problem_ = e.what();
      }
    }
    const auto part_bytes = [&](int j) -> std::int64_t {
      const int s = server_index(j);
      return status == 0 && is_worker() && s >= 0 && j != comm_->rank()
                 ? static_cast<std::int64_t>(parts_[static_cast<std::size_t>(s)].size())
                 : 0;
    };
    bytes_sent_ = bytes_received_ = 0;
    // The alltoall and, after it, the verdict's allreduce are collectives, which MPI does not
    // allow to be freed or cancelled: dropped mid-way (an exception on this rank, or
    // destruction), each is waited for (detail::abandon), and completes once every rank has
    // posted it, as each does while it runs the round (the verdict right after the alltoall).
    // The errors thrown on every rank are thrown after a collective or the whole exchange has
    // completed, with nothing pending.
    agreement_.start(*comm_, average.size(), status, options_, part_bytes, *collective());
    then(&parameter_server::agree_on_sizes);
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

  //! Number of servers S.
  [[nodiscard]] int servers() const noexcept { return options_.servers; }
  //! Number of workers W (the divisor of the average).
  [[nodiscard]] int workers() const noexcept { return workers_; }
  //! Rank (in the communicator) of server s, 0 <= s < S.
  [[nodiscard]] int server_rank(int s) const noexcept {
    return options_.placement == server_placement::colocated ? s : workers_ + s;
  }
  //! Rank of worker w, 0 <= w < W (workers are ranks 0 .. W-1 in both placements).
  [[nodiscard]] static int worker_rank(int w) noexcept { return w; }
  //! Whether this rank serves a shard.
  [[nodiscard]] bool is_server() const noexcept { return my_server_ >= 0; }
  //! Whether this rank pushes (its push counts in the average).
  [[nodiscard]] bool is_worker() const noexcept { return comm_->rank() < workers_; }
  //! First element of server s's shard of an n-element gradient (s = S gives n).
  [[nodiscard]] std::size_t shard_begin(std::size_t n, int s) const noexcept {
    return detail::block_begin(n, s, options_.servers);
  }
  //! Whether server s (0 <= s < S) sent its shard of the last round as the sparse union (false
  //! for a dense pull and before any round; on server s itself, what it sent to the others).
  [[nodiscard]] bool pull_was_sparse(int s) const noexcept {
    return s == my_server_ ? status_out_[status_pull_bytes] >= 0
                           : pulls_.status(s, status_pull_bytes) >= 0;
  }
  //! Payload bytes this rank sent in the last round (push parts and pulled shards).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Payload bytes this rank received in the last round.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  // Fields of a server's status to every rank (int64 each; see detail::pull_receiver).
  static constexpr std::size_t status_rejected = detail::pull_receiver::status_rejected,
                               status_pull_bytes = detail::pull_receiver::status_pull_bytes,
                               status_fields = detail::pull_receiver::status_fields;
  static constexpr std::size_t window = 16;

  // Server index of rank r, or -1.
  [[nodiscard]] int server_index(int r) const noexcept {
    const int s = options_.placement == server_placement::colocated ? r : r - workers_;
    return s >= 0 && s < options_.servers ? s : -1;
  }

  [[nodiscard]] std::size_t byte_chunk() const noexcept {
    return std::min<std::size_t>(options_.max_message_bytes, INT_MAX);
  }
  [[nodiscard]] std::size_t float_chunk() const noexcept {
    return std::min<std::size_t>(options_.max_message_bytes / sizeof(float), INT_MAX);
  }

  void split_and_encode(const sparse_message& push) {
    const std::size_t n = push.dense_length_elements;
    for (int s = 0; s < options_.servers; ++s) {
      detail::slice_message(push, shard_begin(n, s), shard_begin(n, s + 1), part_);
      encode(part_, options_.indices, parts_[static_cast<std::size_t>(s)]);
    }
  }

  // Every rank's header is in: the same checks everywhere; then the servers' verdict on the
  // push sizes stated to them.
  void agree_on_sizes() {
    agreement_.check_headers(comm_->rank(), problem_);
    const std::size_t n = average_.size();
    const std::size_t shard =
        is_server() ? shard_begin(n, my_server_ + 1) - shard_begin(n, my_server_) : 0;
    agreement_.start_verdict(*comm_, is_server(), shard, workers_, *collective());
    then(&parameter_server::exchange);
  }

  // Every rank knows every server's verdict: throws on every rank if one rejected a size, else
  // the push and pull exchange.
  void exchange() {
    agreement_.check_verdict(*comm_);
    post_exchange();
  }

  // The exchange's point-to-point transfers, in queues (one pass over them: progress_exchange;
  // then finish_exchange()). Dropped mid-way, the sends are waited for, until their receivers
  // take them, then the receives cancelled and completed (transfer_queue::abandon); what this
  // completes is left by a failure on this rank alone or by destruction mid-way.
  void post_exchange() {
    const int me = comm_->rank();
    const int tag = options_.tag_base;
    const std::size_t n = average_.size();
    poll(&parameter_server::progress_exchange, &parameter_server::finish_exchange)
        .sends(push_sends_, status_sends_, pull_sends_)
        .receives(push_receives_, status_receives_, pull_receives_);
    push_sends_.clear();
    push_receives_.clear();
    status_sends_.clear();
    pull_sends_.clear();
    status_receives_.clear();
    pull_receives_.clear();
    pulls_posted_ = false;
    if (is_worker()) {
      for (int s = 0; s < options_.servers; ++s) {
        const std::vector<std::byte>& part = parts_[static_cast<std::size_t>(s)];
        if (server_rank(s) != me) {
          push_sends_.add(true, part.data(), part.size(), 1, MPI_BYTE, byte_chunk(), server_rank(s),
                          tag);
          bytes_sent_ += part.size();
        }
      }
    }
    next_worker_ = 0;
    status_out_ = {-1, -1};
    if (is_server()) {
      const std::size_t lo = shard_begin(n, my_server_);
      shard_.begin(average_.subspan(lo, shard_begin(n, my_server_ + 1) - lo),
                   options_.pull == pull_format::dense);
      for (int w = 0; w < workers_; ++w) {
        const int source = worker_rank(w);
        std::vector<std::byte>& part = received_parts_[static_cast<std::size_t>(w)];
        if (source != me) {
          // validated by the servers' verdict (agreement_) on every rank before this point
          const auto bytes = static_cast<std::size_t>(agreement_.stated_part_bytes(source));
          part.resize(bytes);
          push_receives_.add(false, part.data(), bytes, 1, MPI_BYTE, byte_chunk(), source, tag);
          bytes_received_ += bytes;
        }
        last_transfer_[static_cast<std::size_t>(w)] = push_receives_.size();
      }
    }
    // The statuses first, in server order; each server's pull is posted once its status says
    // its format and size (pull_receiver::post_ready), also in server order, so that the
    // receivers' order of servers and the servers' order of receivers agree (see transfer_queue).
    pulls_.post_statuses(*this, me, tag, status_receives_);
  }

  // Decodes and sums the received parts in worker order, as far as they have arrived, and
  // marks the union of their indices (pull_format::adaptive).
  void accumulate_ready() {
    while (next_worker_ < workers_) {
      const auto w = static_cast<std::size_t>(next_worker_);
      const int source = worker_rank(next_worker_);
      if (push_receives_.completed() < last_transfer_[w]) {
        return;
      }
      shard_.add(source == comm_->rank() ? parts_[static_cast<std::size_t>(my_server_)]
                                         : received_parts_[w],
                 source);
      ++next_worker_;
    }
  }

  void post_pulls() {
    const int p = comm_->size();
    const int me = comm_->rank();
    const std::size_t n = average_.size();
    const std::size_t lo = shard_begin(n, my_server_);
    const std::span<float> shard = average_.subspan(lo, shard_begin(n, my_server_ + 1) - lo);
    if (shard_.rejected() < 0) {
      status_out_[status_pull_bytes] = shard_.average(workers_, options_.indices);
    }
    status_out_[status_rejected] = shard_.rejected();
    const bool sparse = status_out_[status_pull_bytes] >= 0;
    for (int r = 0; r < p; ++r) {
      if (r == me) {
        continue;
      }
      status_sends_.add(true, status_out_.data(), status_fields, sizeof(std::int64_t), MPI_INT64_T,
                        status_fields, r, options_.tag_base + 1);
      if (sparse) {
        pull_sends_.add(true, shard_.pull().data(), shard_.pull().size(), 1, MPI_BYTE, byte_chunk(),
                        r, options_.tag_base + 2);
        bytes_sent_ += shard_.pull().size();
      } else {
        pull_sends_.add(true, shard.data(), shard.size(), sizeof(float), MPI_FLOAT, float_chunk(),
                        r, options_.tag_base + 2);
        bytes_sent_ += shard.size_bytes();
      }
    }
    pulls_posted_ = true;
  }

  // One pass over every queue; true when this rank's part of the round is complete.
  bool progress_exchange() {
    const MPI_Comm comm = comm_->native();
    const bool pushed = push_sends_.progress(comm);
    if (is_server() && !pulls_posted_) {
      push_receives_.progress(comm);
      accumulate_ready();
      if (next_worker_ == workers_) {
        post_pulls();
      }
    }
    bool served = !is_server() || pulls_posted_;
    if (is_server() && pulls_posted_) {
      const bool statuses_sent = status_sends_.progress(comm);
      served = pull_sends_.progress(comm) && statuses_sent;
    }
    const bool statuses = status_receives_.progress(comm);
    pulls_.post_ready(*this, comm_->rank(), options_.tag_base, average_, byte_chunk(),
                      float_chunk(), status_receives_, pull_receives_, bytes_received_);
    const bool pulled = pull_receives_.progress(comm) && pulls_.posted_all(options_.servers);
    return pushed && served && statuses && pulled;
  }

  // The exchange completed on this rank: the sparse pulls decoded, then the verdicts checked.
  void finish_exchange() {
    pulls_.finish(*this, average_);
    check_statuses();
  }

  // Every rank received every server's status: the same verdict everywhere. Then this rank's
  // own pulls.
  void check_statuses() const {
    for (int s = 0; s < options_.servers; ++s) {
      const bool mine = s == my_server_;
      const std::int64_t status =
          mine ? status_out_[status_rejected] : pulls_.status(s, status_rejected);
      if (status >= 0) {
        throw wire_error(gradcomp::detail::concat(
            "gradcomp wire: parameter_server: server rank ", server_rank(s),
            " rejected the push of worker rank ", status,
            mine ? ": " + shard_.rejection() : std::string(" (the server's exception says why)")));
      }
    }
    if (!pulls_.problem().empty()) {
      throw wire_error(gradcomp::detail::concat("gradcomp wire: parameter_server: rank ",
                                                comm_->rank(), ": ", pulls_.problem()));
    }
  }

  const communicator* comm_;
  options options_;
  int workers_ = 1;
  int my_server_ = -1;
  std::span<float> average_;
  std::string problem_; // why this rank's push is invalid
  detail::parameter_server_agreement agreement_;
  sparse_message part_;
  std::vector<std::vector<std::byte>> parts_, received_parts_;
  detail::server_shard shard_;  // this server's shard
  detail::pull_receiver pulls_; // the statuses and pulls this rank receives
  std::vector<std::size_t> last_transfer_;
  std::array<std::int64_t, status_fields> status_out_{-1, -1};
  int next_worker_ = 0;
  bool pulls_posted_ = false;
  detail::transfer_queue push_sends_, push_receives_, status_sends_, pull_sends_, status_receives_,
      pull_receives_;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

} // namespace gradcomp::mpi
