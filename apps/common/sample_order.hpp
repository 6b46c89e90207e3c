// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The training samples' order of the LibTorch programs, written out so that another
//! program can reproduce it exactly: scripts/ddp_train.py (the PyTorch DDP peer of the main
//! job) implements the same three steps in Python and trains on the same batches.
//!
//! std::shuffle and std::uniform_int_distribution are not portable (libstdc++ and libc++ give
//! different permutations for the same engine), so the order is defined here:
//! 1. splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//!    OOPSLA 2014) from the state seed * 1000003 + epoch (mod 2^64);
//! 2. a uniform integer in [0, bound) by Lemire's multiply-and-reject method ("Fast random
//!    integer generation in an interval", ACM TOMACS 29(1), 2019): exact, no modulo bias;
//! 3. Durstenfeld's Fisher-Yates shuffle of 0 .. n-1, i from n-1 down to 1, swapping i with a
//!    uniform j in [0, i].
//! Golden values of the first positions are asserted in test/apps/sample_order_test.cpp and in
//! test/scripts/test_ddp_train.py, so the two implementations cannot drift apart.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace gradcomp_apps {

//! splitmix64: a 64-bit generator whose whole state is one word. Deterministic; not for
//! cryptography.
class splitmix64 {
public:
  explicit splitmix64(std::uint64_t state) noexcept : state_(state) {}

  //! The next 64-bit output.
  std::uint64_t operator()() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  //! A uniform integer in [0, bound), bound >= 1 (Lemire 2019, algorithm 5, with 128-bit
  //! products). Draws one output, or more when it rejects (probability < bound / 2^64).
  std::uint64_t below(std::uint64_t bound) noexcept {
    unsigned __int128 product = static_cast<unsigned __int128>((*this)()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        product = static_cast<unsigned __int128>((*this)()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }

private:
  std::uint64_t state_;
};

//! The epoch's permutation of the sample indices 0 .. n-1, the same on every rank and in
//! scripts/ddp_train.py: a Fisher-Yates shuffle driven by splitmix64(seed * 1000003 + epoch).
//! O(n) time and memory; n >= 0.
inline std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, int epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  splitmix64 rng(seed * 1000003u + static_cast<std::uint64_t>(epoch));
  for (std::size_t i = order.size(); i > 1; --i) {
    const std::size_t j = rng.below(i); // uniform in [0, i - 1]
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

//! PyTorch's DistributedSampler (shuffle on, drop_last off): every epoch a permutation of all
//! n samples (epoch_order), padded by wrapping to a multiple of P; rank r takes positions
//! r, r + P, ... (ceil(n / P) samples). Iteration i of every rank together therefore covers the
//! positions [i B P, (i B + len) P) of the padded permutation (B the batch per rank, len the
//! batch of that iteration). 0 <= rank < ranks.
inline std::vector<std::int64_t>
shard(std::int64_t n, int ranks, int rank, std::uint64_t seed, int epoch) {
  const std::vector<std::int64_t> order = epoch_order(n, seed, epoch);
  const std::int64_t per_rank = (n + ranks - 1) / ranks;
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank));
  for (std::int64_t j = 0; j < per_rank; ++j) {
    const std::int64_t position = (j * ranks + rank) % n;
    mine.push_back(order[static_cast<std::size_t>(position)]);
  }
  return mine;
}

} // namespace gradcomp_apps
