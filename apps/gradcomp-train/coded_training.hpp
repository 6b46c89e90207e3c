// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --transport coded (CSSGD, docs/coded.md "Training with coded
//! exchange"): per iteration, one forward + backward per part this rank owns, in
//! placement().parts_of(rank) order, over that part's samples of the global batch (the same
//! batch_size x P samples as the other transports); the hooks hand each part's gradients to the
//! multi-part pipeline, which compresses them with that part's error feedback and sends a group
//! once every part's layers of it arrived (so the last part's backward overlaps the exchange).
//! The pipeline's average is the mean over the C(P, R) parts; each part's loss is its samples'
//! summed loss times C(P, R) / (global batch), so that mean is the gradient of the global
//! batch's mean loss exactly, whatever the parts' sizes. A part with no samples (a short last
//! batch) reports zero gradients.
#pragma once

#include <gradcomp/coded.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data.hpp"
#include "exchange.hpp"
#include "setup.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! One iteration's forward and backward passes on this rank.
struct backward_times {
  double forward = 0, backward = 0;
  double loss = 0;          //!< mean over this rank's samples
  std::int64_t samples = 0; //!< this rank's samples (over its parts)
};

//! The forward and backward passes of transport coded's parts on this rank.
class coded_backward {
public:
  explicit coded_backward(sync_setup& s)
      : s_(s), zeros_(s.model.numel.empty()
                          ? 0
                          : *std::max_element(s.model.numel.begin(), s.model.numel.end()),
                      0.0f) {}

  //! The index (among this rank's parts) of the part whose backward runs.
  [[nodiscard]] std::size_t part() const noexcept { return part_; }

  //! Forward and backward of this rank's parts of iteration `it` of the epoch's permutation
  //! `order`, their gradients handed to `exchange` (by the hooks; zeros for an empty part), each
  //! part's loss also multiplied by `loss_scale`.
  backward_times run(const std::vector<std::int64_t>& order,
                     std::int64_t it,
                     gradient_exchange& exchange,
                     double loss_scale) {
    using seconds = std::chrono::duration<double>;
    const train_options& o = s_.o;
    std::vector<torch::Tensor>& params = s_.model.params;
    backward_times c;
    const std::int64_t begin = it * o.batch_size;
    const std::vector<std::int64_t> global = global_batch(
        order, s_.ranks, begin, std::min<std::int64_t>(o.batch_size, s_.data.per_rank - begin));
    const gradcomp::coded::placement& pl = *s_.coded;
    const std::span<const std::size_t> owned = pl.parts_of(s_.rank);
    const auto cross_entropy_sum =
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
    // each part's weight in the mean, times the loss scale (1 without --loss-scale)
    const double part_weight =
        static_cast<double>(pl.part_count()) / static_cast<double>(global.size()) * loss_scale;
    double loss_total = 0;
    for (std::size_t k = 0; k < owned.size(); ++k) {
      part_ = k;
      const gradcomp::coded::index_range r = pl.part_samples(owned[k], global.size());
      const auto tf = clock_type::now();
      if (r.size() == 0) {
        for (std::size_t i = 0; i < params.size(); ++i) {
          exchange.gradient_ready(k, i, std::span<const float>(zeros_.data(), s_.model.numel[i]));
        }
        c.backward += seconds_since(tf);
        continue;
      }
      const torch::Tensor index = torch::tensor(
          std::vector<std::int64_t>(global.begin() + static_cast<std::ptrdiff_t>(r.begin),
                                    global.begin() + static_cast<std::ptrdiff_t>(r.end)),
          torch::kInt64);
      clear_gradients(params);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(
          s_.model.net.module.forward(s_.data.train_set.images.index_select(0, index)),
          s_.data.train_set.labels.index_select(0, index), cross_entropy_sum);
      const auto tb = clock_type::now();
      s_.hooks.backward_start = tb;
      exchange.begin_backward();
      (loss * part_weight).backward();
      c.forward += seconds(tb - tf).count();
      c.backward += seconds_since(tb);
      loss_total += loss.item<double>();
      c.samples += static_cast<std::int64_t>(r.size());
    }
    c.loss = c.samples > 0 ? loss_total / static_cast<double>(c.samples) : 0.0;
    return c;
  }

private:
  sync_setup& s_;
  std::vector<float> zeros_; // an empty part's gradient
  std::size_t part_ = 0;
};

} // namespace gradcomp_train
