// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::parameter_server: synchronous push/pull through S server ranks (S1), with
//! the keys (element indices) sharded by contiguous range, sparse or dense pushes in the wire
//! format, and the averaged gradient pulled back by every rank (sparse when that is smaller).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/detail/transfer_queue.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <climits>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

//! @brief Which ranks of a parameter_server serve.
enum class server_placement {
  //! Every rank is a worker, and ranks 0 .. S-1 also serve (W = P; S <= P).
  colocated,
  //! Ranks P-S .. P-1 only serve; ranks 0 .. P-S-1 are the workers (W = P - S; S < P).
  dedicated,
};

//! @brief How a parameter_server's servers send the averaged shard back (the pull).
enum class pull_format {
  //! Always the dense shard: 4 n_s bytes of raw fp32 per server and rank.
  dense,
  //! The union of the pushes' indices with the averaged values, in the wire format (fp32
  //! values, the options' index encoding), when that encoding is smaller than the dense shard's
  //! 4 n_s bytes; the dense shard otherwise (and whenever a push part is dense). The result is
  //! bit-identical to the dense pull's: elements outside the union are exactly 0 in both.
  adaptive,
};

//! @brief Options of parameter_server. Every rank must pass the same options (checked: a
//! disagreement makes every rank throw).
struct parameter_server_options {
  //! Number of server ranks S, >= 1. Server s owns the elements [n s / S, n (s+1) / S).
  int servers = 1;
  //! Co-located (servers are also workers) or dedicated server ranks.
  server_placement placement = server_placement::colocated;
  //! Index encoding of sparse pushes on the wire (never index_encoding::none; dense pushes are
  //! always sent without indices).
  index_encoding indices = index_encoding::delta_varint;
  //! Largest point-to-point message, bytes (>= 4; capped at INT_MAX): longer pushes and pulls
  //! are sent as several messages, since MPI counts are int.
  std::size_t max_message_bytes = std::size_t{1} << 30;
  //! How the averaged shards come back (see pull_format).
  pull_format pull = pull_format::adaptive;
  //! How waits complete (see wait_policy.hpp).
  wait_policy wait{};
  //! First message tag: the operation uses tags tag_base .. tag_base + 2. Operations in flight at
  //! the same time on one communicator need disjoint tag ranges. >= 0.
  int tag_base = 0;
};

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
class parameter_server : public nonblocking_operation<parameter_server> {
  friend class nonblocking_operation<parameter_server>;

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
    statuses_.assign(static_cast<std::size_t>(o.servers) * status_fields, -1);
    status_items_.resize(static_cast<std::size_t>(o.servers));
    pulled_.resize(static_cast<std::size_t>(o.servers));
  }
  parameter_server(const parameter_server&) = delete;
  parameter_server& operator=(const parameter_server&) = delete;
  ~parameter_server() { reset(); }

  //! Starts a round: `push` (dense length n; ignored on a dedicated server) goes to the
  //! servers, and `average` (n floats, host memory) receives the average over the W workers.
  //! Argument problems are not thrown here but reported to every rank (see the class).
  void start(const sparse_message& push, std::span<float> average) {
    gradcomp::detail::require(phase_ == phase::idle || phase_ == phase::done,
                              "parameter_server: start() while an operation is in progress");
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
    const int p = comm_->size();
    headers_out_.assign(static_cast<std::size_t>(p) * fields, 0);
    headers_in_.assign(static_cast<std::size_t>(p) * fields, 0);
    for (int j = 0; j < p; ++j) {
      std::int64_t* h = &headers_out_[static_cast<std::size_t>(j) * fields];
      h[f_length] = static_cast<std::int64_t>(average.size());
      h[f_status] = status;
      h[f_servers] = options_.servers;
      h[f_placement] = static_cast<std::int64_t>(options_.placement);
      h[f_tag] = options_.tag_base;
      h[f_max_bytes] = static_cast<std::int64_t>(options_.max_message_bytes);
      h[f_pull] = static_cast<std::int64_t>(options_.pull);
      const int s = server_index(j);
      if (status == 0 && is_worker() && s >= 0 && j != comm_->rank()) {
        h[f_part_bytes] = static_cast<std::int64_t>(parts_[static_cast<std::size_t>(s)].size());
      }
    }
    bytes_sent_ = bytes_received_ = 0;
    detail::check(MPI_Ialltoall(headers_out_.data(), static_cast<int>(fields), MPI_INT64_T,
                                headers_in_.data(), static_cast<int>(fields), MPI_INT64_T,
                                comm_->native(), &request_),
                  "MPI_Ialltoall");
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
      case phase::headers: {
        if (!detail::complete(request_)) {
          return false;
        }
        check_headers();
        start_size_verdict();
        continue;
      }
      case phase::sizes:
        if (!detail::complete(request_)) {
          return false;
        }
        check_size_verdict();
        post_exchange();
        phase_ = phase::exchange;
        continue;
      case phase::exchange:
        if (!progress_exchange()) {
          return false;
        }
        finish_pulls();
        check_statuses();
        phase_ = phase::done;
        return true;
      }
    }
  }

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
    return s == my_server_
               ? status_out_[status_pull_bytes] >= 0
               : statuses_[static_cast<std::size_t>(s) * status_fields + status_pull_bytes] >= 0;
  }
  //! Payload bytes this rank sent in the last round (push parts and pulled shards).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Payload bytes this rank received in the last round.
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }

private:
  enum class phase { idle, headers, sizes, exchange, done };
  // Fields of the per-destination header of the alltoall (int64 each).
  static constexpr std::size_t f_length = 0, f_status = 1, f_servers = 2, f_placement = 3,
                               f_tag = 4, f_max_bytes = 5, f_pull = 6, f_part_bytes = 7, fields = 8;
  // Fields of a server's status to every rank (int64 each): the first worker rank whose push it
  // rejected (-1: none), and the size of the sparse pull that follows, bytes (-1: dense).
  static constexpr std::size_t status_rejected = 0, status_pull_bytes = 1, status_fields = 2;
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

  [[nodiscard]] static std::string describe(const std::int64_t* h) {
    return gradcomp::detail::concat(
        "servers ", h[f_servers],
        h[f_placement] == static_cast<std::int64_t>(server_placement::colocated) ? " co-located"
                                                                                 : " dedicated",
        ", tag_base ", h[f_tag], ", max_message_bytes ", h[f_max_bytes], ", pull ",
        h[f_pull] == static_cast<std::int64_t>(pull_format::dense) ? "dense" : "adaptive");
  }

  // Same checks, in the same order, on every rank's copy of every rank's header, so every rank
  // throws (or none does).
  void check_headers() const {
    const int p = comm_->size();
    const std::int64_t* first = headers_in_.data();
    for (int j = 0; j < p; ++j) {
      const std::int64_t* h = &headers_in_[static_cast<std::size_t>(j) * fields];
      if (h[f_servers] != first[f_servers] || h[f_placement] != first[f_placement] ||
          h[f_tag] != first[f_tag] || h[f_max_bytes] != first[f_max_bytes] ||
          h[f_pull] != first[f_pull]) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: ranks pass different options (rank 0: ",
            describe(first), "; rank ", j, ": ", describe(h), ")"));
      }
    }
    for (int j = 0; j < p; ++j) {
      const std::int64_t length = headers_in_[static_cast<std::size_t>(j) * fields + f_length];
      if (length != first[f_length]) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: ranks pass different lengths (rank 0: ",
            first[f_length], ", rank ", j, ": ", length, " elements)"));
      }
    }
    for (int j = 0; j < p; ++j) {
      if (headers_in_[static_cast<std::size_t>(j) * fields + f_status] != 0) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: parameter_server: worker rank ", j, " passed an invalid push",
            j == comm_->rank() ? ": " + problem_ : std::string(" (its own exception says why)")));
      }
    }
  }

  // A server validates the push sizes its workers stated (only it receives them) before they
  // size any buffer, and all ranks learn every server's verdict through one 8-byte
  // MPI_Iallreduce (MAX of a code naming the first server and worker at fault), so a bad size
  // makes every rank throw instead of leaving the others waiting.
  void start_size_verdict() {
    const int p = comm_->size();
    size_verdict_ = 0;
    size_problem_.clear();
    if (is_server()) {
      const std::size_t n = average_.size();
      const std::size_t shard = shard_begin(n, my_server_ + 1) - shard_begin(n, my_server_);
      const std::uint64_t most = max_encoded_bytes(shard);
      for (int w = 0; w < workers_ && size_verdict_ == 0; ++w) {
        const int source = worker_rank(w);
        if (source == comm_->rank()) {
          continue;
        }
        const std::int64_t stated =
            headers_in_[static_cast<std::size_t>(source) * fields + f_part_bytes];
        if (stated < static_cast<std::int64_t>(wire_header_bytes) ||
            static_cast<std::uint64_t>(stated) > most) {
          // largest code for the lowest server rank, then the lowest worker: the MAX names the
          // same culprit everywhere
          size_verdict_ = static_cast<std::int64_t>(p - comm_->rank()) * (p + 1) + (p - source);
          size_problem_ = gradcomp::detail::concat(
              "worker rank ", source, " states a push of ", stated, " bytes for a shard of ", shard,
              " elements, outside [", wire_header_bytes, ", ", most, "]");
        }
      }
    }
    detail::check(MPI_Iallreduce(MPI_IN_PLACE, &size_verdict_, 1, MPI_INT64_T, MPI_MAX,
                                 comm_->native(), &request_),
                  "MPI_Iallreduce");
    phase_ = phase::sizes;
  }

  void check_size_verdict() const {
    if (size_verdict_ == 0) {
      return;
    }
    const int p = comm_->size();
    const auto server = static_cast<int>(p - size_verdict_ / (p + 1));
    const auto worker = static_cast<int>(p - size_verdict_ % (p + 1));
    throw wire_error(gradcomp::detail::concat(
        "gradcomp wire: parameter_server: server rank ", server,
        " rejected the push size stated by worker rank ", worker,
        server == comm_->rank() ? ": " + size_problem_
                                : std::string(" (the server's exception says why)")));
  }

  void post_exchange() {
    const int me = comm_->rank();
    const int tag = options_.tag_base;
    const std::size_t n = average_.size();
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
    rejected_worker_ = -1;
    rejection_.clear();
    status_out_ = {-1, -1};
    if (is_server()) {
      const std::size_t lo = shard_begin(n, my_server_);
      const std::size_t hi = shard_begin(n, my_server_ + 1);
      std::fill(average_.begin() + static_cast<std::ptrdiff_t>(lo),
                average_.begin() + static_cast<std::ptrdiff_t>(hi), 0.0f);
      union_dense_ = options_.pull == pull_format::dense;
      if (!union_dense_) {
        in_union_.assign(hi - lo, 0);
      }
      for (int w = 0; w < workers_; ++w) {
        const int source = worker_rank(w);
        std::vector<std::byte>& part = received_parts_[static_cast<std::size_t>(w)];
        if (source != me) {
          // validated by check_size_verdict() on every rank before this point
          const auto bytes = static_cast<std::size_t>(
              headers_in_[static_cast<std::size_t>(source) * fields + f_part_bytes]);
          part.resize(bytes);
          push_receives_.add(false, part.data(), bytes, 1, MPI_BYTE, byte_chunk(), source, tag);
          bytes_received_ += bytes;
        }
        last_transfer_[static_cast<std::size_t>(w)] = push_receives_.size();
      }
    }
    // The statuses first, in server order; each server's pull is posted once its status says
    // its format and size (progress_pulls), also in server order, so that the receivers' order
    // of servers and the servers' order of receivers agree (see transfer_queue).
    for (int s = 0; s < options_.servers; ++s) {
      pulled_[static_cast<std::size_t>(s)].clear();
      if (server_rank(s) != me) {
        status_receives_.add(false, &statuses_[static_cast<std::size_t>(s) * status_fields],
                             status_fields, sizeof(std::int64_t), MPI_INT64_T, status_fields,
                             server_rank(s), tag + 1);
      }
      status_items_[static_cast<std::size_t>(s)] = status_receives_.size();
    }
    next_pull_ = 0;
    pull_problem_.clear();
  }

  // Decodes and sums the received parts in worker order, as far as they have arrived, and
  // marks the union of their indices (pull_format::adaptive).
  void accumulate_ready() {
    const std::size_t n = average_.size();
    const std::size_t lo = shard_begin(n, my_server_);
    const std::span<float> shard = average_.subspan(lo, shard_begin(n, my_server_ + 1) - lo);
    while (next_worker_ < workers_) {
      const auto w = static_cast<std::size_t>(next_worker_);
      const int source = worker_rank(next_worker_);
      if (push_receives_.completed() < last_transfer_[w]) {
        return;
      }
      if (rejected_worker_ < 0) {
        const std::vector<std::byte>& bytes = source == comm_->rank()
                                                  ? parts_[static_cast<std::size_t>(my_server_)]
                                                  : received_parts_[w];
        try {
          decode(bytes, received_);
          detail::check_length(received_, shard.size(), source);
          accumulate(received_, shard);
          union_dense_ = union_dense_ || received_.dense;
          if (!union_dense_) {
            for (const std::uint32_t i : received_.indices) {
              in_union_[i] = 1;
            }
          }
        } catch (const wire_error& e) {
          rejected_worker_ = source;
          rejection_ = e.what();
        }
      }
      ++next_worker_;
    }
  }

  // Encodes the shard's union (indices and averaged values) into pull_bytes_ when that is
  // smaller than the dense shard; returns its size, or -1 for a dense pull.
  [[nodiscard]] std::int64_t encode_sparse_pull(std::span<const float> shard) {
    if (union_dense_) {
      return -1;
    }
    pull_message_.clear(shard.size());
    for (std::size_t i = 0; i < shard.size(); ++i) {
      if (in_union_[i] != 0) {
        pull_message_.indices.push_back(static_cast<std::uint32_t>(i));
        pull_message_.values.push_back(shard[i]);
      }
    }
    if (encoded_size_bytes(pull_message_, options_.indices) >= shard.size() * sizeof(float)) {
      return -1;
    }
    encode(pull_message_, options_.indices, pull_bytes_);
    return static_cast<std::int64_t>(pull_bytes_.size());
  }

  void post_pulls() {
    const int p = comm_->size();
    const int me = comm_->rank();
    const std::size_t n = average_.size();
    const std::size_t lo = shard_begin(n, my_server_);
    const std::span<float> shard = average_.subspan(lo, shard_begin(n, my_server_ + 1) - lo);
    if (rejected_worker_ < 0) {
      const auto w = static_cast<float>(workers_);
      for (float& v : shard) {
        v /= w;
      }
      status_out_[status_pull_bytes] = encode_sparse_pull(shard);
    }
    status_out_[status_rejected] = rejected_worker_;
    const bool sparse = status_out_[status_pull_bytes] >= 0;
    for (int r = 0; r < p; ++r) {
      if (r == me) {
        continue;
      }
      status_sends_.add(true, status_out_.data(), status_fields, sizeof(std::int64_t), MPI_INT64_T,
                        status_fields, r, options_.tag_base + 1);
      if (sparse) {
        pull_sends_.add(true, pull_bytes_.data(), pull_bytes_.size(), 1, MPI_BYTE, byte_chunk(), r,
                        options_.tag_base + 2);
        bytes_sent_ += pull_bytes_.size();
      } else {
        pull_sends_.add(true, shard.data(), shard.size(), sizeof(float), MPI_FLOAT, float_chunk(),
                        r, options_.tag_base + 2);
        bytes_sent_ += shard.size_bytes();
      }
    }
    pulls_posted_ = true;
  }

  // Posts the pull receives whose status has come, in server order: a dense shard straight
  // into the output, a sparse one into a buffer that finish_pulls() decodes.
  void post_ready_pulls() {
    const std::size_t n = average_.size();
    while (next_pull_ < options_.servers) {
      const auto s = static_cast<std::size_t>(next_pull_);
      if (server_rank(next_pull_) == comm_->rank()) {
        ++next_pull_;
        continue;
      }
      if (status_receives_.completed() < status_items_[s]) {
        return;
      }
      const std::size_t lo = shard_begin(n, next_pull_);
      const std::size_t length = shard_begin(n, next_pull_ + 1) - lo;
      const std::int64_t stated = statuses_[s * status_fields + status_pull_bytes];
      const int tag = options_.tag_base + 2;
      if (stated < 0) {
        pull_receives_.add(false, average_.data() + lo, length, sizeof(float), MPI_FLOAT,
                           float_chunk(), server_rank(next_pull_), tag);
        bytes_received_ += length * sizeof(float);
      } else {
        // A sparse pull is sent only when smaller than the dense shard. A size outside that
        // range is a fault: the receive is clamped (a longer message then fails as truncated,
        // an mpi_error) and finish_pulls() reports it.
        const std::size_t dense_bytes = length * sizeof(float);
        const auto bytes = std::min(static_cast<std::size_t>(stated), dense_bytes);
        if (static_cast<std::size_t>(stated) < wire_header_bytes ||
            static_cast<std::size_t>(stated) >= dense_bytes) {
          note_pull_problem(gradcomp::detail::concat(
              "server rank ", server_rank(next_pull_), " states a sparse pull of ", stated,
              " bytes for a shard of ", length, " elements, outside [", wire_header_bytes, ", ",
              dense_bytes, ")"));
        }
        std::vector<std::byte>& buffer = pulled_[s];
        buffer.resize(std::max<std::size_t>(bytes, 1)); // non-empty: marks a sparse pull
        pull_receives_.add(false, buffer.data(), bytes, 1, MPI_BYTE, byte_chunk(),
                           server_rank(next_pull_), tag);
        bytes_received_ += bytes;
      }
      ++next_pull_;
    }
  }

  void note_pull_problem(std::string what) {
    if (pull_problem_.empty()) {
      pull_problem_ = std::move(what);
    }
  }

  // Decodes every sparse pull into the output's shard (zeros outside the union). Called once
  // the whole exchange has completed on this rank.
  void finish_pulls() {
    const std::size_t n = average_.size();
    for (int s = 0; s < options_.servers && pull_problem_.empty(); ++s) {
      const std::vector<std::byte>& bytes = pulled_[static_cast<std::size_t>(s)];
      if (bytes.empty()) {
        continue;
      }
      const std::size_t lo = shard_begin(n, s);
      const std::span<float> shard = average_.subspan(lo, shard_begin(n, s + 1) - lo);
      try {
        decode(bytes, received_);
        detail::check_length(received_, shard.size(), server_rank(s));
        decompress(received_, shard);
      } catch (const wire_error& e) {
        note_pull_problem(gradcomp::detail::concat("the pull of server rank ", server_rank(s),
                                                   " does not decode: ", e.what()));
      }
    }
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
    post_ready_pulls();
    const bool pulled = pull_receives_.progress(comm) && next_pull_ == options_.servers;
    return pushed && served && statuses && pulled;
  }

  // Every rank received every server's status: the same verdict everywhere. Then this rank's
  // own pulls.
  void check_statuses() const {
    for (int s = 0; s < options_.servers; ++s) {
      const bool mine = s == my_server_;
      const std::int64_t status =
          mine ? status_out_[status_rejected]
               : statuses_[static_cast<std::size_t>(s) * status_fields + status_rejected];
      if (status >= 0) {
        throw wire_error(gradcomp::detail::concat(
            "gradcomp wire: parameter_server: server rank ", server_rank(s),
            " rejected the push of worker rank ", status,
            mine ? ": " + rejection_ : std::string(" (the server's exception says why)")));
      }
    }
    if (!pull_problem_.empty()) {
      throw wire_error(gradcomp::detail::concat("gradcomp wire: parameter_server: rank ",
                                                comm_->rank(), ": ", pull_problem_));
    }
  }

  // An operation dropped mid-way (an exception, or destruction): completes what is pending and
  // makes the object ready for a new start() (detail::abandon). request_ is a collective
  // (the header MPI_Ialltoall or the size verdict's MPI_Iallreduce), which MPI does not allow
  // to be freed or cancelled: it is waited for, and completes once every rank has posted it, as
  // each does while it runs the round (the verdict right after the alltoall). The queues hold
  // point-to-point transfers (only in the exchange phase, when request_ is complete): sends
  // waited for, until their receivers take them, then receives cancelled and completed
  // (transfer_queue::abandon). The errors thrown on every rank are thrown after a collective or
  // the whole exchange has completed, with nothing pending; what this completes is left by a
  // failure on this rank alone or by destruction mid-way.
  void reset() noexcept {
    phase_ = phase::idle;
    detail::abandon(request_, detail::request_kind::collective);
    push_sends_.abandon();
    push_receives_.abandon();
    status_sends_.abandon();
    pull_sends_.abandon();
    status_receives_.abandon();
    pull_receives_.abandon();
  }

  const communicator* comm_;
  options options_;
  int workers_ = 1;
  int my_server_ = -1;
  phase phase_ = phase::idle;
  std::span<float> average_;
  std::string problem_, rejection_;
  sparse_message part_, received_, pull_message_;
  std::vector<std::vector<std::byte>> parts_, received_parts_;
  std::vector<std::vector<std::byte>> pulled_; // per server: its sparse pull (empty: dense)
  std::vector<std::byte> pull_bytes_;          // this server's encoded sparse pull
  std::vector<std::uint8_t> in_union_;         // this server's shard: 1 where a push has a value
  bool union_dense_ = true;                    // a dense pull: option dense, or a dense part
  std::vector<std::size_t> last_transfer_, status_items_;
  std::vector<std::int64_t> headers_out_, headers_in_, statuses_;
  std::int64_t size_verdict_ = 0;
  std::string size_problem_, pull_problem_;
  std::array<std::int64_t, status_fields> status_out_{-1, -1};
  int next_worker_ = 0, next_pull_ = 0;
  std::int64_t rejected_worker_ = -1;
  bool pulls_posted_ = false;
  MPI_Request request_ = MPI_REQUEST_NULL;
  detail::transfer_queue push_sends_, push_receives_, status_sends_, pull_sends_, status_receives_,
      pull_receives_;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

} // namespace gradcomp::mpi
