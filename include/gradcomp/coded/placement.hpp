// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::coded::placement: which rank computes which part of a batch, and who codes
//! for whom, in CSSGD's coded gradient exchange (S3; docs/coded.md, "Placement" and "Send rule
//! and decoding"). Every rank builds the same placement from (n, r) alone: no communication,
//! deterministic.
#pragma once

#include <gradcomp/coded/detail/combinatorics.hpp>
#include <gradcomp/error.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace gradcomp::coded {

//! @brief The most parts C(n, r), and the most multicast groups C(n, r + 1), a placement
//! enumerates: 2^20. A placement stores every subset, (C(n, r) r + C(n, r + 1) (r + 1)) ints
//! plus per-rank indices, so this keeps it below about 100 MiB; a coded exchange with more
//! groups than this would also send an impractical number of messages (each rank is in
//! C(n - 1, r) groups).
inline constexpr std::size_t max_subset_count = std::size_t{1} << 20;

//! @brief The half-open range [begin, end) of indices (samples, elements).
struct index_range {
  std::size_t begin = 0; //!< first index, inclusive.
  std::size_t end = 0;   //!< last index, exclusive; end >= begin.

  //! Number of indices in the range.
  [[nodiscard]] std::size_t size() const noexcept { return end - begin; }
  //! Same begin and end.
  friend bool operator==(const index_range&, const index_range&) = default;
};

//! @brief Piece `piece` of [0, count) cut into `pieces` contiguous ranges whose sizes differ by at
//! most 1, the longer ones first: sizes are ceil(count / pieces) for the first count % pieces
//! pieces and floor(count / pieces) for the rest (pieces may be empty when count < pieces).
//! Used for the samples of a batch (one range per part) and for the r slices of a gradient.
//! O(1), no overflow for any count.
//! @throws std::invalid_argument naming the values if pieces == 0 or piece >= pieces.
[[nodiscard]] inline index_range
split_evenly(std::size_t count, std::size_t pieces, std::size_t piece) {
  gradcomp::detail::require(pieces >= 1, "split_evenly: piece count ", pieces, " is below 1");
  gradcomp::detail::require(piece < pieces, "split_evenly: piece ", piece, " is outside [0, ",
                            pieces, ")");
  const std::size_t base = count / pieces;
  const std::size_t extra = count % pieces;
  const std::size_t begin = piece * base + std::min(piece, extra);
  return {begin, begin + base + (piece < extra ? 1 : 0)};
}

//! @brief One term of a coded packet (S3 "Exchange"; docs/coded.md, "Send rule and decoding"): in
//! multicast group S, the sender puts slice `slice` of the gradient of part `part` into its
//! packet for `receiver`. `part` is owned by S \ {receiver}: every group member except
//! `receiver` (the sender included) computed it, so every other receiver of the packet cancels
//! this term, and `receiver` recovers exactly this slice from the packet.
struct coding_term {
  int receiver = 0;     //!< the group member that lacks `part`.
  std::size_t part = 0; //!< index of the part owned by the group minus `receiver`.
  int slice = 0;        //!< which of the part's r slices: the sender's position in its owners.
  //! Field by field equality.
  friend bool operator==(const coding_term&, const coding_term&) = default;
};

//! @brief The placement of CSSGD with n ranks and redundancy r (S3, first bullet; CDC's placement
//! over r-subsets, docs/references.md [CDC]; docs/coded.md, "Placement"):
//! - the batch is split into C(n, r) parts, one for each r-subset of ranks, numbered in the
//!   lexicographic order of the subsets ({0,1,..,r-1} is part 0);
//! - every rank of a part's subset (its owners) computes the part's gradient, so every sample
//!   is processed r times and each rank holds C(n - 1, r - 1) = r C(n, r) / n parts;
//! - the exchange runs over the C(n, r + 1) multicast groups, the (r + 1)-subsets, also in
//!   lexicographic order; each rank belongs to C(n - 1, r) of them. In group S, member j lacks
//!   exactly one part of the group, the one owned by S \ {j}, and every other member owns it.
//!
//! Every rank computes the same placement from (n, r): no communication, and the result
//! depends on nothing else (deterministic across ranks, runs and platforms). Construction takes
//! O(C(n, r) r + C(n, r + 1) (r + 1)) time and stores the subsets (see max_subset_count); the
//! accessors are O(1) or as stated. Ranks are 0-based ints as in MPI.
class placement {
public:
  //! @brief Enumerates the parts and groups of n = `ranks` and r = `redundancy`.
  //! @throws std::invalid_argument naming the value and the limit if n < 2, r < 1, r >= n,
  //! C(n, r) or C(n, r + 1) does not fit std::size_t, or either exceeds max_subset_count.
  placement(int ranks, int redundancy) : ranks_(ranks), redundancy_(redundancy) {
    detail::check_ranks_and_redundancy(ranks, redundancy);
    const auto n = static_cast<std::size_t>(ranks);
    const auto r = static_cast<std::size_t>(redundancy);
    part_count_ = detail::binomial_or_throw(n, r, "parts");
    group_count_ = detail::binomial_or_throw(n, r + 1, "multicast groups");
    gradcomp::detail::require(part_count_ <= max_subset_count, "the number of parts C(n = ", ranks,
                              ", r = ", redundancy, ") = ", part_count_,
                              " exceeds the limit max_subset_count = ", max_subset_count);
    gradcomp::detail::require(group_count_ <= max_subset_count,
                              "the number of multicast groups C(n = ", ranks,
                              ", r + 1 = ", redundancy + 1, ") = ", group_count_,
                              " exceeds the limit max_subset_count = ", max_subset_count);
    parts_per_rank_ = detail::binomial_or_throw(n - 1, r - 1, "parts per rank");
    groups_per_rank_ = detail::binomial_or_throw(n - 1, r, "groups per rank");
    owners_ = detail::lexicographic_subsets(ranks, redundancy, part_count_);
    members_ = detail::lexicographic_subsets(ranks, redundancy + 1, group_count_);
    parts_of_ = index_by_rank(owners_, r, parts_per_rank_);
    groups_of_ = index_by_rank(members_, r + 1, groups_per_rank_);
  }

  //! Number of ranks n.
  [[nodiscard]] int ranks() const noexcept { return ranks_; }
  //! Redundancy r: how many ranks compute each part.
  [[nodiscard]] int redundancy() const noexcept { return redundancy_; }
  //! Number of parts of a batch, C(n, r) (S3).
  [[nodiscard]] std::size_t part_count() const noexcept { return part_count_; }
  //! Parts each rank computes, C(n - 1, r - 1) = r C(n, r) / n (S3).
  [[nodiscard]] std::size_t parts_per_rank() const noexcept { return parts_per_rank_; }
  //! Number of multicast groups, C(n, r + 1).
  [[nodiscard]] std::size_t group_count() const noexcept { return group_count_; }
  //! Groups each rank belongs to, C(n - 1, r): also the number of parts each rank lacks.
  [[nodiscard]] std::size_t groups_per_rank() const noexcept { return groups_per_rank_; }

  //! @brief The r owners of part `part`, ascending.
  //! @throws std::invalid_argument if part >= part_count().
  [[nodiscard]] std::span<const int> owners(std::size_t part) const {
    check_part(part);
    return std::span<const int>(owners_).subspan(part * subset_size(), subset_size());
  }

  //! @brief The C(n - 1, r - 1) parts that `rank` computes, ascending.
  //! @throws std::invalid_argument if rank is outside [0, n).
  [[nodiscard]] std::span<const std::size_t> parts_of(int rank) const {
    check_rank(rank);
    return std::span<const std::size_t>(parts_of_).subspan(
        static_cast<std::size_t>(rank) * parts_per_rank_, parts_per_rank_);
  }

  //! @brief True if `rank` computes part `part`. O(r).
  //! @throws std::invalid_argument if rank or part is out of range.
  [[nodiscard]] bool owns(int rank, std::size_t part) const {
    check_rank(rank);
    const std::span<const int> o = owners(part);
    return std::find(o.begin(), o.end(), rank) != o.end();
  }

  //! @brief The index of the part whose owners are `owner_ranks` (r distinct ranks, ascending).
  //! O(r log C(n, r)).
  //! @throws std::invalid_argument if `owner_ranks` is not r ascending ranks in [0, n).
  [[nodiscard]] std::size_t part_index(std::span<const int> owner_ranks) const {
    return find_subset(owners_, subset_size(), owner_ranks, "part owners");
  }

  //! @brief The r + 1 members of multicast group `group`, ascending.
  //! @throws std::invalid_argument if group >= group_count().
  [[nodiscard]] std::span<const int> members(std::size_t group) const {
    check_group(group);
    return std::span<const int>(members_).subspan(group * group_size(), group_size());
  }

  //! @brief The C(n - 1, r) multicast groups `rank` belongs to, ascending.
  //! @throws std::invalid_argument if rank is outside [0, n).
  [[nodiscard]] std::span<const std::size_t> groups_of(int rank) const {
    check_rank(rank);
    return std::span<const std::size_t>(groups_of_)
        .subspan(static_cast<std::size_t>(rank) * groups_per_rank_, groups_per_rank_);
  }

  //! @brief The index of the group whose members are `member_ranks` (r + 1 distinct ranks,
  //! ascending). O(r log C(n, r + 1)).
  //! @throws std::invalid_argument if `member_ranks` is not r + 1 ascending ranks in [0, n).
  [[nodiscard]] std::size_t group_index(std::span<const int> member_ranks) const {
    return find_subset(members_, group_size(), member_ranks, "group members");
  }

  //! @brief The part of group `group` that `member` lacks: the one owned by the other r
  //! members (S3: "the part owned by S \ {j} is known by all of S except j"). O(r log).
  //! @throws std::invalid_argument if group is out of range or member is not in it.
  [[nodiscard]] std::size_t missing_part(std::size_t group, int member) const {
    const std::span<const int> s = members(group);
    std::vector<int> others;
    others.reserve(subset_size());
    for (const int m : s) {
      if (m != member) {
        others.push_back(m);
      }
    }
    gradcomp::detail::require(others.size() == subset_size(), "rank ", member,
                              " is not a member of multicast group ", group);
    return part_index(others);
  }

  //! @brief What `sender` codes into its one packet for multicast group `group` (S3
  //! "Exchange"; docs/coded.md, "Send rule and decoding"): one coding_term per other member j, in
  //! ascending order of j, with part = the part owned by S \ {j} and slice = the sender's
  //! position among that part's owners. The packet is the sum (fixed point) or XOR of those r
  //! slices, each zero-padded to packet_elements(). A receiver j owns the parts of every term
  //! but its own (their owners include j), cancels them, and keeps slice `slice` of its missing
  //! part; over the r senders of the group it gets all r slices of that part. O(r^2 log).
  //! @throws std::invalid_argument if group is out of range or sender is not in it.
  [[nodiscard]] std::vector<coding_term> coding_terms(std::size_t group, int sender) const {
    const std::span<const int> s = members(group);
    const auto at = std::find(s.begin(), s.end(), sender);
    gradcomp::detail::require(at != s.end(), "rank ", sender,
                              " is not a member of multicast group ", group);
    const auto sender_position = static_cast<int>(at - s.begin());
    std::vector<coding_term> terms;
    terms.reserve(subset_size());
    std::vector<int> owners_of_part;
    owners_of_part.reserve(subset_size());
    for (std::size_t j = 0; j < s.size(); ++j) {
      if (s[j] == sender) {
        continue;
      }
      owners_of_part.clear();
      for (const int m : s) {
        if (m != s[j]) {
          owners_of_part.push_back(m);
        }
      }
      // removing s[j] shifts the members after it one place down
      const int slice =
          static_cast<int>(j) < sender_position ? sender_position - 1 : sender_position;
      terms.push_back({s[j], part_index(owners_of_part), slice});
    }
    return terms;
  }

  //! @brief The elements of slice `slice` of a part's gradient of `gradient_elements` elements:
  //! split_evenly(gradient_elements, r, slice) (S3: "split each such part's gradient into r
  //! slices").
  //! @throws std::invalid_argument if slice is outside [0, r).
  [[nodiscard]] index_range slice_elements(std::size_t gradient_elements, int slice) const {
    gradcomp::detail::require(slice >= 0 && slice < redundancy_, "slice ", slice,
                              " is outside [0, r = ", redundancy_, ")");
    return split_evenly(gradient_elements, static_cast<std::size_t>(redundancy_),
                        static_cast<std::size_t>(slice));
  }

  //! @brief Length of every coded packet for gradients of `gradient_elements` elements:
  //! ceil(gradient_elements / r), the longest slice (shorter slices are zero-padded,
  //! docs/coded.md, "Send rule and decoding"). O(1).
  [[nodiscard]] std::size_t packet_elements(std::size_t gradient_elements) const noexcept {
    const auto r = static_cast<std::size_t>(redundancy_);
    return gradient_elements / r + (gradient_elements % r != 0 ? 1 : 0);
  }

  //! @brief The reduce-scatter form of the exchange (variant R, docs/coded.md, "Variants F and
  //! R"): the coordinates rank `block` reduces, block `block` of a gradient of
  //! `gradient_elements` elements cut into n blocks, split_evenly(gradient_elements, n, block)
  //! (longer blocks first; blocks are empty when gradient_elements < n). O(1).
  //! @throws std::invalid_argument if block is outside [0, n).
  [[nodiscard]] index_range block_elements(std::size_t gradient_elements, int block) const {
    gradcomp::detail::require(block >= 0 && block < ranks_, "block ", block,
                              " is outside [0, n = ", ranks_, ")");
    return split_evenly(gradient_elements, static_cast<std::size_t>(ranks_),
                        static_cast<std::size_t>(block));
  }

  //! @brief Reduce-scatter form: the elements (absolute indices) of slice `slice` of block
  //! `block`, the block cut into r slices as a whole gradient is in the full form:
  //! block_elements(d, block).begin + split_evenly(block size, r, slice). O(1).
  //! @throws std::invalid_argument if block is outside [0, n) or slice outside [0, r).
  [[nodiscard]] index_range
  block_slice_elements(std::size_t gradient_elements, int block, int slice) const {
    gradcomp::detail::require(slice >= 0 && slice < redundancy_, "slice ", slice,
                              " is outside [0, r = ", redundancy_, ")");
    const index_range b = block_elements(gradient_elements, block);
    const index_range s = split_evenly(b.size(), static_cast<std::size_t>(redundancy_),
                                       static_cast<std::size_t>(slice));
    return {b.begin + s.begin, b.begin + s.end};
  }

  //! @brief Reduce-scatter form: the length of every coded packet, the longest slice of the
  //! longest block, ceil(ceil(d / n) / r) (shorter slices are zero-padded). O(1).
  [[nodiscard]] std::size_t block_packet_elements(std::size_t gradient_elements) const noexcept {
    const auto n = static_cast<std::size_t>(ranks_);
    const auto r = static_cast<std::size_t>(redundancy_);
    const std::size_t block = gradient_elements / n + (gradient_elements % n != 0 ? 1 : 0);
    return block / r + (block % r != 0 ? 1 : 0);
  }

  //! @brief The samples of part `part` when a batch (or a dataset shard) of `samples` samples
  //! is split into the C(n, r) parts: split_evenly(samples, C(n, r), part), contiguous, sizes
  //! differing by at most 1 (parts are empty when samples < C(n, r)).
  //! @throws std::invalid_argument if part >= part_count().
  [[nodiscard]] index_range part_samples(std::size_t part, std::size_t samples) const {
    check_part(part);
    return split_evenly(samples, part_count_, part);
  }

  //! @brief The sample ranges `rank` processes for a batch of `samples` samples: one range per
  //! part in parts_of(rank), in that order (C(n - 1, r - 1) ranges, about r samples / n samples
  //! in all). The rank computes one gradient per range. O(C(n - 1, r - 1)).
  //! @throws std::invalid_argument if rank is outside [0, n).
  [[nodiscard]] std::vector<index_range> rank_samples(int rank, std::size_t samples) const {
    std::vector<index_range> ranges;
    ranges.reserve(parts_per_rank_);
    for (const std::size_t part : parts_of(rank)) {
      ranges.push_back(split_evenly(samples, part_count_, part));
    }
    return ranges;
  }

private:
  [[nodiscard]] std::size_t subset_size() const noexcept {
    return static_cast<std::size_t>(redundancy_);
  }
  [[nodiscard]] std::size_t group_size() const noexcept {
    return static_cast<std::size_t>(redundancy_) + 1;
  }

  void check_rank(int rank) const {
    gradcomp::detail::require(rank >= 0 && rank < ranks_, "rank ", rank,
                              " is outside [0, n = ", ranks_, ")");
  }
  void check_part(std::size_t part) const {
    gradcomp::detail::require(part < part_count_, "part ", part,
                              " is outside [0, C(n, r) = ", part_count_, ")");
  }
  void check_group(std::size_t group) const {
    gradcomp::detail::require(group < group_count_, "multicast group ", group,
                              " is outside [0, C(n, r + 1) = ", group_count_, ")");
  }

  // Per rank (rank-major, `per_rank` each), the indices of the subsets that contain it,
  // ascending: every rank is in exactly per_rank of them.
  [[nodiscard]] std::vector<std::size_t>
  index_by_rank(const std::vector<int>& flat, std::size_t k, std::size_t per_rank) const {
    const auto n = static_cast<std::size_t>(ranks_);
    std::vector<std::size_t> index(n * per_rank);
    std::vector<std::size_t> filled(n, 0);
    const std::size_t count = flat.size() / k;
    for (std::size_t s = 0; s < count; ++s) {
      for (std::size_t i = 0; i < k; ++i) {
        const auto rank = static_cast<std::size_t>(flat[s * k + i]);
        index[rank * per_rank + filled[rank]++] = s;
      }
    }
    return index;
  }

  // Binary search of a lexicographically sorted list of k-subsets.
  [[nodiscard]] std::size_t find_subset(const std::vector<int>& flat,
                                        std::size_t k,
                                        std::span<const int> subset,
                                        const char* what) const {
    gradcomp::detail::require(subset.size() == k, what, ": ", subset.size(),
                              " ranks given, expected ", k);
    for (std::size_t i = 0; i < k; ++i) {
      gradcomp::detail::require(subset[i] >= 0 && subset[i] < ranks_, what, ": rank ", subset[i],
                                " is outside [0, n = ", ranks_, ")");
      gradcomp::detail::require(i == 0 || subset[i - 1] < subset[i], what, ": ranks ",
                                i == 0 ? 0 : subset[i - 1], " and ", subset[i],
                                " are not strictly ascending");
    }
    std::size_t lo = 0;
    std::size_t hi = flat.size() / k;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const auto first = flat.begin() + static_cast<std::ptrdiff_t>(mid * k);
      if (std::lexicographical_compare(first, first + static_cast<std::ptrdiff_t>(k),
                                       subset.begin(), subset.end())) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo; // every valid k-subset is in the list
  }

  int ranks_ = 0;
  int redundancy_ = 0;
  std::size_t part_count_ = 0;
  std::size_t group_count_ = 0;
  std::size_t parts_per_rank_ = 0;
  std::size_t groups_per_rank_ = 0;
  std::vector<int> owners_;            // part-major, r ranks each, lexicographic order
  std::vector<int> members_;           // group-major, r + 1 ranks each, lexicographic order
  std::vector<std::size_t> parts_of_;  // rank-major, parts_per_rank_ each
  std::vector<std::size_t> groups_of_; // rank-major, groups_per_rank_ each
};

} // namespace gradcomp::coded
