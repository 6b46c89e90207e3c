// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::sparse_allgather: every rank's sparse message to every rank, summed
//! into a dense result, with SparCML's switch to a dense allreduce when that is cheaper.
#pragma once

#include <gradcomp/cost/alpha_beta.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/allgather_plan.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/ring_allreduce.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

// the cost model prices the header round sparse_allgather sends
static_assert(cost::sparse_allgather_header_bytes ==
              static_cast<double>(detail::gathered_header_fields * sizeof(std::int64_t)));

//! @brief How sparse_allgather moves the encoded messages.
enum class sparse_allgather_algorithm {
  //! Point-to-point: every rank posts one receive per peer and sends its message to every peer
  //! (to rank + 1, rank + 2, ... first), all at once; each message is decoded (validated) as it
  //! arrives while the others are still on the wire, and the sum is built in rank order as the
  //! prefix of decoded messages grows. Same bytes per rank as a ring allgather.
  pairwise,
  //! MPICH's MPI_Iallgatherv, then decoding of every message once all have arrived (the
  //! textbook form; kept to compare against and for MPI libraries whose allgatherv is better).
  mpi_allgatherv,
};

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
  //! How waits complete (see wait_policy.hpp).
  wait_policy wait{};
  //! How the encoded messages move (measured side by side in docs/transport-benchmarks.md).
  sparse_allgather_algorithm algorithm = sparse_allgather_algorithm::pairwise;
  //! Tag of the pairwise algorithm's messages (one message per peer per operation), in
  //! [0, MPI_TAG_UB]. Operations in flight at the same time on one communicator need distinct
  //! tags, also against other transports' tag ranges: the default sits above the tag ranges
  //! that the other transports' defaults start at 0 (ring_allreduce: 0 .. 2P-3).
  int tag = default_tag;
  //! The default tag: 32000, below the 32767 that MPI guarantees MPI_TAG_UB to reach.
  static constexpr int default_tag = 32000;
};

//! @brief Sparse allgather (the reference top-k exchange, "TopkA"): each rank encodes its
//! message in the wire format, the byte counts and dense lengths are allgathered, then the
//! encoded messages move (pairwise point-to-point by default, or MPI_Iallgatherv: see
//! sparse_allgather_algorithm); every rank decodes every message (validating it) and sums them
//! in rank order into its dense result, so results are bit-identical on every rank.
//!
//! Overlap: the output is cleared and this rank's own message decoded while the others are on
//! the wire; with the pairwise algorithm each message is decoded as soon as it arrives, so only
//! the last one's decoding (and the rank-order sum of those not yet summed) follows the network.
//!
//! Collective: every rank must call start() (or operator()) with a message of the same dense
//! length and an output of that length, with the same options (algorithm, tag, dense switch,
//! the dense ring's options; checked: a mismatch throws on every rank), in the same order
//! relative to other collectives on the communicator. Any rank count, empty messages, empty
//! tensors. Bytes sent per rank: 32 (the header: encoded bytes, dense length, nnz and a
//! fingerprint of the options) + its encoded message to each of the P - 1 others; received: the
//! other ranks' encoded messages (up to 8 k (P-1) for u32/fp32 pairs;
//! cost::sparse_allgather_seconds). If the dense switch fires (decided identically on every rank
//! from the gathered sizes), the exchange is a ring allreduce of the densified messages instead.
//!
//! Memory: the encoded own message, the gathered messages (their total bytes) and every rank's
//! decoded message (8 bytes per pair), kept between calls. Work per rank: O(k) to encode,
//! O(n) to clear the output, O(total pairs) to decode and sum.
//! @throws (from start(), test(), wait(); no rank is left waiting for one that threw):
//! - on the rank whose own arguments are invalid (an output whose length differs from the
//!   message's dense length; a message that does not encode or decode, e.g. unsorted indices),
//!   that exception (std::invalid_argument or gradcomp::wire_error), after the header round;
//!   on every other rank mpi_error naming that rank (the lowest such rank);
//! - mpi_error on every rank when ranks pass different options or different dense lengths, or
//!   when the gathered bytes exceed MPI's int counts and the dense switch is off; mpi_error on
//!   an MPI failure;
//! - gradcomp::wire_error when a received message is malformed (corrupted after its sender's
//!   own check), naming the lowest such sender, after the exchange has completed, on every rank
//!   that received it: every rank but the sender, which checked its own bytes before sending
//!   (a fault on the wire, which TCP's and MPI's checks make unlikely, is not agreed on);
//! - from the constructor, std::invalid_argument for a tag outside [0, MPI_TAG_UB].
class sparse_allgather : public detail::phased_operation<sparse_allgather> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "sparse_allgather";
  //! The options struct (sparse_allgather_options).
  using options = sparse_allgather_options;
  //! How the encoded messages move (sparse_allgather_algorithm).
  using algorithm = sparse_allgather_algorithm;

  //! Not collective: reads MPI_TAG_UB of `comm` (which must outlive the object), keeps `o`
  //! and builds the dense ring used after the switch.
  //! @throws std::invalid_argument if o.tag is outside [0, MPI_TAG_UB], or as ring_allreduce's
  //! constructor for o.dense.
  explicit sparse_allgather(const communicator& comm, options o = {})
      : comm_(&comm), options_(checked(comm, o)), dense_(comm, o.dense), settings_(fingerprint(o)) {
  }
  sparse_allgather(const sparse_allgather&) = delete;
  sparse_allgather& operator=(const sparse_allgather&) = delete;
  ~sparse_allgather() { reset(); }

  //! Starts the exchange; `sum` (n floats) receives the sum of every rank's message.
  //! `mine` may be reused as soon as start() returns (it is encoded here). This rank's message
  //! is encoded and decoded (validated) before the header round and the output is cleared while
  //! the headers are on the wire.
  void start(const sparse_message& mine, std::span<float> sum) {
    const auto starting = begin_operation();
    const auto p = static_cast<std::size_t>(comm_->size());
    const auto me = static_cast<std::size_t>(comm_->rank());
    sum_ = sum;
    decoded_.resize(p);
    own_error_ = nullptr;
    try { // a local error is announced in the header and thrown after the header round
      gradcomp::detail::require(
          sum.size() == mine.dense_length_elements, "sparse_allgather: output has ", sum.size(),
          " elements, the message's dense length is ", mine.dense_length_elements);
      encode(mine, options_.indices, encoded_);
      decode(encoded_, decoded_[me]);
    } catch (...) {
      own_error_ = std::current_exception();
    }
    gathered_headers_.assign(detail::gathered_header_fields * p, 0);
    const std::int64_t mine_header[detail::gathered_header_fields] = {
        own_error_ ? detail::invalid_arguments_bytes : static_cast<std::int64_t>(encoded_.size()),
        static_cast<std::int64_t>(mine.dense_length_elements),
        static_cast<std::int64_t>(mine.nnz()), settings_};
    constexpr int fields = static_cast<int>(detail::gathered_header_fields);
    // a collective: dropped mid-way (an exception on this rank, or destruction), it is waited
    // for (detail::abandon), and completes because every rank posts it here
    detail::check(MPI_Iallgather(mine_header, fields, MPI_INT64_T, gathered_headers_.data(), fields,
                                 MPI_INT64_T, comm_->native(), collective()),
                  "MPI_Iallgather");
    then(&sparse_allgather::after_headers)
        .describe("the header allgather (an MPI_Iallgather of every rank)");
    used_dense_ = false;
    if (!own_error_) {
      std::fill(sum_.begin(), sum_.end(), 0.0f); // while the headers are on the wire
    }
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

  //! Whether the last operation switched to the dense ring allreduce.
  [[nodiscard]] bool used_dense() const noexcept { return used_dense_; }
  //! Bytes this rank received in the last operation (messages or ring traffic; headers excluded).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! Bytes this rank sent in the last operation (headers excluded).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }

private:
  static options checked(const communicator& comm, const options& o) {
    const int tag_ub = detail::tag_upper_bound(comm);
    gradcomp::detail::require(o.tag >= 0 && o.tag <= tag_ub, "sparse_allgather: tag ", o.tag,
                              " is outside [0, MPI_TAG_UB = ", tag_ub, "]");
    return o;
  }

  // What every rank must agree on, as one number (FNV-1a over the fields).
  static std::int64_t fingerprint(const options& o) noexcept {
    const std::uint64_t fields[] = {static_cast<std::uint64_t>(o.algorithm),
                                    o.dense_switch ? 1u : 0u,
                                    static_cast<std::uint64_t>(o.tag),
                                    static_cast<std::uint64_t>(o.dense.tag_base),
                                    static_cast<std::uint64_t>(o.dense.segment_bytes),
                                    o.dense.check_lengths ? 1u : 0u};
    std::uint64_t h = 1469598103934665603ull;
    for (const std::uint64_t f : fields) {
      h = (h ^ f) * 1099511628211ull;
    }
    return static_cast<std::int64_t>(h);
  }

  void after_headers() {
    const int p = comm_->size();
    const int me = comm_->rank();
    const detail::header_screen screen = detail::screen_headers(gathered_headers_);
    if (screen.invalid_rank == me) {
      std::rethrow_exception(own_error_);
    }
    if (screen.invalid_rank >= 0) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: sparse_allgather: rank ", screen.invalid_rank,
          " passed invalid arguments (an output of the wrong length, or a message that does not "
          "encode or decode; that rank's exception names the check)"));
    }
    if (screen.settings_mismatch_rank >= 0) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: sparse_allgather: ranks pass different options (rank 0 and rank ",
          screen.settings_mismatch_rank,
          " differ in the algorithm, the tag, the dense switch or the dense ring's options)"));
    }
    detail::plan_fields(gathered_headers_, headers_);
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
      decompress(decoded_[static_cast<std::size_t>(me)], sum_);
      bytes_sent_ = bytes_received_ = static_cast<std::size_t>(plan.ring_bytes);
      // dropped mid-way, the ring is abandoned (its own reset completes what it has pending)
      await(dense_).describe("the dense ring allreduce, ");
      dense_.start(sum_);
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
    post_messages();
    const auto rank_count = static_cast<std::size_t>(p);
    ready_.assign(rank_count, 0);
    first_error_ = nullptr;
    error_rank_ = rank_count;
    next_to_sum_ = 0;
    mark_decoded(static_cast<std::size_t>(me)); // decoded in start()
  }

  // Posts the movement of the encoded messages into gathered_ (at displacements_), as the
  // phase that takes them as they arrive. The collective (MPI_Iallgatherv) cannot be cancelled:
  // dropped mid-way (an exception on this rank, or destruction; detail::abandon) it is waited
  // for, and completes because every rank posts it. The pairwise algorithm's point-to-point
  // requests: the sends first, each waited for (MPICH cannot cancel a send; a rendezvous-sized
  // message waits until its receiver takes it, and every rank still running the operation has
  // posted its receives from every peer at once), while this rank's receives stay posted; then
  // the receives, each cancelled and completed.
  void post_messages() {
    const int p = comm_->size();
    const int me = comm_->rank();
    if (options_.algorithm == algorithm::mpi_allgatherv) {
      detail::check(MPI_Iallgatherv(encoded_.data(), static_cast<int>(encoded_.size()), MPI_BYTE,
                                    gathered_.data(), counts_.data(), displacements_.data(),
                                    MPI_BYTE, comm_->native(), collective()),
                    "MPI_Iallgatherv");
      then(&sparse_allgather::take_gathered)
          .describe("the messages' MPI_Iallgatherv of every rank");
      return;
    }
    // requests_: receives from rank - 1, rank - 2, ... then sends to rank + 1, rank + 2, ...
    // (step s pairs the send to rank + s with the receive from rank - s: every rank sends to a
    // different rank at the same step)
    requests_.assign(2 * static_cast<std::size_t>(p - 1), MPI_REQUEST_NULL);
    const std::span<MPI_Request> requests(requests_);
    poll(&sparse_allgather::take_arrived, &sparse_allgather::after_messages)
        .sends(requests.subspan(static_cast<std::size_t>(p - 1)))
        .receives(requests.first(static_cast<std::size_t>(p - 1)))
        .peer(&sparse_allgather::first_missing)
        .describe(&sparse_allgather::missing_messages);
    for (int s = 1; s < p; ++s) {
      const int from = source(s);
      detail::check(MPI_Irecv(gathered_.data() + displacements_[from], counts_[from], MPI_BYTE,
                              from, options_.tag, comm_->native(),
                              &requests_[static_cast<std::size_t>(s - 1)]),
                    "MPI_Irecv");
    }
    for (int s = 1; s < p; ++s) {
      const int to = (me + s) % p;
      detail::check(MPI_Isend(encoded_.data(), static_cast<int>(encoded_.size()), MPI_BYTE, to,
                              options_.tag, comm_->native(),
                              &requests_[static_cast<std::size_t>(p - 2 + s)]),
                    "MPI_Isend");
    }
  }

  // The MPI_Iallgatherv completed: takes every other rank's message.
  void take_gathered() {
    const int me = comm_->rank();
    for (int j = 0; j < comm_->size(); ++j) {
      if (j != me) {
        take(static_cast<std::size_t>(j), message_bytes(j));
      }
    }
    after_messages();
  }

  // Pairwise: takes whatever arrived (decodes it, sums the grown prefix); true when every
  // message has been taken and every send has completed.
  bool take_arrived() {
    const int p = comm_->size();
    bool all = true;
    for (int s = 1; s < p; ++s) { // receives
      MPI_Request& request = requests_[static_cast<std::size_t>(s - 1)];
      if (request == MPI_REQUEST_NULL) {
        continue;
      }
      if (!detail::complete(request)) {
        all = false;
        continue;
      }
      const int from = source(s);
      take(static_cast<std::size_t>(from), message_bytes(from));
    }
    for (std::size_t i = static_cast<std::size_t>(p - 1); i < requests_.size(); ++i) { // sends
      if (requests_[i] != MPI_REQUEST_NULL && !detail::complete(requests_[i])) {
        all = false;
      }
    }
    return all;
  }

  // Every message is in: the lowest rank's malformed message, if any, is this rank's error.
  void after_messages() {
    if (first_error_) {
      std::rethrow_exception(first_error_);
    }
  }

  // For timeout messages (pairwise algorithm): the first rank whose message has not arrived.
  [[nodiscard]] int first_missing() const noexcept {
    for (std::size_t j = 0; j < ready_.size(); ++j) {
      if (ready_[j] == 0) {
        return static_cast<int>(j);
      }
    }
    return -1;
  }
  // For timeout messages (pairwise algorithm): the ranks whose messages are missing (the first
  // 8).
  [[nodiscard]] std::string missing_messages() const {
    std::string ranks;
    std::size_t missing = 0;
    for (std::size_t j = 0; j < ready_.size(); ++j) {
      if (ready_[j] == 0 && ++missing <= 8) {
        ranks += gradcomp::detail::concat(missing == 1 ? "" : ", ", j);
      }
    }
    return gradcomp::detail::concat(
        missing, " of ", ready_.size() - 1, " messages not yet received (from rank",
        missing == 1 ? " " : "s ", ranks, missing > 8 ? ", ..." : "", ")");
  }

  // The rank whose message the pairwise algorithm's receive s (1 .. P-1) takes: rank - s.
  [[nodiscard]] int source(int s) const noexcept {
    const int p = comm_->size();
    return (comm_->rank() - s + p) % p;
  }

  [[nodiscard]] std::span<const std::byte> message_bytes(int rank) const {
    const auto j = static_cast<std::size_t>(rank);
    return std::span<const std::byte>(gathered_).subspan(
        static_cast<std::size_t>(displacements_[j]), static_cast<std::size_t>(counts_[j]));
  }

  // Decodes rank j's message (validating it against its header) and adds every decoded message
  // of the rank-order prefix to the output. A malformed message (or any other failure to take
  // it) is remembered, not thrown: the exchange completes first (see the class comment), and
  // every rank reports the lowest such rank's error.
  void take(std::size_t j, std::span<const std::byte> bytes) {
    if (j > error_rank_) {
      ready_[j] = 1;
      return;
    }
    try {
      try {
        decode(bytes, decoded_[j]);
      } catch (const wire_error& e) {
        throw wire_error(gradcomp::detail::concat("gradcomp wire: sparse_allgather: rank ", j,
                                                  "'s message: ", e.what()));
      }
      detail::check_length(decoded_[j], sum_.size(), static_cast<int>(j));
      const std::int64_t stated_nnz = headers_[detail::allgather_header_fields * j + 2];
      if (static_cast<std::int64_t>(decoded_[j].nnz()) != stated_nnz) {
        throw wire_error(gradcomp::detail::concat("gradcomp wire: sparse_allgather: rank ", j,
                                                  "'s message carries ", decoded_[j].nnz(),
                                                  " values, its header stated ", stated_nnz));
      }
    } catch (...) {
      first_error_ = std::current_exception();
      error_rank_ = j;
    }
    mark_decoded(j);
  }

  // Rank j's message is decoded (or skipped): adds the grown rank-order prefix to the output.
  void mark_decoded(std::size_t j) {
    ready_[j] = 1;
    while (next_to_sum_ < error_rank_ && next_to_sum_ < ready_.size() && ready_[next_to_sum_]) {
      accumulate(decoded_[next_to_sum_], sum_);
      ++next_to_sum_;
    }
  }

  const communicator* comm_;
  options options_;
  ring_allreduce dense_;
  std::span<float> sum_;
  std::vector<std::byte> encoded_, gathered_;
  std::int64_t settings_;                      // fingerprint(options_)
  std::vector<std::int64_t> gathered_headers_; // gathered_header_fields per rank
  std::vector<std::int64_t> headers_;          // the plan's fields of them
  std::vector<int> counts_, displacements_;
  std::vector<sparse_message> decoded_; // per rank, reused
  std::vector<unsigned char> ready_;    // per rank: decoded (or skipped after an error)
  std::size_t next_to_sum_ = 0;         // ranks [0, next_to_sum_) are in sum_
  std::size_t error_rank_ = 0;          // lowest rank with a malformed message, or P
  std::exception_ptr first_error_;      // the lowest rank's failure to take its message
  std::exception_ptr own_error_;        // this rank's invalid arguments (start())
  std::vector<MPI_Request> requests_;   // the pairwise algorithm's requests
  bool used_dense_ = false;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
};

} // namespace gradcomp::mpi
