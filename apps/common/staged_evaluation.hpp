// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Staged test-set evaluation of the LibTorch programs: an evaluation far below the
//! target accuracy stops after part of the test set. scripts/ddp_train.py implements the same
//! rule, so that gradcomp-train and PyTorch DDP runs evaluate alike.
//!
//! The test set is put in a fixed random order once (test_order: epoch_order with seed
//! test_order_seed, epoch 0), so that every prefix of it, and every rank's part of a prefix, is
//! a simple random sample. An evaluation runs in S stages: stage s of rank r covers
//! stage_range(begin_r, end_r, s, S) of the rank's shard [begin_r, end_r); after every stage
//! but the last the ranks sum their counts, and the evaluation stops when even an optimistic
//! estimate of the whole set's accuracy is below the target (can_stop_early): the accuracy of
//! the images seen so far plus z standard errors of a sample of that size drawn without
//! replacement from the test set. With z = 3 a stop that should not have happened (the
//! whole set would have reached the target) has probability below 0.14 % per evaluation, and
//! costs one evaluation interval of precision in the time to target, never a wrong time.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

namespace gradcomp_apps {

//! Seed of the test set's fixed order (epoch_order(n, test_order_seed, 0)); the same in
//! scripts/ddp_train.py.
inline constexpr std::uint64_t test_order_seed = 0x7e57;

//! Standard errors of the optimistic estimate (can_stop_early).
inline constexpr double early_stop_standard_errors = 3.0;

//! Stage `s` of `stages` of the index range [begin, end): [begin + len s / S,
//! begin + len (s + 1) / S), len = end - begin. Preconditions: 0 <= s < stages, begin <= end.
inline std::pair<std::int64_t, std::int64_t>
stage_range(std::int64_t begin, std::int64_t end, int s, int stages) {
  const std::int64_t len = end - begin;
  return {begin + len * s / stages, begin + len * (s + 1) / stages};
}

//! Whether an evaluation that has classified `correct` of `seen` test images right (summed
//! over ranks) may stop before the rest of the `total`: the accuracy p = correct / seen plus
//! early_stop_standard_errors x sqrt(p (1 - p) / seen x (total - seen) / (total - 1)) (the
//! standard error of a sample mean drawn without replacement) is below `target`. False when
//! target <= 0, when nothing was seen, or when every image was seen.
inline bool
can_stop_early(std::int64_t correct, std::int64_t seen, std::int64_t total, double target) {
  if (target <= 0 || seen <= 0 || seen >= total) {
    return false;
  }
  const double p = static_cast<double>(correct) / static_cast<double>(seen);
  const double fpc = static_cast<double>(total - seen) / static_cast<double>(total - 1);
  const double se = std::sqrt(p * (1 - p) / static_cast<double>(seen) * fpc);
  return p + early_stop_standard_errors * se < target;
}

} // namespace gradcomp_apps
