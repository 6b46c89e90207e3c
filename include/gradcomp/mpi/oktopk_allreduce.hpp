// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::oktopk_allreduce: Ok-Topk's sparse allreduce (Li & Hoefler, PPoPP 2022):
//! a balanced sparse reduce-scatter, a reused global threshold and an allgather of the global
//! selection, about 2 (P-1)/P k pairs sent per rank in place of the allgather's (P-1) k.
#pragma once

#include <gradcomp/cost/oktopk.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/agreement.hpp>
#include <gradcomp/mpi/detail/oktopk.hpp>
#include <gradcomp/mpi/detail/operation.hpp>
#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace gradcomp::mpi {

//! Options of oktopk_allreduce.
struct oktopk_allreduce_options {
  //! Index encoding of the blocks on the wire (delta + varint: ~1.3 bytes per index at density
  //! 0.01, as sparse_allgather's default; u32 makes the bytes exactly cost::oktopk_bytes_sent).
  index_encoding indices = index_encoding::delta_varint;
  //! Calls (per dense length) between two repartitions of the index space into regions, >= 1
  //! (the paper's tau' = 64 in its VGG runs); the first call always partitions.
  int repartition_interval_calls = 64;
  //! Calls (per dense length) between two exact evaluations of the global threshold, >= 1
  //! (the paper's 32); in between the last threshold is reused. A call whose global selection
  //! held fewer than k / threshold_tolerance or more than k x threshold_tolerance elements
  //! makes the next call re-evaluate.
  int threshold_interval_calls = 32;
  //! How far the global selection's size may drift from k before the threshold is evaluated
  //! again, >= 1 (above).
  double threshold_tolerance = 1.25;
  //! Tags used: tag (reduce-scatter blocks) and tag + 1 (the global selection's blocks).
  int tag = 4300;
  //! How every send, receive and small collective is completed (MPI_Test in a loop, pausing per
  //! the policy; its timeout_seconds bounds each wait: mpi::timeout_error).
  wait_policy wait{};
};

//! @brief Ok-Topk's sparse allreduce (Li & Hoefler, "Near-Optimal Sparse Allreduce for
//! Distributed Deep Learning", PPoPP 2022, Algorithm 1): every rank passes its local selection
//! (e.g. reused_threshold's or exact_top_k's message) and gets the same global selection G,
//! about k elements, with the sum over all ranks of their selected values at each.
//!
//! 1. **Regions**: the index space [0, n) is split into P contiguous regions, region r reduced
//!    by rank r. Every repartition_interval_calls calls, each rank proposes the boundaries that
//!    split its own selection evenly and the proposals are averaged (one allreduce of P - 1
//!    integers, rounded down), so regions hold similar numbers of selected values (the paper's
//!    space repartition).
//! 2. **Sparse reduce-scatter**: each rank sends the part of its selection in region j to rank
//!    j (sizes first, one MPI_Ialltoall; then every block at once, encoded in the wire format;
//!    empty blocks are not sent); rank r sums the blocks of its region in rank order 0 .. P-1
//!    (its own included), so the sums do not depend on arrival order.
//! 3. **Global threshold**: every threshold_interval_calls calls, the exact k-th largest magnitude
//! of
//!    all reduced sums (the elements some rank selected) is found by a radix selection over the
//!    float bits: 4 rounds, each an allreduce of a 256-bin histogram (4-byte counts). In between,
//!    the previous threshold is reused (the paper's threshold reuse). Rank r selects the sums in
//!    its region whose magnitude is at least the threshold: exactly the top k where it was just
//!    evaluated (more only at equal magnitudes; all of them if fewer than k elements were selected
//!    at all), about k otherwise.
//! 4. **Allgather** of each region's selected sums (sizes first, one MPI_Iallgather; then each
//!    rank's block to every other rank), concatenated in rank order: G ascending, bit-identical
//!    on every rank (each element comes from its region's owner).
//! The paper's data balancing before the allgather is left out: an unbalanced region raises its
//! owner's bytes, not the others'.
//!
//! A rank's selected values outside G are not in any sum: return_unselected (gtopk_allreduce.hpp)
//! gives them back to the residual, so error feedback conserves every value (Ok-Topk's residual
//! update). Regions and threshold are state kept per dense length (every call with the same n
//! shares them; not in checkpoints: a new object partitions and evaluates on its first call).
//!
//! Bytes sent by rank r (counted; the agreement's allreduce is not): 8 (P-1) for the sizes of
//! the reduce-scatter plus its encoded blocks to the other ranks; 16 (P-1) for the sizes of
//! the allgather plus (P-1) x its encoded block; when the regions are repartitioned, 8 (P-1)
//! x ceil(log2 P), and when the threshold is evaluated 4 x 1024 x ceil(log2 P) (each allreduce's
//! payload times the rounds of recursive doubling; 1 x 1024 x ceil(log2 P) when fewer than k
//! elements were selected at all, which ends the selection after its first round). With balanced
//! regions and u32 indices:
//! cost::oktopk_bytes_sent; about 2 (P-1)/P x k pairs against sparse_allgather's (P-1) x k.
//!
//! Collective: every rank must call it with a message of the same dense length n and the same k
//! (agreed first with one small allreduce, which also carries every rank's argument checks: bad
//! arguments on any rank throw on every rank), in the same order relative to other collectives on
//! the communicator. Blocking: every transfer is posted nonblocking and completed through
//! options.wait; mpi::oktopk_exchange is its pipeline transport. Deterministic for a given
//! sequence of calls.
//! @throws std::invalid_argument from the constructor for intervals or a tolerance below 1, an
//! index encoding none, or tags outside [0, MPI_TAG_UB - 1]; mpi_error on every rank naming the
//! first rank with a problem (and its problem on that rank) if a rank's k is 0 or above n, n is
//! above the 32-bit index range, its message is invalid or so large that its encoding could pass
//! MPI's int count of bytes, or the ranks disagree on n or k (detail::agree_arguments);
//! mpi_error on every rank if a rank could not decode a block of the reduce-scatter or a
//! region's selection encodes to more than INT_MAX bytes, and on the receiving rank (after the
//! exchange completed) if a block of the allgather does not decode; mpi_error if MPI fails.
class oktopk_allreduce {
public:
  using options = oktopk_allreduce_options; //!< The options struct.

  //! @param comm the communicator; must outlive this object.
  //! @param o    encoding, intervals, tags and wait policy.
  //! @throws std::invalid_argument as the class comment says; mpi_error if the tag limit cannot
  //! be read.
  explicit oktopk_allreduce(const communicator& comm, options o = {}) : comm_(&comm), options_(o) {
    const int tag_ub = detail::tag_upper_bound(comm);
    gradcomp::detail::require(o.tag >= 0 && o.tag <= tag_ub - 1, "oktopk_allreduce: tag ", o.tag,
                              " is outside [0, ", tag_ub - 1, "]");
    gradcomp::detail::require(o.repartition_interval_calls >= 1,
                              "oktopk_allreduce: repartition_interval_calls ",
                              o.repartition_interval_calls, " is below 1");
    gradcomp::detail::require(o.threshold_interval_calls >= 1,
                              "oktopk_allreduce: threshold_interval_calls ",
                              o.threshold_interval_calls, " is below 1");
    gradcomp::detail::require(o.threshold_tolerance >= 1.0,
                              "oktopk_allreduce: threshold_tolerance ", o.threshold_tolerance,
                              " is below 1");
    gradcomp::detail::require(o.indices != index_encoding::none,
                              "oktopk_allreduce: index encoding none carries no indices");
  }

  //! @brief Runs the exchange: `local` is this rank's selection (sparse or dense, any value type,
  //! dense length n), `k` the global count; `global` receives G (indices ascending) with the sums
  //! over the ranks (values_type fp32). Collective. O(nnz + n/P + |G|) work per rank besides the
  //! transfers (the region's sums are a dense buffer of its length).
  void operator()(const sparse_message& local, std::size_t k, sparse_message& global) {
    const std::uint64_t n = local.dense_length_elements;
    detail::agree_arguments(*comm_, options_.wait, "oktopk_allreduce",
                            {{"dense length", n}, {"k", k}}, problem_of(local, k));
    bytes_sent_ = 0;
    bytes_received_ = 0;
    const int p = comm_->size();
    const int rank = comm_->rank();
    const auto up = static_cast<std::size_t>(p);
    region_state& st = states_[n];
    const bool repartition =
        st.calls % static_cast<std::uint64_t>(options_.repartition_interval_calls) == 0;
    reevaluated_ = st.reevaluate_next ||
                   st.calls % static_cast<std::uint64_t>(options_.threshold_interval_calls) == 0;
    ++st.calls;
    if (repartition) {
      partition(local, st);
    }
    boundaries_ = st.bounds;
    // 2. sparse reduce-scatter
    std::vector<sparse_message> blocks(up);
    std::vector<std::vector<std::byte>> out(up);
    std::vector<std::uint64_t> send_sizes(up, 0);
    for (std::size_t j = 0; j < up; ++j) {
      detail::slice_message(local, st.bounds[j], st.bounds[j + 1], blocks[j]);
      if (j != static_cast<std::size_t>(rank) && blocks[j].nnz() != 0) {
        encode(blocks[j], options_.indices, out[j]);
        send_sizes[j] = out[j].size();
      }
    }
    std::vector<std::uint64_t> receive_sizes(up, 0);
    collective(MPI_Ialltoall(send_sizes.data(), 1, MPI_UINT64_T, receive_sizes.data(), 1,
                             MPI_UINT64_T, comm_->native(), &request_),
               "MPI_Ialltoall (oktopk_allreduce sizes)", 8 * (up - 1), 8 * (up - 1));
    std::vector<const std::vector<std::byte>*> out_of(up);
    for (std::size_t j = 0; j < up; ++j) {
      out_of[j] = &out[j];
    }
    std::vector<std::vector<std::byte>> in(up);
    transfer(out_of, send_sizes, in, receive_sizes, options_.tag);
    const std::uint64_t lo = st.bounds[static_cast<std::size_t>(rank)];
    const std::uint64_t hi = st.bounds[static_cast<std::size_t>(rank) + 1];
    std::string failure;
    sums_.assign(hi - lo, 0.0f);
    touched_.assign(hi - lo, 0);
    for (std::size_t s = 0; s < up; ++s) {
      if (s != static_cast<std::size_t>(rank)) {
        blocks[s].clear(hi - lo);
        if (receive_sizes[s] != 0 && failure.empty()) {
          failure = decode_block(in[s], hi - lo, s, blocks[s]);
        }
      }
      add_block(blocks[s]);
    }
    // 3. the global threshold and this region's selection
    std::vector<std::uint32_t> candidates;
    std::vector<std::uint32_t> keys;
    for (std::size_t i = 0; i < touched_.size(); ++i) {
      if (touched_[i] != 0) {
        candidates.push_back(static_cast<std::uint32_t>(i));
        keys.push_back(detail::magnitude_key(sums_[i]));
      }
    }
    if (reevaluated_) {
      st.threshold_key = select_threshold(keys, k);
    }
    threshold_key_ = st.threshold_key;
    sparse_message mine;
    mine.clear(hi - lo);
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      if (keys[j] >= st.threshold_key) {
        mine.indices.push_back(candidates[j]);
        mine.values.push_back(sums_[candidates[j]]);
      }
    }
    // 4. allgather of the selections: sizes and counts first (a failed decode travels there)
    std::vector<std::byte> my_bytes;
    if (mine.nnz() != 0 && failure.empty()) {
      encode(mine, options_.indices, my_bytes);
    }
    constexpr std::uint64_t failed = std::numeric_limits<std::uint64_t>::max();
    const std::array<std::uint64_t, 2> my_header{failure.empty() ? my_bytes.size() : failed,
                                                 mine.nnz()};
    std::vector<std::uint64_t> headers(2 * up);
    collective(MPI_Iallgather(my_header.data(), 2, MPI_UINT64_T, headers.data(), 2, MPI_UINT64_T,
                              comm_->native(), &request_),
               "MPI_Iallgather (oktopk_allreduce sizes)", 16 * (up - 1), 16 * (up - 1));
    std::uint64_t selected = 0;
    for (std::size_t s = 0; s < up; ++s) {
      if (headers[2 * s] == failed) {
        throw mpi_error(gradcomp::detail::concat("oktopk_allreduce: rank ", s,
                                                 " could not decode a block of the reduce-scatter",
                                                 failure.empty() ? std::string() : ": " + failure));
      }
      if (headers[2 * s] > static_cast<std::uint64_t>(INT_MAX)) {
        throw mpi_error(gradcomp::detail::concat("oktopk_allreduce: rank ", s, "'s selection of ",
                                                 headers[2 * s + 1], " sums encodes to ",
                                                 headers[2 * s], " bytes, above MPI's int count"));
      }
      selected += headers[2 * s + 1];
    }
    const double tolerance = options_.threshold_tolerance;
    st.reevaluate_next = static_cast<double>(selected) * tolerance < static_cast<double>(k) ||
                         static_cast<double>(selected) > static_cast<double>(k) * tolerance;
    selected_ = selected;
    const std::vector<const std::vector<std::byte>*> same(up, &my_bytes);
    std::vector<std::uint64_t> my_sizes(up, 0);
    std::vector<std::uint64_t> their_sizes(up, 0);
    for (std::size_t s = 0; s < up; ++s) {
      if (s != static_cast<std::size_t>(rank)) {
        my_sizes[s] = my_bytes.size();
        their_sizes[s] = headers[2 * s];
      }
    }
    transfer(same, my_sizes, in, their_sizes, options_.tag + 1);
    global.clear(n);
    global.values_type = value_type::fp32;
    global.indices.reserve(selected);
    global.values.reserve(selected);
    for (std::size_t s = 0; s < up; ++s) {
      const std::uint64_t length = st.bounds[s + 1] - st.bounds[s];
      sparse_message theirs;
      theirs.clear(length);
      if (s == static_cast<std::size_t>(rank)) {
        theirs = mine;
      } else if (their_sizes[s] != 0 && failure.empty()) {
        failure = decode_block(in[s], length, s, theirs);
      }
      for (std::size_t j = 0; j < theirs.indices.size(); ++j) {
        global.indices.push_back(static_cast<std::uint32_t>(st.bounds[s] + theirs.indices[j]));
        global.values.push_back(theirs.values[j]);
      }
    }
    if (!failure.empty()) {
      throw mpi_error("oktopk_allreduce: " + failure);
    }
  }

  //! Bytes this rank sent in the last call (as documented above). O(1).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Bytes this rank received in the last call (counted as bytes_sent). O(1).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! The region boundaries of the last call: P + 1 element offsets, 0 first and n last, region r
  //! = [b[r], b[r+1]). O(1).
  [[nodiscard]] std::span<const std::uint64_t> boundaries() const noexcept { return boundaries_; }
  //! The global threshold of the last call, as a magnitude (selected: |sum| >= it). O(1).
  [[nodiscard]] float threshold() const noexcept { return std::bit_cast<float>(threshold_key_); }
  //! Whether the last call evaluated the threshold exactly (else it reused the previous one). O(1).
  [[nodiscard]] bool threshold_evaluated() const noexcept { return reevaluated_; }
  //! The size of the last call's global selection |G|. O(1).
  [[nodiscard]] std::uint64_t selected() const noexcept { return selected_; }

private:
  struct region_state {
    std::vector<std::uint64_t> bounds; // P + 1 offsets
    std::uint32_t threshold_key = 0;
    std::uint64_t calls = 0;
    bool reevaluate_next = false;
  };

  // this rank's argument problem, or "" (agreed on every rank by detail::agree_arguments)
  static std::string problem_of(const sparse_message& local, std::size_t k) {
    const std::uint64_t n = local.dense_length_elements;
    if (k < 1 || k > n) {
      return gradcomp::detail::concat("k ", k, " is outside [1, ", n, "]");
    }
    if (n > UINT32_MAX) {
      return gradcomp::detail::concat("dense length ", n, " is above the 32-bit index range");
    }
    // each block of the reduce-scatter holds at most nnz of its values (the allgather's are
    // checked on every rank from the gathered sizes)
    if (max_encoded_bytes(local.values.size()) > static_cast<std::uint64_t>(INT_MAX)) {
      return gradcomp::detail::concat("a message of ", local.values.size(),
                                      " values could exceed MPI's int count of bytes");
    }
    try {
      local.validate();
    } catch (const std::exception& e) {
      return std::string("invalid message: ") + e.what();
    }
    return {};
  }

  // rounds of recursive doubling on P ranks: the counted volume of a small allreduce
  [[nodiscard]] std::size_t doubling_rounds() const noexcept {
    return static_cast<std::size_t>(cost::tree_levels(comm_->size()));
  }

  // completes the collective just started in request_, counting its bytes
  void collective(int rc, const char* what, std::size_t sent, std::size_t received) {
    detail::check(rc, what);
    mpi::wait(request_, options_.wait);
    bytes_sent_ += sent;
    bytes_received_ += received;
  }

  // the averaged proposals of every rank (detail::propose_boundaries) become st.bounds
  void partition(const sparse_message& local, region_state& st) {
    const int p = comm_->size();
    std::vector<std::uint64_t> proposal;
    detail::propose_boundaries(local, p, proposal);
    std::vector<std::uint64_t> sum(proposal.size(), 0);
    const std::size_t volume = 8 * proposal.size() * doubling_rounds();
    collective(MPI_Iallreduce(proposal.data(), sum.data(), static_cast<int>(proposal.size()),
                              MPI_UINT64_T, MPI_SUM, comm_->native(), &request_),
               "MPI_Iallreduce (oktopk_allreduce regions)", volume, volume);
    st.bounds.assign(1, 0);
    for (const std::uint64_t s : sum) {
      st.bounds.push_back(s / static_cast<std::uint64_t>(p));
    }
    st.bounds.push_back(local.dense_length_elements);
  }

  // the exact k-th largest key over every rank's `keys` (0 if there are fewer than k)
  std::uint32_t select_threshold(std::span<const std::uint32_t> keys, std::size_t k) {
    std::uint32_t prefix = 0;
    std::uint64_t remaining = k;
    const std::size_t volume = detail::oktopk_histogram_bytes * doubling_rounds();
    for (int byte = detail::oktopk_radix_rounds - 1; byte >= 0; --byte) {
      std::array<std::uint32_t, 256> mine{};
      std::array<std::uint32_t, 256> all{};
      detail::add_key_histogram(keys, prefix, byte, mine);
      collective(MPI_Iallreduce(mine.data(), all.data(), 256, MPI_UINT32_T, MPI_SUM,
                                comm_->native(), &request_),
                 "MPI_Iallreduce (oktopk_allreduce threshold)", volume, volume);
      if (byte == detail::oktopk_radix_rounds - 1) {
        std::uint64_t total = 0;
        for (const std::uint32_t c : all) {
          total += c;
        }
        if (total < k) {
          return 0; // every selected element goes (the same verdict on every rank)
        }
      }
      detail::select_bucket(all, byte, prefix, remaining);
    }
    return prefix;
  }

  // posts a receive of in[s] (receive_sizes[s] bytes) and a send of out[s] (send_sizes[s]) for
  // every other rank s with a nonzero size, all at once, and completes them
  void transfer(const std::vector<const std::vector<std::byte>*>& out,
                const std::vector<std::uint64_t>& send_sizes,
                std::vector<std::vector<std::byte>>& in,
                const std::vector<std::uint64_t>& receive_sizes,
                int tag) {
    const int p = comm_->size();
    const int rank = comm_->rank();
    std::vector<MPI_Request> requests;
    for (int step = 1; step < p; ++step) {
      const auto from = static_cast<std::size_t>((rank - step + p) % p);
      gradcomp::detail::require(receive_sizes[from] <= INT_MAX, "oktopk_allreduce: rank ", from,
                                " sends a block of ", receive_sizes[from],
                                " bytes, above the MPI count limit");
      in[from].resize(receive_sizes[from]);
      if (receive_sizes[from] != 0) {
        requests.emplace_back(MPI_REQUEST_NULL);
        detail::check(MPI_Irecv(in[from].data(), static_cast<int>(receive_sizes[from]), MPI_BYTE,
                                static_cast<int>(from), tag, comm_->native(), &requests.back()),
                      "MPI_Irecv (oktopk_allreduce)");
        bytes_received_ += receive_sizes[from];
      }
    }
    for (int step = 1; step < p; ++step) { // to rank + 1 first, as the paper's rotation
      const auto to = static_cast<std::size_t>((rank + step) % p);
      if (send_sizes[to] != 0) {
        requests.emplace_back(MPI_REQUEST_NULL);
        detail::check(MPI_Isend(out[to]->data(), static_cast<int>(send_sizes[to]), MPI_BYTE,
                                static_cast<int>(to), tag, comm_->native(), &requests.back()),
                      "MPI_Isend (oktopk_allreduce)");
        bytes_sent_ += send_sizes[to];
      }
    }
    wait_all(requests, options_.wait);
  }

  // decodes rank s's block of a region of `length` elements; "" or what went wrong
  static std::string decode_block(std::span<const std::byte> bytes,
                                  std::uint64_t length,
                                  std::size_t s,
                                  sparse_message& out) {
    try {
      decode(bytes, out);
    } catch (const std::exception& e) {
      out.clear(length);
      return gradcomp::detail::concat("the block from rank ", s, " does not decode: ", e.what());
    }
    if (out.dense_length_elements != length) {
      const std::uint64_t got = out.dense_length_elements;
      out.clear(length);
      return gradcomp::detail::concat("the block from rank ", s, " has dense length ", got,
                                      ", its region ", length);
    }
    return {};
  }

  // adds a block of this rank's region into sums_ and marks its elements
  void add_block(const sparse_message& b) {
    accumulate(b, sums_);
    if (b.dense) {
      std::fill(touched_.begin(), touched_.end(), 1);
      return;
    }
    for (const std::uint32_t i : b.indices) {
      touched_[i] = 1;
    }
  }

  const communicator* comm_;
  options options_;
  std::map<std::uint64_t, region_state> states_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<float> sums_;
  std::vector<std::uint8_t> touched_;
  std::vector<std::uint64_t> boundaries_;
  std::uint32_t threshold_key_ = 0;
  bool reevaluated_ = false;
  std::uint64_t selected_ = 0;
  std::size_t bytes_sent_ = 0;
  std::size_t bytes_received_ = 0;
};

} // namespace gradcomp::mpi
