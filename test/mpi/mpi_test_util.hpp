// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the MPI tests: seeded per-rank data and the cross-rank bit-identity checks
//! (one result at a time, or many results of a test case with one collective).
//!
//! The helpers' collectives are nonblocking, completed by MPI_Test in a loop that gives the
//! core away (as gradcomp's waits do, wait_policy.hpp): MPICH's blocking collectives busy-poll,
//! which costs milliseconds per call when ranks outnumber cores (8 ms for one MPI_Allgather of
//! one int on 3 ranks, 15 ms on 5, on a 2-core machine).
#pragma once

#include <mpi.h>

#include <bit>
#include <cstdint>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/catch.hpp"

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

//! Completes `request` by MPI_Test in a loop that yields the core between tests.
inline void wait_yielding(MPI_Request& request) {
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done == 0) {
    std::this_thread::yield();
  }
  REQUIRE(done != 0);
}

//! Every rank's `mine`, rank after rank (MPI_Iallgather over MPI_COMM_WORLD, completed by
//! wait_yielding). Collective: every rank passes the same number of values.
inline std::vector<std::uint64_t> allgather_on_all_ranks(std::span<const std::uint64_t> mine) {
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(world_size()));
  MPI_Request request = MPI_REQUEST_NULL;
  REQUIRE(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                         static_cast<int>(mine.size()), MPI_UINT64_T, MPI_COMM_WORLD,
                         &request) == MPI_SUCCESS);
  wait_yielding(request);
  return all;
}

//! The element-wise sum of every rank's `mine` (MPI_Iallreduce with MPI_SUM over
//! MPI_COMM_WORLD, completed by wait_yielding). Collective: every rank passes the same length.
inline std::vector<float> sum_on_all_ranks(std::span<const float> mine) {
  std::vector<float> sum(mine.size());
  MPI_Request request = MPI_REQUEST_NULL;
  REQUIRE(MPI_Iallreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, &request) == MPI_SUCCESS);
  wait_yielding(request);
  return sum;
}

//! True on every rank when `local` holds on every rank (MPI_Iallreduce of MPI_MIN).
inline bool on_all_ranks(bool local) {
  const int mine = local ? 1 : 0;
  int all = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  REQUIRE(MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &request) ==
          MPI_SUCCESS);
  wait_yielding(request);
  return all == 1;
}

//! True on every rank when every rank holds bit-identical values (an allgather of hashes).
inline bool identical_on_all_ranks(std::span<const float> values) {
  const std::uint64_t mine = bits_hash(values);
  const std::vector<std::uint64_t> all = allgather_on_all_ranks(std::span(&mine, 1));
  for (std::uint64_t h : all) {
    if (h != all[0]) {
      return false;
    }
  }
  return true;
}

//! The arguments written one after another (a combination's description for identity_batch).
template <class... T>
std::string describe(const T&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

//! @brief identical_on_all_ranks for many results with one collective: each rank add()s every
//! result of a test case (its hash, with a description of the combination that produced it) in
//! the same order, and check() then compares them across ranks at once: one CHECK per result,
//! which fails, naming the combination, when some rank's bits differ. A test case calls check()
//! once, on every rank (it is collective over MPI_COMM_WORLD); when the ranks added different
//! numbers of results, every rank fails one REQUIRE instead.
class identity_batch {
public:
  //! Records `values` (their bits_hash) as the result of `combination`.
  void add(std::span<const float> values, std::string combination) {
    hashes_.push_back(bits_hash(values));
    combinations_.push_back(std::move(combination));
  }

  //! Collective: CHECKs, result by result, that every rank recorded the same bits.
  void check() const {
    const std::uint64_t count = hashes_.size();
    const std::vector<std::uint64_t> counts = allgather_on_all_ranks(std::span(&count, 1));
    bool same_count = true;
    for (const std::uint64_t c : counts) {
      same_count = same_count && c == count;
    }
    {
      INFO("results recorded on this rank: " << count);
      REQUIRE(same_count); // the same decision on every rank: nothing more is gathered
    }
    const std::vector<std::uint64_t> all = allgather_on_all_ranks(hashes_);
    for (std::size_t i = 0; i < hashes_.size(); ++i) {
      bool same = true;
      for (std::size_t k = 0; k < counts.size(); ++k) {
        same = same && all[k * hashes_.size() + i] == hashes_[i];
      }
      INFO("identical on all ranks: " << combinations_[i]);
      CHECK(same);
    }
  }

private:
  std::vector<std::uint64_t> hashes_;
  std::vector<std::string> combinations_;
};

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

//! The sum over ranks 0 .. ranks-1 of rank_values(n, rank, salt), added in double and rounded
//! to float: a reference for a float allreduce that every rank computes alike, without MPI
//! (MPI_Allreduce's float sum is within its own rounding of it).
inline std::vector<float> sum_of_rank_values(std::size_t n, int ranks, std::uint64_t salt) {
  std::vector<double> sum(n, 0.0);
  for (int rank = 0; rank < ranks; ++rank) {
    const std::vector<float> x = rank_values(n, rank, salt);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] += x[i];
    }
  }
  return std::vector<float>(sum.begin(), sum.end());
}

} // namespace gradcomp::test
