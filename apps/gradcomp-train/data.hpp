// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The training data of gradcomp-train's synchronous training: the Fashion-MNIST sets, an
//! epoch cut into each rank's shard and its batches, and transport coded's global batch. The
//! epoch's order of the samples and a rank's shard of it (DistributedSampler's layout) live in
//! apps/common/sample_order.hpp, which scripts/ddp_train.py reproduces exactly.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "../common/fashion_mnist.hpp"
#include "../common/sample_order.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! The training and test sets and the cut of an epoch: every rank's shard of `per_rank` samples
//! in `iterations_per_epoch` batches of up to `batch_size` samples.
struct training_data {
  gx::dataset train_set;
  gx::dataset test_set;
  std::int64_t per_rank = 0; //!< samples in each rank's shard (padded by wrapping)
  std::int64_t iterations_per_epoch = 0;
  int batch_size = 0;

  //! Cuts the loaded training set over `ranks` ranks in batches of `batch` samples per rank.
  void cut(int ranks, int batch) {
    batch_size = batch;
    per_rank = (train_set.size() + ranks - 1) / ranks;
    iterations_per_epoch = (per_rank + batch_size - 1) / batch_size;
  }

  //! Rank `rank`'s shard (of `ranks`) of epoch `epoch`'s order of the training set.
  [[nodiscard]] std::vector<std::int64_t>
  shard(int ranks, int rank, std::uint64_t seed, int epoch) const {
    return gx::shard(train_set.size(), ranks, rank, seed, epoch);
  }

  //! The batch of up to batch_size samples of `shard_indices` from position `begin`: (images,
  //! labels).
  [[nodiscard]] std::pair<torch::Tensor, torch::Tensor>
  batch(const std::vector<std::int64_t>& shard_indices, std::int64_t begin) const {
    return shard_batch(train_set, shard_indices, per_rank, begin, batch_size);
  }
};

//! Transport coded: the samples of iteration i of all ranks together (each rank's batch of `len`
//! samples from shard position `begin` = i B), in position order: positions [begin P,
//! (begin + len) P) of the permutation `order` padded by wrapping. The same samples as the
//! union of the P shard batches of the other transports; every rank computes it alone.
inline std::vector<std::int64_t> global_batch(const std::vector<std::int64_t>& order,
                                              int ranks,
                                              std::int64_t begin,
                                              std::int64_t len) {
  const auto n = static_cast<std::int64_t>(order.size());
  std::vector<std::int64_t> samples;
  samples.reserve(static_cast<std::size_t>(len * ranks));
  for (std::int64_t p = begin * ranks; p < (begin + len) * ranks; ++p) {
    samples.push_back(order[static_cast<std::size_t>(p % n)]);
  }
  return samples;
}

} // namespace gradcomp_train
