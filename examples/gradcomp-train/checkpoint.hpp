// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --checkpoint / --resume (docs/checkpoint.md): every rank writes its
//! state into DIR as rank-R.state (gradcomp's checkpoint container: the run's shape, the position
//! in training, the data-parallel parameters, the optimizer's and loss scaling's state, and the
//! pipeline's whole compression state last) and, with SGD, rank-R.sgd.pt (LibTorch's
//! serialization of the momentum buffers). A resumed run rebuilds everything from the same
//! options, loads these and continues bit for bit.
#pragma once

#include <gradcomp/gradcomp.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "exchange.hpp"
#include "large_batch.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! Where training stands: the next iteration to run.
struct training_position {
  int epoch = 0;                     //!< its epoch
  std::int64_t iteration = 0;        //!< its index within the epoch
  std::int64_t global_iteration = 0; //!< iterations done before it
};

//! This rank's files in `dir`.
inline std::string checkpoint_state_path(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".state";
}
inline std::string checkpoint_sgd_path(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".sgd.pt";
}

//! @brief One rank's training state as one gradcomp state (gradcomp::has_binary_state): refers
//! to the trainer's objects, so loading restores them in place. Not copyable (so that
//! gradcomp::load_state leaves the end check to the pipeline, which comes last).
class trainer_state {
public:
  trainer_state(const train_options& o,
                int ranks,
                training_position& position,
                std::vector<torch::Tensor>& params,
                update_rule& update,
                loss_scaling& scaling,
                gradient_exchange* exchange,
                std::string sgd_path)
      : o_(o), ranks_(ranks), position_(position), params_(params), update_(update),
        scaling_(scaling), exchange_(exchange), sgd_path_(std::move(sgd_path)) {}
  trainer_state(const trainer_state&) = delete;
  trainer_state& operator=(const trainer_state&) = delete;

  void save_state(gradcomp::state_writer& w) const {
    w.tag("gradcomp-train");
    write_shape(w);
    w.u64(static_cast<std::uint64_t>(position_.epoch));
    w.u64(static_cast<std::uint64_t>(position_.iteration));
    w.u64(static_cast<std::uint64_t>(position_.global_iteration));
    w.u64(params_.size());
    for (const torch::Tensor& p : params_) {
      const torch::Tensor c = p.detach().contiguous();
      w.floats(std::span<const float>(c.data_ptr<float>(), static_cast<std::size_t>(c.numel())));
    }
    update_.save_state(w, sgd_path_);
    scaling_.save_state(w);
    w.u8(exchange_ != nullptr ? 1 : 0);
    if (exchange_ != nullptr) {
      exchange_->save_state(w); // last: a pipeline's state ends the payload
    }
  }

  void load_state(gradcomp::state_reader& r) {
    r.expect_tag("gradcomp-train");
    check_shape(r);
    training_position at;
    at.epoch = static_cast<int>(r.u64("epoch"));
    at.iteration = static_cast<std::int64_t>(r.u64("iteration in the epoch"));
    at.global_iteration = static_cast<std::int64_t>(r.u64("iterations done"));
    r.expect_u64("data-parallel tensors", params_.size());
    std::vector<std::vector<float>> values;
    for (const torch::Tensor& p : params_) {
      values.emplace_back(static_cast<std::size_t>(p.numel()));
      r.floats_into("parameter", values.back());
    }
    update_.load_state(r, sgd_path_);
    scaling_.load_state(r);
    if (r.u8("pipeline present") != (exchange_ != nullptr ? 1 : 0)) {
      throw gradcomp::state_error("gradcomp-train: the checkpoint was written with another "
                                  "--transport (none against a pipeline)");
    }
    if (exchange_ != nullptr) {
      exchange_->load_state(r);
    } else {
      r.require_end();
    }
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      std::memcpy(params_[i].data_ptr<float>(), values[i].data(), values[i].size() * 4);
    }
    position_ = at;
  }

private:
  // what must be the same for the run to continue as it was: checked on load, naming the option
  void write_shape(gradcomp::state_writer& w) const {
    w.u64(static_cast<std::uint64_t>(ranks_));
    w.u64(static_cast<std::uint64_t>(o_.batch_size));
    w.u64(o_.seed);
    w.u64(static_cast<std::uint64_t>(o_.train_limit));
    w.string(o_.model);
    w.string(o_.method.name);
    w.string(o_.transport.name);
  }
  void check_shape(gradcomp::state_reader& r) const {
    r.expect_u64("ranks", static_cast<std::uint64_t>(ranks_));
    r.expect_u64("--batch-size", static_cast<std::uint64_t>(o_.batch_size));
    r.expect_u64("--seed", o_.seed);
    r.expect_u64("--train-limit", static_cast<std::uint64_t>(o_.train_limit));
    expect_string(r, "--model", o_.model);
    expect_string(r, "--method", o_.method.name);
    expect_string(r, "--transport", o_.transport.name);
  }
  static void expect_string(gradcomp::state_reader& r, const char* what, const std::string& v) {
    const std::string got = r.string(what);
    if (got != v) {
      throw gradcomp::state_error(std::string("gradcomp-train: the checkpoint was written with ") +
                                  what + " " + got + ", this run has " + v);
    }
  }

  const train_options& o_;
  int ranks_;
  training_position& position_;
  std::vector<torch::Tensor>& params_;
  update_rule& update_;
  loss_scaling& scaling_;
  gradient_exchange* exchange_;
  std::string sgd_path_;
};

//! Writes `state` to `path` (through a temporary file renamed over it, so that a preempted
//! write leaves the previous checkpoint intact). @throws std::runtime_error if writing fails.
inline void write_checkpoint(const trainer_state& state, const std::string& path) {
  const std::vector<std::byte> bytes = gradcomp::save_state(state);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      throw std::runtime_error("gradcomp-train: cannot write the checkpoint " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("gradcomp-train: cannot rename " + tmp + " to " + path);
  }
}

//! Loads `state` from `path`. @throws gradcomp::state_error naming what is wrong (a missing
//! file included).
inline void read_checkpoint(trainer_state& state, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw gradcomp::state_error("gradcomp-train: no checkpoint " + path);
  }
  gradcomp::load_state(state, f);
}

} // namespace gradcomp_train
