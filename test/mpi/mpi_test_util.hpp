// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the MPI tests: seeded per-rank data and the cross-rank bit-identity check.
#pragma once

#include <mpi.h>

#include <bit>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace gradcomp::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

//! FNV-1a over the bit patterns of the values.
inline std::uint64_t bits_hash(std::span<const float> values) {
  std::uint64_t h = 1469598103934665603ull;
  for (float v : values) {
    h = (h ^ std::bit_cast<std::uint32_t>(v)) * 1099511628211ull;
  }
  return h;
}

//! True on every rank when every rank holds bit-identical values (MPI_Allgather of hashes).
inline bool identical_on_all_ranks(std::span<const float> values) {
  const std::uint64_t mine = bits_hash(values);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::uint64_t h : all) {
    if (h != all[0]) {
      return false;
    }
  }
  return true;
}

//! Number of MPI_Request_free calls on this rank so far on a request that had not completed,
//! counted by the test executable's own MPI_Request_free (native_allreduce_test.cpp). gradcomp
//! makes none: a dropped operation completes its requests instead (detail::abandon).
int active_request_frees();

//! Rank `rank`'s gradient for a test: n seeded normal values.
inline std::vector<float> rank_values(std::size_t n, int rank, std::uint64_t salt) {
  std::mt19937_64 rng(salt * 1000003 + static_cast<std::uint64_t>(rank));
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) {
    v = normal(rng);
  }
  return x;
}

} // namespace gradcomp::test
