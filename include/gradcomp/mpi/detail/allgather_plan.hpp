// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The header step of gradcomp::mpi::sparse_allgather, without MPI: every rank's header
//! (encoded bytes, dense length, nnz), as gathered from its peers, is validated, and the
//! exchange is planned from it (counts and displacements for MPI_Iallgatherv, or the switch to a
//! dense allreduce). Headers come from other processes, so they are untrusted input: this is
//! the part of the transport that the `allgather_headers` fuzz target exercises.
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace gradcomp::mpi::detail {

//! Fields per rank in the gathered headers: encoded bytes, dense length (elements), nnz.
inline constexpr std::size_t allgather_header_fields = 3;
//! What a rank states as its encoded bytes when it cannot take part: its own arguments are
//! invalid (an output of the wrong length, or a message that fails to encode or decode on that
//! rank). Every rank then reports it, instead of that rank throwing alone and leaving the others
//! waiting.
inline constexpr std::int64_t invalid_arguments_bytes = -1;
//! Fields per rank that sparse_allgather gathers: the plan's allgather_header_fields, then a
//! fingerprint of the settings every rank must share (settings_fingerprint).
inline constexpr std::size_t gathered_header_fields = allgather_header_fields + 1;
//! The largest dense length a header may state, elements (2^56: far above any memory, and
//! small enough that byte bounds below cannot overflow 64 bits).
inline constexpr std::int64_t max_header_dense_length = std::int64_t{1} << 56;

//! The validated plan of one sparse allgather (the same on every rank that gathered the same
//! headers).
struct allgather_plan {
  std::int64_t dense_length_elements = 0; //!< rank 0's dense length.
  //! First rank whose dense length differs from rank 0's, or -1. The caller reports it (a
  //! usage error, not a malformed header); nothing else in the plan is set then.
  int length_mismatch_rank = -1;
  std::int64_t total_bytes = 0; //!< sum of the encoded sizes (saturates at 2^62).
  std::int64_t most_received_bytes =
      0;                          //!< total minus the smallest message: the most any rank receives.
  bool exceeds_int_count = false; //!< total_bytes does not fit MPI's int counts.
  double ring_bytes = 0.0;        //!< what a ring allreduce moves per rank: 2 (P-1)/P 4n.
  bool use_dense = false;         //!< the dense allreduce moves fewer bytes (or must run).
  std::vector<int> counts; //!< per rank, bytes (only when neither use_dense nor exceeds_int_count).
  std::vector<int> displacements; //!< per rank, byte offset in the gathered buffer (idem).
};

//! @brief Validates the gathered headers (allgather_header_fields per rank, rank order) and
//! plans the exchange. With `dense_switch`, the plan switches to a dense allreduce when the
//! rank that receives the most would receive more than a ring allreduce moves,
//! 2 (P - 1) / P x 4n bytes (SparCML's rule), or when the total exceeds MPI's int counts.
//! Checks, in this order for every rank j: bytes_j != invalid_arguments_bytes (that rank
//! announced invalid arguments), 0 <= length_j <= 2^56, length_j == length_0 (else
//! length_mismatch_rank = j and return), 0 <= nnz_j <= length_j, and
//! min_encoded_bytes(nnz_j) <= bytes_j <= max_encoded_bytes(nnz_j) (32 + min(2 nnz, 9 +
//! ceil(nnz / 8)) .. 32 + 13 nnz + 14).
//! O(P). Deterministic: the same headers give the same plan or the same exception everywhere.
//! @throws gradcomp::wire_error naming the rank, the field and the limit on a malformed header;
//! std::invalid_argument if `headers` is empty or not a multiple of allgather_header_fields.
[[nodiscard]] inline allgather_plan plan_allgather(std::span<const std::int64_t> headers,
                                                   bool dense_switch) {
  using gradcomp::detail::concat;
  gradcomp::detail::require(!headers.empty() && headers.size() % allgather_header_fields == 0,
                            "sparse_allgather: ", headers.size(),
                            " header values are not a positive multiple of ",
                            allgather_header_fields);
  const std::size_t p = headers.size() / allgather_header_fields;
  allgather_plan plan;
  const auto field = [&](std::size_t j, std::size_t f) {
    return headers[allgather_header_fields * j + f];
  };
  const auto malformed = [](std::size_t j, const char* what, std::int64_t value, auto... limit) {
    return wire_error(concat("gradcomp wire: sparse_allgather: rank ", j, "'s header states ", what,
                             " ", value, limit...));
  };
  plan.dense_length_elements = field(0, 1);
  std::int64_t smallest = INT64_MAX;
  constexpr std::int64_t saturation = std::int64_t{1} << 62;
  for (std::size_t j = 0; j < p; ++j) {
    const std::int64_t bytes = field(j, 0);
    const std::int64_t length = field(j, 1);
    const std::int64_t nnz = field(j, 2);
    if (bytes == invalid_arguments_bytes) { // sparse_allgather screens these out first
      throw wire_error(concat("gradcomp wire: sparse_allgather: rank ", j,
                              " announced invalid arguments (its exception names the check)"));
    }
    if (length < 0 || length > max_header_dense_length) {
      throw malformed(j, "dense length", length, ", outside [0, ", max_header_dense_length, "]");
    }
    if (length != plan.dense_length_elements) {
      plan.length_mismatch_rank = static_cast<int>(j);
      return plan;
    }
    if (nnz < 0 || nnz > length) {
      throw malformed(j, "nnz", nnz, ", outside [0, ", length, "] (its dense length)");
    }
    const auto low = static_cast<std::int64_t>(min_encoded_bytes(static_cast<std::uint64_t>(nnz)));
    const auto high = static_cast<std::int64_t>(max_encoded_bytes(static_cast<std::uint64_t>(nnz)));
    if (bytes < low || bytes > high) {
      throw malformed(j, "encoded bytes", bytes, ", outside [", low, ", ", high, "] for nnz ", nnz);
    }
    plan.total_bytes = std::min(saturation, plan.total_bytes + bytes);
    smallest = std::min(smallest, bytes);
  }
  const auto n = static_cast<double>(plan.dense_length_elements);
  const auto pd = static_cast<double>(p);
  plan.ring_bytes = 2.0 * (pd - 1.0) / pd * 4.0 * n;
  plan.exceeds_int_count = plan.total_bytes > INT_MAX;
  // decided from what the rank with the smallest message would receive (the most any rank
  // receives), the same on every rank: each rank's own share differs when message sizes
  // differ, and ranks deciding differently would run different collectives
  plan.most_received_bytes = plan.total_bytes - smallest;
  plan.use_dense =
      dense_switch &&
      (static_cast<double>(plan.most_received_bytes) > plan.ring_bytes || plan.exceeds_int_count);
  if (plan.use_dense || plan.exceeds_int_count) {
    return plan;
  }
  plan.counts.resize(p);
  plan.displacements.resize(p);
  int offset = 0;
  for (std::size_t j = 0; j < p; ++j) {
    plan.counts[j] = static_cast<int>(field(j, 0));
    plan.displacements[j] = offset;
    offset += plan.counts[j];
  }
  return plan;
}

//! What screen_headers found in the gathered headers (gathered_header_fields per rank).
struct header_screen {
  int invalid_rank = -1;           //!< first rank that announced invalid arguments, or -1.
  int settings_mismatch_rank = -1; //!< first rank whose settings differ from rank 0's, or -1.
};

//! @brief The checks sparse_allgather makes before planning, in rank order: the first rank
//! whose bytes field is invalid_arguments_bytes, and the first rank whose settings fingerprint
//! (the last field) differs from rank 0's. O(P); the same result on every rank that gathered
//! the same headers. @throws std::invalid_argument if `gathered` is empty or not a multiple of
//! gathered_header_fields.
[[nodiscard]] inline header_screen screen_headers(std::span<const std::int64_t> gathered) {
  if (gathered.empty() || gathered.size() % gathered_header_fields != 0) {
    throw std::invalid_argument(gradcomp::detail::concat(
        "gradcomp: sparse_allgather: ", gathered.size(),
        " header values are not a positive multiple of ", gathered_header_fields));
  }
  header_screen screen;
  const std::size_t p = gathered.size() / gathered_header_fields;
  const std::int64_t settings = gathered[gathered_header_fields - 1];
  for (std::size_t j = 0; j < p; ++j) {
    const std::int64_t* h = gathered.data() + gathered_header_fields * j;
    if (screen.invalid_rank < 0 && h[0] == invalid_arguments_bytes) {
      screen.invalid_rank = static_cast<int>(j);
    }
    if (screen.settings_mismatch_rank < 0 && h[gathered_header_fields - 1] != settings) {
      screen.settings_mismatch_rank = static_cast<int>(j);
    }
  }
  return screen;
}

//! @brief The plan's fields (the first allgather_header_fields of each rank) of gathered
//! headers, into `out` (resized). O(P).
inline void plan_fields(std::span<const std::int64_t> gathered, std::vector<std::int64_t>& out) {
  const std::size_t p = gathered.size() / gathered_header_fields;
  out.resize(allgather_header_fields * p);
  for (std::size_t j = 0; j < p; ++j) {
    for (std::size_t f = 0; f < allgather_header_fields; ++f) {
      out[allgather_header_fields * j + f] = gathered[gathered_header_fields * j + f];
    }
  }
}

} // namespace gradcomp::mpi::detail
