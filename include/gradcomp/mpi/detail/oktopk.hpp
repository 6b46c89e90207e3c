// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The parts of gradcomp::mpi::oktopk_allreduce that need no MPI: each rank's proposal
//! of the region boundaries and the steps of the distributed radix selection of the global
//! threshold.
#pragma once

#include <gradcomp/mpi/detail/shards.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gradcomp::mpi::detail {

//! Bytes of one histogram of the radix selection: 256 counts of 4 bytes (a count, even summed
//! over the ranks, is at most the dense length: the regions are disjoint).
inline constexpr std::size_t oktopk_histogram_bytes = 256 * 4;
//! Rounds of the radix selection: one per byte of a 32-bit magnitude key.
inline constexpr int oktopk_radix_rounds = 4;

//! The magnitude of `v` as an unsigned key that orders like |v| (sign bit cleared; NaNs above
//! infinity). O(1).
[[nodiscard]] inline std::uint32_t magnitude_key(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
}

//! This rank's proposal of the ranks - 1 inner region boundaries of a dense length n (Ok-Topk's
//! space repartition, Li & Hoefler 2022, Sec. 3.1): the index at position floor(j nnz / P) of
//! its selection for j = 1 .. P - 1, so that each region holds about nnz / P of its values; the
//! equal split floor(n j / P) if it carries fewer than P values or is dense. Proposals are
//! non-decreasing in j and below n (for n > 0). O(P).
inline void
propose_boundaries(const sparse_message& local, int ranks, std::vector<std::uint64_t>& out) {
  const auto p = static_cast<std::size_t>(ranks);
  const std::size_t n = local.dense_length_elements;
  out.assign(p - 1, 0);
  const std::size_t nnz = local.indices.size();
  for (std::size_t j = 1; j < p; ++j) {
    out[j - 1] = !local.dense && nnz >= p ? local.indices[j * nnz / p]
                                          : block_begin(n, static_cast<int>(j), ranks);
  }
}

//! Adds to `histogram` the number of `keys` whose bytes above `byte` (0 = least significant)
//! equal those of `prefix`, by the value of their byte `byte`. O(|keys|).
inline void add_key_histogram(std::span<const std::uint32_t> keys,
                              std::uint32_t prefix,
                              int byte,
                              std::array<std::uint32_t, 256>& histogram) noexcept {
  const int shift = 8 * byte;
  const std::uint32_t high_mask = byte == 3 ? 0u : ~0u << (shift + 8);
  for (const std::uint32_t key : keys) {
    if ((key & high_mask) == (prefix & high_mask)) {
      ++histogram[(key >> shift) & 0xffu];
    }
  }
}

//! One round of the radix selection of the `remaining`-th largest key (1-based) among the keys
//! counted in `histogram` (all ranks' counts summed): sets byte `byte` of `prefix` to the bucket
//! holding it and lowers `remaining` by the keys in the buckets above. Precondition: remaining
//! <= the histogram's total. O(256).
inline void select_bucket(const std::array<std::uint32_t, 256>& histogram,
                          int byte,
                          std::uint32_t& prefix,
                          std::uint64_t& remaining) noexcept {
  for (int b = 255; b >= 0; --b) {
    const std::uint64_t here = histogram[static_cast<std::size_t>(b)];
    if (remaining <= here || b == 0) {
      prefix |= static_cast<std::uint32_t>(b) << (8 * byte);
      return;
    }
    remaining -= here;
  }
}

} // namespace gradcomp::mpi::detail
