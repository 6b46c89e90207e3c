// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The tiles of the threshold filter (select.cuh's select_at_least): both backends count
//! per tile of filter_tile_elements consecutive elements, and the scan of those counts gives each
//! tile's first output position. The device's kernels (filter_kernels.cuh) run one block of
//! filter_threads threads per tile, filter_rows elements per thread.
#pragma once

#include <cstddef>

namespace gradcomp::cuda::detail {

inline constexpr unsigned filter_threads = 256;
inline constexpr unsigned filter_rows = 16;

//! Elements of one filter tile (4096).
inline constexpr std::size_t filter_tile_elements = std::size_t{filter_threads} * filter_rows;

//! Number of filter tiles of n elements: ceil(n / filter_tile_elements).
inline constexpr std::size_t filter_tiles(std::size_t n) noexcept {
  return (n + filter_tile_elements - 1) / filter_tile_elements;
}

} // namespace gradcomp::cuda::detail
