// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::schedule::size_threshold: fixed-size gradient buckets (PyTorch DDP's
//! bucket_cap_mb, 25 MiB by default; Horovod tensor fusion).
#pragma once

#include <gradcomp/error.hpp>
#include <gradcomp/schedule/grouping.hpp>
#include <gradcomp/schedule/layer_profile.hpp>

#include <cstddef>
#include <cstdint>

namespace gradcomp::schedule {

//! @brief PyTorch DDP's default bucket cap, 25 MiB.
inline constexpr std::uint64_t ddp_bucket_bytes = 25 * 1024 * 1024;

//! @brief Buckets of consecutive layers in backward order, each closed as soon as its fp32
//! gradient bytes (4 x numel, before any compression, as DDP counts them) reach
//! `bucket_bytes`; the last bucket takes what is left. So a bucket exceeds the cap only by its
//! last layer, and a layer of at least the cap closes the bucket it joins.
//! Does not look at times or costs (DDP's static assignment; its 1 MiB first bucket is not
//! modelled). O(L); deterministic.
//! @throws std::invalid_argument if the profile is invalid or bucket_bytes is 0.
[[nodiscard]] inline grouping size_threshold(const layer_profile& profile,
                                             std::uint64_t bucket_bytes = ddp_bucket_bytes) {
  validate(profile);
  gradcomp::detail::require(bucket_bytes >= 1, "size_threshold: bucket_bytes is 0");
  const std::size_t n = profile.size();
  grouping g;
  std::size_t begin = 0;
  std::uint64_t bytes = 0;
  for (std::size_t p = 0; p < n; ++p) {
    bytes += 4 * profile.layers[forward_index(p, n)].numel;
    if (bytes >= bucket_bytes || p + 1 == n) {
      g.push_back({begin, p + 1});
      begin = p + 1;
      bytes = 0;
    }
  }
  return g;
}

} // namespace gradcomp::schedule
