// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::column_slice and column_split: how a model-parallel fully connected layer's
//! N outputs are split over P ranks (S2: weights split by output dimension). Standard library
//! only.
#pragma once

#include <gradcomp/error.hpp>

#include <cstddef>

namespace gradcomp {

//! @brief The outputs (weight rows) one rank holds: rows [offset, offset + rows) of the N x K
//! weight and of the N-element bias.
struct column_slice {
  std::size_t offset = 0; //!< first output this rank holds.
  std::size_t rows = 0;   //!< outputs this rank holds (N / P or N / P + 1).
  //! Same offset and rows.
  friend bool operator==(const column_slice&, const column_slice&) = default;
};

//! @brief Rank `rank`'s slice of N outputs split as evenly as possible over P ranks: the first
//! N mod P ranks hold floor(N / P) + 1 outputs, the others floor(N / P); consecutive ranks hold
//! consecutive outputs. Every rank holds at least one output when N >= P. O(1), deterministic.
//! @throws std::invalid_argument if ranks < 1 or rank is outside [0, ranks).
[[nodiscard]] inline column_slice column_split(std::size_t outputs_n, int ranks, int rank) {
  detail::require(ranks >= 1, "column_split: rank count ", ranks, " is below 1");
  detail::require(rank >= 0 && rank < ranks, "column_split: rank ", rank, " is outside [0, ", ranks,
                  ")");
  const auto p = static_cast<std::size_t>(ranks);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t base = outputs_n / p;
  const std::size_t extra = outputs_n % p;
  return {r * base + (r < extra ? r : extra), base + (r < extra ? 1 : 0)};
}

} // namespace gradcomp
