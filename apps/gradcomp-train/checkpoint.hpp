// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --checkpoint / --resume (docs/checkpoint.md): every rank writes its
//! state into DIR as rank-R.state, one gradcomp checkpoint container: every option that decides
//! the results (checked on resume, naming the option that differs), the position in training,
//! the data-parallel parameters, the optimizer's state (LARS's velocities, or LibTorch's
//! serialization of SGD's momentum buffers), loss scaling's counters, and the pipeline's whole
//! compression state last. A resumed run rebuilds everything from the same options, loads these
//! and continues bit for bit.
#pragma once

#include <gradcomp/gradcomp.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
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

//! This rank's checkpoint file in `dir`.
inline std::string checkpoint_state_path(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".state";
}

//! The checkpoint before it: write_checkpoint keeps one generation back, so that a job killed
//! while its ranks wrote a new checkpoint (some ranks have it, some not) can still resume from
//! the previous one, which every rank has.
inline std::string previous_checkpoint_path(const std::string& path) {
  return path + ".previous";
}

//! Every option that decides the results of the training from a checkpoint on, by name, as
//! text (written into the checkpoint and compared on resume). Not: --report, --label, --threads,
//! the timing and tracing options, --merge and --bucket-mib (the pipeline's grouping is in the
//! state), --epochs (a resumed run may train longer; --lr-decay poly then follows the new length).
inline std::vector<std::pair<std::string, std::string>> result_options(const train_options& o,
                                                                       int ranks) {
  const auto num = [](double v) {
    std::ostringstream t;
    t.precision(17);
    t << v;
    return t.str();
  };
  const large_batch_settings& lb = o.large_batch;
  const fidelity_settings& fs = o.fidelity;
  return {{"ranks", std::to_string(ranks)},
          {"--batch-size", std::to_string(o.batch_size)},
          {"--seed", std::to_string(o.seed)},
          {"--train-limit", std::to_string(o.train_limit)},
          {"--model", o.model},
          {"--method", o.method.name},
          {"--density", num(o.method.compressor.density)},
          {"--interval", std::to_string(o.method.compressor.interval)},
          {"--levels", std::to_string(o.method.compressor.levels)},
          {"--quantization-bucket", std::to_string(quantization_bucket_option(o.method))},
          {"--dense-below", std::to_string(o.method.dense_below)},
          {"--compression-scope", o.method.scope},
          {"--transport", o.transport.name},
          {"--servers", std::to_string(o.transport.servers)},
          {"--group-size", std::to_string(o.transport.group_size)},
          {"--lr", num(o.lr)},
          {"--momentum", num(o.momentum)},
          {"--momentum-correction", o.momentum_correction ? "true" : "false"},
          {"--factor-masking", o.factor_masking ? "true" : "false"},
          {"--precision", lb.precision},
          {"--loss-scale", lb.loss_scale},
          {"--optimizer", lb.optimizer},
          {"--warmup-epochs", num(lb.warmup_epochs)},
          {"--lr-decay", lr_decay_text(lb)}, // step: with its epochs and factor
          {"--trust-coefficient", num(lb.trust_coefficient)},
          {"--weight-decay", num(lb.weight_decay)},
          {"--density-warmup-epochs", num(fs.density_warmup_epochs)},
          // the initial density decides nothing without a density warm-up
          {"--warmup-initial-density",
           fs.density_warmup_epochs > 0 ? num(fs.warmup_initial_density) : "-"},
          {"--factor-masking-after-warmup", fs.mask_after_warmup ? "true" : "false"},
          {"--warmup-stepped",
           fs.density_warmup_epochs > 0 ? (fs.warmup_stepped ? "true" : "false") : "-"},
          {"--clip-norm", num(fs.clip_norm)}};
}

//! @brief One rank's training state as one gradcomp state (gradcomp::has_binary_state): refers
//! to the trainer's objects, so loading restores them in place, after every check of the
//! checkpoint passed (the pipeline, which comes last, checks the end of the payload). Not
//! copyable (gradcomp::load_state then loads it in place).
class trainer_state {
public:
  trainer_state(const train_options& o,
                int ranks,
                training_position& position,
                std::vector<torch::Tensor>& params,
                update_rule& update,
                loss_scaling& scaling,
                gradient_exchange* exchange)
      : o_(o), ranks_(ranks), position_(position), params_(params), update_(update),
        scaling_(scaling), exchange_(exchange) {}
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
    update_.save_state(w);
    scaling_.save_state(w);
    w.flag(exchange_ != nullptr);
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
    const std::function<void()> update = update_.load_state(r);
    const std::function<void()> scaling = scaling_.load_state(r);
    if (r.flag("pipeline present") != (exchange_ != nullptr)) {
      throw gradcomp::state_error("gradcomp-train: the checkpoint was written with another "
                                  "--transport (none against a pipeline)");
    }
    if (exchange_ != nullptr) {
      exchange_->load_state(r); // checks the end of the payload, then commits the pipeline
    } else {
      r.require_end();
    }
    // everything read and checked: commit (only LibTorch's reading of SGD's bytes can still fail
    // now; gradcomp-train then stops the job)
    update();
    scaling();
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      std::memcpy(params_[i].data_ptr<float>(), values[i].data(), values[i].size() * 4);
    }
    position_ = at;
  }

private:
  // what must be the same for the run to continue as it was: checked on load, naming the option
  void write_shape(gradcomp::state_writer& w) const {
    const auto options = result_options(o_, ranks_);
    w.u64(options.size());
    for (const auto& [name, value] : options) {
      w.string(name);
      w.string(value);
    }
  }
  void check_shape(gradcomp::state_reader& r) const {
    const auto options = result_options(o_, ranks_);
    r.expect_u64("the number of recorded options", options.size());
    for (const auto& [name, value] : options) {
      const std::string got_name = r.string("option name");
      const std::string got = r.string(name);
      if (got_name != name) {
        throw gradcomp::state_error("gradcomp-train: the checkpoint records option " + got_name +
                                    " where this version records " + name);
      }
      if (got != value) {
        throw gradcomp::state_error("gradcomp-train: the checkpoint was written with " + name +
                                    " " + got + ", this run has " + value);
      }
    }
  }

  const train_options& o_;
  int ranks_;
  training_position& position_;
  std::vector<torch::Tensor>& params_;
  update_rule& update_;
  loss_scaling& scaling_;
  gradient_exchange* exchange_;
};

//! Writes `state` to `path` through a temporary file; the checkpoint that was at `path` becomes
//! previous_checkpoint_path(path) (two renames, so a preempted write leaves at least the
//! previous checkpoint intact). @throws std::runtime_error if writing fails.
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
  const std::string previous = previous_checkpoint_path(path);
  if (std::ifstream(path).good() && std::rename(path.c_str(), previous.c_str()) != 0) {
    throw std::runtime_error("gradcomp-train: cannot rename " + path + " to " + previous);
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
