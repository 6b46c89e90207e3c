// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::mpi::coded_sparse_allreduce: CSSGD's coded multicast exchange (S3) of top-k
//! sparse part gradients. The ranks agree on the union U of the parts' selected indices (a ring
//! allgather of index lists, one contributor per part), restrict every part to U, and run
//! coded_allreduce on the |U|-element vectors. The MPI-free pieces (union, restriction, the
//! choice of contributors, the cost model) are in <gradcomp/coded/sparse.hpp> and
//! <gradcomp/coded/exchange_load.hpp>; docs/coded.md "The sparse form".
#pragma once

#include <gradcomp/coded/cost.hpp>
#include <gradcomp/coded/placement.hpp>
#include <gradcomp/coded/sparse.hpp>
#include <gradcomp/error.hpp>
#include <gradcomp/mpi/coded_exchange.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/detail/phases.hpp>
#include <gradcomp/mpi/detail/ring_allgather.hpp>
#include <gradcomp/mpi/error.hpp>
#include <gradcomp/mpi/wait_policy.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradcomp::mpi {

//! @brief Coded multicast allreduce of top-k sparse part gradients (S3 "Exchange" on the agreed
//! index union; docs/coded.md, "Send rule and decoding" for the coded exchange, "The sparse form:
//! coded_sparse_allreduce" for the ring allgather of index lists): every rank passes the sparse
//! messages of its C(P - 1, r - 1) parts (gradcomp::sparse_message, e.g. from an error_feedback
//! compressor per part) and gets, as a sparse_message, the sum of all C(P, r) parts on the union U
//! of their selected indices, bit-identical on every rank.
//!
//! **Algorithm.** One operation:
//! 1. Header (one MPI_Iallgather of 5 int64 per rank: dense length d, the count of contributed
//!    indices, a malformed-arguments flag, r, tag_base). Every rank checks every header the same
//!    way: malformed arguments on a rank, different r, tag_base or d make every rank throw
//!    together.
//! 2. Union agreement: part t's indices are contributed by ONE of its r owners,
//!    coded::union_contributors(placement())[t] (the owners hold identical messages); each rank
//!    sends the union of the index lists of its contributed parts (c_rank indices), and a ring
//!    allgather (detail::ring_allgather, point to point, tag tag_base) gives every rank every
//!    list. Every rank checks every list (coded::check_index_list: below d, strictly
//!    ascending) and merges them (coded::index_union) into U, ascending, identical everywhere.
//! 3. Restriction: each owned part becomes the |U|-element vector of its values at U, +0.0
//!    where it selected nothing (coded::restrict_to_union). A selected index outside U can only
//!    mean that the part's owners passed different messages; that rank throws (see below).
//! 4. coded_allreduce on the |U|-element vectors, with this object's options (its agreement,
//!    encoding, packets, schedules, variants and checks unchanged).
//! 5. The result: indices U, values the coded sum, dense length d, fp32, sparse layout.
//!
//! **Result.** Equal, bit for bit, to coded_allreduce run on the densified parts
//! (gradcomp::decompress of each message) and then restricted to U: outside U that dense sum is
//! +0.0 in both codings, and decompress(sum, dense) rebuilds it exactly. Fixed point: the
//! decoded exact integer sum, scale = coded::fixed_point_scale(largest |selected value|,
//! C(P, r)); XOR: the floats added in part-index order.
//!
//! **Error feedback.** Every selected value of every part is carried (U contains every part's
//! indices, which step 3 checks): with xor_bits exactly, so the compressor's residual (gradient
//! minus the selected values) conserves the gradient exactly; with fixed_point each part's value
//! within 0.5 / scale() and the sum within C(P, r) 0.5 / scale() per element (plus the rounding
//! of the result to float). As in coded_allreduce that quantisation error is reported as a bound
//! (quantisation_bound()), not fed back into a residual: the residual holds exactly what was not
//! selected.
//!
//! **Wire bytes** per rank (bytes_sent() and bytes_received() report them; exactly
//! coded::coded_sparse_load(P, r, |U|, c, 4, point_to_point, variant, rank) with c_j the count
//! rank j contributed): the ring allgather of index lists, P - 1 messages each way,
//! 4 (T - c_{rank + 1}) bytes sent and 4 (T - c_rank) received (T = sum of c_j), plus
//! coded_allreduce's bytes for |U| elements. Not counted: the 40-byte-per-rank header allgather
//! and coded_allreduce's agreement. Sparse beats the dense coded exchange of d elements when
//! 4 (T - c_{rank+1}) < r C(P - 1, r) 4 (ceil(d / r) - ceil(|U| / r)) (docs/coded.md).
//!
//! **Complexity** per rank: the contributed union O(T_rank log parts), the merge
//! O(T log P), the restriction O(C(P - 1, r - 1) (|U| + k)), then coded_allreduce on |U|.
//! Memory: the gathered lists (T indices), U, the restricted parts (C(P - 1, r - 1) |U| floats)
//! and the coded_allreduce's, kept between calls.
//!
//! **Determinism:** the result depends only on the parts' messages, P, r and the coding:
//! bit-identical on every rank.
//!
//! **Collective:** every rank must call start() (or operator()) with the same d and options.
//! P = 1: the constructor throws std::invalid_argument, as coded_allreduce's.
//!
//! Nonblocking use: start(), then test() until true, or wait(); the parts and the result must
//! not be touched until then. One operation at a time per object; after an exception the object
//! is reset and can start again.
//! @throws (from start(), test(), wait()) std::invalid_argument on the rank whose arguments are
//! malformed (the wrong number of messages, an invalid message, messages of different dense
//! lengths; the other ranks throw mpi_error), and on the rank that owns a part whose indices are
//! not all in U (its message differs from the contributing owner's; the other ranks throw
//! mpi_error from coded_allreduce, "another rank passed malformed arguments"); on every rank
//! std::invalid_argument when the index lists hold more than INT_MAX indices in all;
//! mpi_error on every rank when ranks pass different dense lengths or options, and on an MPI
//! failure; gradcomp::wire_error on every rank when a gathered header or index list is
//! malformed (a count above d, an index not below d, a list not strictly ascending); and
//! whatever coded_allreduce throws (NaN or an infinity with fixed_point, on every rank).
class coded_sparse_allreduce : public detail::phased_operation<coded_sparse_allreduce> {
public:
  //! The name timeout and error messages give this operation.
  static constexpr const char* operation_name = "coded_sparse_allreduce";
  using options = coded_allreduce_options; //!< see coded_allreduce_options.

  //! @brief Builds the coded_allreduce of P = comm.size() ranks with options `o` (which checks
  //! them) and the choice of contributors (coded::union_contributors). Local.
  //! @param comm the communicator; must outlive this object.
  //! @param o    the options; every rank must pass the same (checked when the exchange starts).
  //! @throws what coded_allreduce's constructor throws (std::invalid_argument naming r when
  //! r < 1 or r >= P, in particular for every r when P = 1; bad tags or window).
  explicit coded_sparse_allreduce(const communicator& comm, options o = {})
      : comm_(&comm), options_(o), exchange_(comm, o), placement_(exchange_.placement()),
        contributors_(coded::union_contributors(placement_)) {}
  coded_sparse_allreduce(const coded_sparse_allreduce&) = delete;
  coded_sparse_allreduce& operator=(const coded_sparse_allreduce&) = delete;
  ~coded_sparse_allreduce() { reset(); }

  //! @brief Starts the exchange. Collective (see the class).
  //! @param[in] parts this rank's part messages, one per part of placement().parts_of(rank), in
  //! that (ascending) order: C(P - 1, r - 1) valid messages (sparse_message::validate) of the
  //! same dense length d <= 2^32, sparse (top-k) or dense layout, any values_type. The r owners
  //! of a part must pass identical messages.
  //! @param[out] sum on completion, the sum over all C(P, r) parts: sparse layout, indices U
  //! (ascending), values the sums, dense length d, fp32. Must not be one of the parts.
  //! @throws std::invalid_argument if an operation is in progress (local). Argument errors are
  //! reported by test()/wait() on every rank (see the class).
  void start(std::span<const sparse_message> parts, sparse_message& sum) {
    const auto starting = begin_operation();
    parts_ = parts;
    sum_ = &sum;
    local_error_.clear();
    diverged_ = false;
    scale_ = 0.0;
    bytes_sent_ = bytes_received_ = messages_sent_ = messages_received_ = 0;
    union_bytes_sent_ = union_bytes_received_ = 0;
    union_.clear();
    const int me = comm_->rank();
    const std::span<const std::size_t> owned = placement_.parts_of(me);
    std::uint64_t d = parts.empty() ? 0 : parts[0].dense_length_elements;
    if (parts.size() != owned.size()) {
      local_error_ = gradcomp::detail::concat("coded_sparse_allreduce: rank ", me, " passed ",
                                              parts.size(), " part messages, but it owns ",
                                              owned.size(), " parts (placement().parts_of)");
    }
    for (std::size_t i = 0; i < parts.size() && local_error_.empty(); ++i) {
      try {
        parts[i].validate();
      } catch (const std::invalid_argument& e) {
        local_error_ = gradcomp::detail::concat("coded_sparse_allreduce: rank ", me, "'s message ",
                                                i, " (part ", owned[i], ") is invalid: ", e.what());
        break;
      }
      if (parts[i].dense_length_elements != d) {
        local_error_ = gradcomp::detail::concat(
            "coded_sparse_allreduce: rank ", me, "'s message ", i, " (part ", owned[i],
            ") has dense length ", parts[i].dense_length_elements, ", but message 0 has ", d);
      }
    }
    contribution_.clear();
    if (local_error_.empty()) {
      selected_.clear();
      std::vector<std::size_t> ends;
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (contributors_[owned[i]] == me) {
          coded::append_selected_indices(parts[i], selected_);
          ends.push_back(selected_.size());
        }
      }
      std::vector<std::span<const std::uint32_t>> lists;
      std::size_t begin = 0;
      for (const std::size_t end : ends) {
        lists.emplace_back(selected_.data() + begin, end - begin);
        begin = end;
      }
      coded::index_union(lists, contribution_);
    } else {
      d = 0;
    }
    header_ = {static_cast<std::int64_t>(d), static_cast<std::int64_t>(contribution_.size()),
               local_error_.empty() ? 0 : 1, options_.redundancy, options_.tag_base};
    headers_.assign(header_fields * static_cast<std::size_t>(comm_->size()), 0);
    // a collective, which MPI does not allow to be freed or cancelled: dropped mid-way, it is
    // waited for (every rank posts it here). The errors thrown on every rank are thrown after
    // the header round or the allgather completed, or by the coded_allreduce (which resets
    // itself), with nothing pending here.
    detail::check(MPI_Iallgather(header_.data(), static_cast<int>(header_fields), MPI_INT64_T,
                                 headers_.data(), static_cast<int>(header_fields), MPI_INT64_T,
                                 comm_->native(), collective()),
                  "MPI_Iallgather");
    then(&coded_sparse_allreduce::begin_union);
  }

  //! @private The nonblocking_operation hook.
  [[nodiscard]] const wait_policy& waiting() const noexcept { return options_.wait; }

  //! The placement of P ranks and redundancy r: which parts each rank computes.
  [[nodiscard]] const coded::placement& placement() const noexcept { return placement_; }
  //! The options this object was built with.
  [[nodiscard]] const options& settings() const noexcept { return options_; }
  //! Per part, the owner that contributes its indices to the union
  //! (coded::union_contributors(placement())).
  [[nodiscard]] std::span<const int> contributors() const noexcept { return contributors_; }
  //! |U| of the last operation (once the union is agreed), elements.
  [[nodiscard]] std::size_t union_elements() const noexcept { return union_.size(); }
  //! Per rank, the number of indices it contributed in the last operation (c_j; once the
  //! headers are agreed): the input of coded::coded_sparse_load.
  [[nodiscard]] std::vector<std::uint64_t> contributed_elements() const {
    std::vector<std::uint64_t> c(headers_.size() / header_fields);
    for (std::size_t j = 0; j < c.size(); ++j) {
      c[j] = static_cast<std::uint64_t>(headers_[header_fields * j + 1]);
    }
    return c;
  }
  //! Payload bytes this rank sent in the last operation, once complete: the union agreement's
  //! ring allgather plus coded_allreduce's packets (and its allgather in the reduce-scatter
  //! form); coded::coded_sparse_load(...).sent_bytes. Headers and agreements not counted.
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }
  //! Payload bytes this rank received in the last operation (as bytes_sent()).
  [[nodiscard]] std::size_t bytes_received() const noexcept { return bytes_received_; }
  //! Messages this rank sent in the last operation: P - 1 for the union, plus coded_allreduce's.
  [[nodiscard]] std::size_t messages_sent() const noexcept { return messages_sent_; }
  //! Messages this rank received in the last operation (as messages_sent()).
  [[nodiscard]] std::size_t messages_received() const noexcept { return messages_received_; }
  //! Of bytes_sent(), the union agreement's (the index lists).
  [[nodiscard]] std::size_t union_bytes_sent() const noexcept { return union_bytes_sent_; }
  //! Of bytes_received(), the union agreement's.
  [[nodiscard]] std::size_t union_bytes_received() const noexcept { return union_bytes_received_; }
  //! The fixed-point scale of the last operation (coded_allreduce::scale()), 0 with xor_bits.
  [[nodiscard]] double scale() const noexcept { return scale_; }
  //! Largest difference, per element of U, between the result and the exact sum of the parts'
  //! selected values that the coding causes: C(P, r) 0.5 / scale() with fixed_point, 0 with
  //! xor_bits (whose float additions in part order round as any float sum); the result's
  //! rounding to float comes on top (docs/coded.md "Exact coding").
  [[nodiscard]] double quantisation_bound() const noexcept {
    return scale_ > 0.0 ? static_cast<double>(placement_.part_count()) * 0.5 / scale_ : 0.0;
  }

private:
  // headers_: per rank [dense length, contributed indices, malformed flag, redundancy,
  // tag_base] (the tag the union's ring allgather uses must agree before it runs)
  static constexpr std::size_t header_fields = 5;

  [[nodiscard]] std::int64_t field(std::size_t rank, std::size_t f) const noexcept {
    return headers_[header_fields * rank + f];
  }

  // After the header allgather: every check that must fail on every rank together (the same
  // headers everywhere give the same decision), then the ring allgather of the index lists.
  void begin_union() {
    if (!local_error_.empty()) {
      throw std::invalid_argument("gradcomp: " + local_error_);
    }
    const auto p = static_cast<std::size_t>(comm_->size());
    for (std::size_t j = 0; j < p; ++j) {
      if (field(j, 2) != 0) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: coded_sparse_allreduce: rank ", j,
            " passed malformed arguments (a wrong number of part messages, an invalid message, "
            "or messages of different dense lengths); that rank throws std::invalid_argument "
            "naming them"));
      }
    }
    std::int64_t r_low = field(0, 3), r_high = field(0, 3);
    std::int64_t d_low = field(0, 0), d_high = field(0, 0);
    for (std::size_t j = 0; j < p; ++j) {
      r_low = std::min(r_low, field(j, 3));
      r_high = std::max(r_high, field(j, 3));
      const std::int64_t d = field(j, 0);
      gradcomp::detail::require_wire(
          d >= 0 && static_cast<std::uint64_t>(d) <= max_sparse_dense_length_elements,
          "coded_sparse_allreduce: rank ", j, "'s header states dense length ", d, ", outside [0, ",
          max_sparse_dense_length_elements, "]");
      d_low = std::min(d_low, d);
      d_high = std::max(d_high, d);
    }
    if (r_low != r_high) {
      throw mpi_error(gradcomp::detail::concat("gradcomp mpi: coded_sparse_allreduce: ranks pass "
                                               "different options: redundancy from ",
                                               r_low, " to ", r_high));
    }
    for (std::size_t j = 0; j < p; ++j) {
      if (field(j, 4) != field(0, 4)) {
        throw mpi_error(gradcomp::detail::concat(
            "gradcomp mpi: coded_sparse_allreduce: ranks pass different options: tag_base ",
            field(0, 4), " on rank 0, ", field(j, 4), " on rank ", j));
      }
    }
    if (d_low != d_high) {
      throw mpi_error(gradcomp::detail::concat(
          "gradcomp mpi: coded_sparse_allreduce: ranks pass different dense lengths (from ", d_low,
          " to ", d_high, " elements); this rank passed ",
          field(static_cast<std::size_t>(comm_->rank()), 0)));
    }
    std::vector<coded::index_range> blocks(p);
    std::uint64_t total = 0;
    for (std::size_t j = 0; j < p; ++j) {
      const std::int64_t c = field(j, 1);
      gradcomp::detail::require_wire(c >= 0 && c <= d_high, "coded_sparse_allreduce: rank ", j,
                                     "'s header states ", c, " contributed indices, outside [0, ",
                                     d_high, "] (the dense length)");
      blocks[j] = {static_cast<std::size_t>(total),
                   static_cast<std::size_t>(total + static_cast<std::uint64_t>(c))};
      total += static_cast<std::uint64_t>(c);
    }
    gradcomp::detail::require(total <= static_cast<std::uint64_t>(INT_MAX),
                              "coded_sparse_allreduce: the ranks' index lists hold ", total,
                              " indices in all, above MPI's int count limit ", INT_MAX);
    dense_length_ = static_cast<std::uint64_t>(d_high);
    lists_.resize(static_cast<std::size_t>(total));
    const coded::index_range mine = blocks[static_cast<std::size_t>(comm_->rank())];
    std::copy(contribution_.begin(), contribution_.end(),
              lists_.begin() + static_cast<std::ptrdiff_t>(mine.begin));
    blocks_ = blocks;
    // dropped mid-way: ring_allgather::abandon (its send waited for, then its receive cancelled
    // and completed)
    await(gather_, &coded_sparse_allreduce::begin_exchange);
    gather_.start(*comm_, lists_.data(), sizeof(std::uint32_t), MPI_UINT32_T, std::move(blocks),
                  options_.tag_base, "coded_sparse_allreduce");
  }

  // Every list is in place: check and merge them into U, restrict the parts, start the coded
  // exchange on |U| elements.
  void begin_exchange() {
    union_bytes_sent_ = gather_.bytes_sent();
    union_bytes_received_ = gather_.bytes_received();
    std::vector<std::span<const std::uint32_t>> lists;
    for (std::size_t j = 0; j < blocks_.size(); ++j) {
      const std::span<const std::uint32_t> list(lists_.data() + blocks_[j].begin,
                                                blocks_[j].size());
      coded::check_index_list(list, dense_length_, static_cast<int>(j));
      lists.push_back(list);
    }
    coded::index_union(lists, union_);
    const std::size_t u = union_.size();
    restricted_.resize(parts_.size() * u);
    part_spans_.clear();
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const std::span<float> values(restricted_.data() + i * u, u);
      dropped += coded::restrict_to_union(parts_[i], union_, values);
      part_spans_.emplace_back(values);
    }
    // a part's selected index outside U: its owners passed different messages. Starting the
    // exchange with no parts makes coded_allreduce's agreement fail on every rank (this rank
    // throws std::invalid_argument, replaced by the message below), so nobody hangs.
    diverged_ = dropped != 0;
    dropped_ = dropped;
    values_.resize(u);
    // dropped mid-way, an interrupted coded_allreduce is abandoned (its reset completes its
    // requests); it resets itself when its test() throws
    poll(&coded_sparse_allreduce::exchange_test, &coded_sparse_allreduce::finish)
        .pending(exchange_);
    exchange_.start(diverged_ ? std::span<const std::span<const float>>()
                              : std::span<const std::span<const float>>(part_spans_),
                    std::span<float>(values_));
  }

  bool exchange_test() {
    try {
      return exchange_.test();
    } catch (const std::invalid_argument&) {
      if (!diverged_) {
        throw;
      }
      throw std::invalid_argument(gradcomp::detail::concat(
          "gradcomp: coded_sparse_allreduce: rank ", comm_->rank(), "'s part messages select ",
          dropped_,
          " indices outside the agreed union; the owners of a part must pass identical "
          "messages (each part's indices come from one owner, contributors())"));
    }
  }

  void finish() {
    const coded_allreduce& x = exchange_;
    scale_ = x.scale();
    bytes_sent_ = union_bytes_sent_ + x.bytes_sent();
    bytes_received_ = union_bytes_received_ + x.bytes_received();
    messages_sent_ = gather_.messages_sent() + x.messages_sent();
    messages_received_ = gather_.messages_received() + x.messages_received();
    sum_->clear(dense_length_);
    sum_->indices.assign(union_.begin(), union_.end());
    sum_->values.assign(values_.begin(), values_.end());
  }

  const communicator* comm_;
  options options_;
  coded_allreduce exchange_;
  coded::placement placement_;
  std::vector<int> contributors_;
  std::span<const sparse_message> parts_;
  sparse_message* sum_ = nullptr;
  std::string local_error_;
  bool diverged_ = false;
  std::size_t dropped_ = 0;
  std::vector<std::uint32_t> selected_;     // this rank's contributed parts' indices, part by part
  std::vector<std::uint32_t> contribution_; // their union: what this rank contributes
  std::array<std::int64_t, header_fields> header_{}; // this rank's (the Iallgather's buffer)
  std::vector<std::int64_t> headers_;
  std::uint64_t dense_length_ = 0;
  std::vector<coded::index_range> blocks_; // rank j's list in lists_
  std::vector<std::uint32_t> lists_;       // every rank's contributed list, rank by rank
  detail::ring_allgather gather_;
  std::vector<std::uint32_t> union_; // U
  std::vector<float> restricted_;    // the owned parts at U, part-major
  std::vector<std::span<const float>> part_spans_;
  std::vector<float> values_; // the coded sum at U
  double scale_ = 0.0;
  std::size_t bytes_sent_ = 0, bytes_received_ = 0;
  std::size_t messages_sent_ = 0, messages_received_ = 0;
  std::size_t union_bytes_sent_ = 0, union_bytes_received_ = 0;
};

} // namespace gradcomp::mpi
