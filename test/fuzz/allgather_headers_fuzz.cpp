// SPDX-License-Identifier: Apache-2.0
// Fuzz target for what a sparse allgather receives from its peers before any payload: the
// gathered per-rank headers (encoded bytes, dense length, nnz), validated and planned by
// gradcomp::mpi::detail::plan_allgather (no MPI needed). Input: one flag byte (bit 0: dense
// switch), then little-endian int64 values, three per rank. Property: the planner either throws
// gradcomp::wire_error, or returns a plan that an independent check of the same headers
// confirms (bounds, totals, counts and displacements that MPI_Iallgatherv can take).
#include <gradcomp/mpi/detail/allgather_plan.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

__extension__ using wide = __int128; // exact sums of any int64 headers (GCC and clang)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = gradcomp::mpi::detail;
  if (size < 1 + 8 * d::allgather_header_fields) {
    return 0;
  }
  const bool dense_switch = (data[0] & 1u) != 0;
  const std::size_t p = (size - 1) / (8 * d::allgather_header_fields);
  std::vector<std::int64_t> headers(p * d::allgather_header_fields);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < 8; ++b) {
      v |= static_cast<std::uint64_t>(data[1 + 8 * i + b]) << (8 * b);
    }
    std::memcpy(&headers[i], &v, sizeof v);
  }
  d::allgather_plan plan;
  try {
    plan = d::plan_allgather(headers, dense_switch);
  } catch (const gradcomp::wire_error&) {
    return 0; // the documented rejection
  }
  const auto bytes = [&](std::size_t j) { return headers[3 * j]; };
  const auto length = [&](std::size_t j) { return headers[3 * j + 1]; };
  const auto nnz = [&](std::size_t j) { return headers[3 * j + 2]; };
  const std::size_t checked =
      plan.length_mismatch_rank >= 0 ? static_cast<std::size_t>(plan.length_mismatch_rank) : p;
  if (plan.length_mismatch_rank >= 0 && length(checked) == length(0)) {
    std::abort(); // a mismatch reported where the lengths agree
  }
  wide total = 0;
  for (std::size_t j = 0; j < checked; ++j) {
    if (length(j) != length(0) || length(j) < 0 || nnz(j) < 0 || nnz(j) > length(j) ||
        bytes(j) < 32 + std::min<wide>(2 * static_cast<wide>(nnz(j)),
                                       9 + (static_cast<wide>(nnz(j)) + 7) / 8) ||
        bytes(j) > 32 + 13 * static_cast<wide>(nnz(j)) + 14) {
      std::abort(); // accepted a header outside the wire format's bounds
    }
    total += bytes(j);
  }
  if (plan.length_mismatch_rank >= 0) {
    return 0;
  }
  const wide cap = wide{1} << 62;
  if (plan.total_bytes != static_cast<std::int64_t>(total < cap ? total : cap)) {
    std::abort();
  }
  if (plan.use_dense && !dense_switch) {
    std::abort(); // switched to dense although the switch is off
  }
  if (!plan.use_dense && !plan.exceeds_int_count) {
    if (total > INT_MAX || plan.counts.size() != p || plan.displacements.size() != p) {
      std::abort();
    }
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < p; ++j) {
      if (plan.counts[j] != bytes(j) || plan.displacements[j] != offset) {
        std::abort(); // counts or displacements that do not match the headers
      }
      offset += plan.counts[j];
    }
  }
  return 0;
}
