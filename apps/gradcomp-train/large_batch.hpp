// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's large-batch options (S4; docs/large-batch.md): the precision of the
//! sent values, loss scaling agreed across ranks, and the update rule (momentum SGD or LARS) with
//! a learning-rate warm-up. The library pieces are gradcomp::loss_scale, gradcomp::has_overflow,
//! gradcomp::mpi::any_rank, pipeline::rescale_state / drop_non_finite_state and
//! gradcomp::lars_step; this file wires them to LibTorch parameters.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/tool_support.hpp"
#include "exchange.hpp"

namespace gradcomp_train {

//! --precision, --loss-scale, --optimizer, --warmup-epochs, --lr-decay, --trust-coefficient,
//! --weight-decay and the testing option --inject-overflow-at.
struct large_batch_settings {
  std::string precision = "fp32";  //!< type of every sent value: fp32, fp16 or bf16
  std::string loss_scale = "none"; //!< none, dynamic, or a fixed scale (a positive number)
  std::string optimizer = "sgd";   //!< sgd (LibTorch's momentum SGD) or lars
  double warmup_epochs = 0.0;      //!< linear learning-rate warm-up, epochs (>= 0)
  //! After the warm-up: auto (poly for lars, none for sgd), none (constant), poly (power 2 to
  //! 0 at the end of training) or step (x lr_decay_factor at each of lr_decay_epochs).
  std::string lr_decay = "auto";
  std::vector<double> lr_decay_epochs; //!< step: the epochs (ascending) the rate drops at
  double lr_decay_factor = 0.1;        //!< step: the multiplier at each of them, in (0, 1]
  double trust_coefficient = 0.001;    //!< LARS's eta
  double weight_decay = 5e-4;          //!< LARS's beta (not on 1-D tensors: biases, batch norm)
  //! Testing: at this global iteration (0-based) the last rank puts +infinity into the first
  //! element of each gradient it reports; -1 = never.
  std::int64_t inject_overflow_at = -1;
};

inline const std::vector<std::string> precision_names = {"fp32", "fp16", "bf16"};
inline const std::vector<std::string> optimizer_names = {"sgd", "lars"};
inline const std::vector<std::string> lr_decay_names = {"auto", "none", "poly", "step"};

//! The decay after the warm-up --lr-decay asks for: none, poly or step (auto: poly with lars,
//! none with sgd).
inline std::string effective_lr_decay(const large_batch_settings& s) {
  if (s.lr_decay == "auto") {
    return s.optimizer == "lars" ? "poly" : "none";
  }
  return s.lr_decay;
}

//! The decay as the checkpoint and the report record it: none, poly, or "step at E1,E2 x F"
//! (the epochs and the factor, each the shortest text that reads back to the same double).
inline std::string lr_decay_text(const large_batch_settings& s) {
  const std::string d = effective_lr_decay(s);
  if (d != "step") {
    return d;
  }
  const auto text = [](double v) {
    std::array<char, 32> b{};
    const auto r = std::to_chars(b.data(), b.data() + b.size(), v);
    return std::string(b.data(), r.ptr);
  };
  std::string t = "step at ";
  for (std::size_t i = 0; i < s.lr_decay_epochs.size(); ++i) {
    t += (i == 0 ? "" : ",") + text(s.lr_decay_epochs[i]);
  }
  return t + " x " + text(s.lr_decay_factor);
}

//! The iteration from which on epoch fraction `epochs` counts as reached: floor(epochs x
//! iterations_per_epoch): the learning-rate warm-up's length in steps and each step decay's
//! first iteration (a drop at the warm-up's length is its end).
inline std::size_t first_iteration_at(double epochs, std::int64_t iterations_per_epoch) {
  return static_cast<std::size_t>(epochs * static_cast<double>(iterations_per_epoch));
}

//! "" or why --lr-decay-epochs cannot be a step schedule at `iterations_per_epoch`: two of its
//! epochs falling on the same iteration (check_options() checked the rest). The same on every
//! rank.
inline std::string lr_decay_problem(const large_batch_settings& s,
                                    std::int64_t iterations_per_epoch) {
  if (effective_lr_decay(s) != "step") {
    return {};
  }
  for (std::size_t i = 1; i < s.lr_decay_epochs.size(); ++i) {
    const std::size_t at = first_iteration_at(s.lr_decay_epochs[i], iterations_per_epoch);
    if (at == first_iteration_at(s.lr_decay_epochs[i - 1], iterations_per_epoch)) {
      return gradcomp_tools::format("--lr-decay-epochs %g and %g fall on the same iteration %zu "
                                    "(%lld iterations per epoch)",
                                    s.lr_decay_epochs[i - 1], s.lr_decay_epochs[i], at,
                                    static_cast<long long>(iterations_per_epoch));
    }
  }
  return {};
}

//! The value type called `name` (one of precision_names).
inline gradcomp::value_type wire_type(const std::string& name) {
  if (const auto t = gradcomp::value_type_from_string(name)) {
    return *t;
  }
  throw std::invalid_argument("unknown precision '" + name + "'");
}

//! The loss scale --loss-scale asks for: none (std::nullopt), dynamic (the library's defaults),
//! or a fixed scale S (static: never changes; overflowing steps are still skipped).
//! @throws std::invalid_argument naming the value if it is none of these.
inline std::optional<gradcomp::loss_scale> make_loss_scale(const std::string& s) {
  if (s == "none") {
    return std::nullopt;
  }
  if (s == "dynamic") {
    return gradcomp::loss_scale();
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(v > 0.0) || v > 1e30) {
    throw std::invalid_argument("--loss-scale '" + s +
                                "': expected none, dynamic or a number in (0, 1e30]");
  }
  return gradcomp::loss_scale(
      {.initial_scale = v, .dynamic = false, .min_scale = v, .max_scale = v});
}

//! The per-step learning rate: linear warm-up over the first `warmup_epochs` (from base / W to
//! base over W iterations), then constant, polynomial decay of power 2 to 0 at the end of
//! training (gradcomp::warmup_poly_schedule; --lr-decay poly, or lars by default, as [YOU17]
//! train it; docs/references.md), or step decay (gradcomp::warmup_step_schedule; --lr-decay step:
//! x --lr-decay-factor from iteration floor(E x I) on for each E of --lr-decay-epochs).
class learning_rate_schedule {
public:
  learning_rate_schedule(double base,
                         const large_batch_settings& s,
                         std::int64_t iterations_per_epoch,
                         int epochs)
      : decay_(effective_lr_decay(s)) {
    const auto total = static_cast<std::size_t>(iterations_per_epoch) * epochs;
    auto warmup = first_iteration_at(s.warmup_epochs, iterations_per_epoch);
    warmup = std::min(warmup, total == 0 ? 0 : total - 1);
    poly_ = {.base = base, .warmup_steps = warmup, .total_steps = std::max<std::size_t>(total, 1)};
    poly_.validate();
    step_ = {.base = base, .warmup_steps = warmup, .milestones = {}, .factor = s.lr_decay_factor};
    if (decay_ == "step") {
      for (const double e : s.lr_decay_epochs) { // lr_decay_problem() checked them
        step_.milestones.push_back(first_iteration_at(e, iterations_per_epoch));
      }
      step_.validate();
    }
  }
  [[nodiscard]] double at(std::int64_t iteration) const {
    const auto s = static_cast<std::size_t>(iteration);
    if (decay_ == "step") {
      return step_.at(s);
    }
    return s < poly_.warmup_steps || decay_ == "poly" ? poly_.at(s) : poly_.base;
  }

private:
  std::string decay_;
  gradcomp::warmup_poly_schedule poly_;
  gradcomp::warmup_step_schedule step_;
};

//! The update applied to the averaged, unscaled gradients in .grad: LibTorch's SGD (momentum
//! `sgd_momentum`, as before these options existed) or LARS (gradcomp::lars_step per tensor in
//! fp32, momentum `sgd_momentum`, weight decay and trust coefficient from the settings, none on
//! 1-D tensors: biases and batch-norm parameters, S4's rule). The learning rate of each step
//! comes from a learning_rate_schedule.
class update_rule {
public:
  update_rule(std::vector<torch::Tensor> params,
              const large_batch_settings& s,
              double lr,
              double sgd_momentum)
      : params_(std::move(params)), lars_(s.optimizer == "lars"),
        sgd_(params_, torch::optim::SGDOptions(lr).momentum(sgd_momentum)),
        options_{.momentum = sgd_momentum,
                 .weight_decay = s.weight_decay,
                 .trust_coefficient = s.trust_coefficient} {
    if (lars_) {
      for (const torch::Tensor& p : params_) {
        velocity_.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
      }
    }
  }
  //! Checkpoint: the optimizer's state into `w`: LARS's velocities, or LibTorch's
  //! serialization of the SGD state (momentum buffers) as bytes.
  void save_state(gradcomp::state_writer& w) const {
    w.tag("update_rule");
    w.flag(lars_);
    for (const std::vector<float>& v : velocity_) {
      w.floats(v);
    }
    if (!lars_) {
      std::ostringstream sgd(std::ios::binary);
      torch::save(sgd_, sgd);
      w.string(sgd.str());
    }
  }
  //! Reads what save_state() wrote; the returned function applies it (so that every check of
  //! the checkpoint can run before anything changes). @throws gradcomp::state_error if the
  //! optimizer or a tensor's size differs.
  std::function<void()> load_state(gradcomp::state_reader& r) {
    r.expect_tag("update_rule");
    if (r.flag("optimizer is lars") != lars_) {
      throw gradcomp::state_error("gradcomp-train: the checkpoint was written with another "
                                  "--optimizer");
    }
    std::vector<std::vector<float>> velocity = velocity_;
    for (std::vector<float>& v : velocity) {
      r.floats_into("lars velocity", v);
    }
    std::string sgd = lars_ ? std::string() : r.string("sgd state", std::uint64_t{1} << 40);
    return [this, velocity = std::move(velocity), sgd = std::move(sgd)]() mutable {
      velocity_ = std::move(velocity);
      if (!lars_) {
        std::istringstream in(sgd, std::ios::binary);
        torch::load(sgd_, in);
      }
    };
  }

  //! One step at learning rate `lr`.
  void step(double lr) {
    if (!lars_) {
      for (auto& group : sgd_.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      }
      sgd_.step();
      return;
    }
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      torch::Tensor& p = params_[i];
      const torch::Tensor g = p.grad().contiguous();
      const auto n = static_cast<std::size_t>(p.numel());
      gradcomp::lars_step(std::span<float>(p.data_ptr<float>(), n),
                          std::span<const float>(g.data_ptr<float>(), n), velocity_[i], lr,
                          options_, {.weight_decay = p.dim() > 1});
    }
  }

private:
  std::vector<torch::Tensor> params_;
  bool lars_;
  torch::optim::SGD sgd_;
  gradcomp::lars_options options_;
  std::vector<std::vector<float>> velocity_;
};

//! Loss scaling and skipped steps in the training loop (docs/large-batch.md): scale() multiplies
//! the loss before backward; note() checks each reported gradient on this rank; after the
//! exchange, settle() agrees on overflow (and, with --nonfinite skip_step, on a non-finite
//! gradient value any rank's compressors counted) across ranks (gradcomp::mpi::any_rank: every
//! rank must call it); on a skipped step every rank gives the values it sent back to its error
//! feedback (pipeline::return_sent: nothing is lost) and drops the non-finite values left in it;
//! on an applied one it unscales the averaged gradients; the error feedback follows the scale.
//! Without --loss-scale (none) and skip_step everything is a no-op and no collective is called.
class loss_scaling {
public:
  loss_scaling(const large_batch_settings& s,
               gradcomp::nonfinite_policy nonfinite,
               int rank,
               int ranks)
      : scale_(make_loss_scale(s.loss_scale)), wire_(wire_type(s.precision)),
        inject_at_(s.inject_overflow_at), injector_(rank == ranks - 1),
        skip_nonfinite_(nonfinite == gradcomp::nonfinite_policy::skip_step) {}

  [[nodiscard]] bool enabled() const noexcept { return scale_.has_value(); }
  [[nodiscard]] double scale() const noexcept { return scale_ ? scale_->scale() : 1.0; }

  //! The gradient to report at global iteration `it`: `grad` itself, or (testing) a copy with
  //! +infinity first. Records whether it overflows. Called from the backward hooks.
  std::span<const float> note(std::int64_t it, std::span<const float> grad) {
    if (it == inject_at_ && injector_ && !grad.empty()) {
      injected_.emplace_back(grad.begin(), grad.end());
      injected_.back()[0] = std::numeric_limits<float>::infinity();
      grad = injected_.back();
    }
    if (scale_) {
      overflow_ = overflow_ || gradcomp::has_overflow(grad, wire_);
    }
    return grad;
  }

  //! After the exchange (every rank): whether to apply this step. Unscales `params`' .grad in
  //! place when it is applied; rescales `exchange`'s state (null: transport none).
  bool settle(const gradcomp::mpi::communicator& comm,
              std::vector<torch::Tensor>& params,
              gradient_exchange* exchange) {
    injected_.clear();
    const bool skip_policy = skip_nonfinite_ && exchange != nullptr;
    if (!scale_ && !skip_policy) {
      return true;
    }
    if (skip_policy) { // --nonfinite skip_step: this rank's compressors counted a NaN / inf
      overflow_ = overflow_ || exchange->last_stats().nonfinite > 0;
    }
    if (!scale_) {
      const bool skip = gradcomp::mpi::any_rank(overflow_, comm);
      overflow_ = false;
      if (skip) {
        ++skipped_nonfinite_;
        returned_ += exchange->return_sent();
        dropped_ += exchange->drop_non_finite_state();
      }
      return !skip;
    }
    if (exchange == nullptr) { // transport none: no hook saw the gradients, check .grad here
      for (const torch::Tensor& p : params) {
        const torch::Tensor g = p.grad().contiguous();
        overflow_ = overflow_ || gradcomp::has_overflow(
                                     std::span<const float>(g.data_ptr<float>(),
                                                            static_cast<std::size_t>(g.numel())),
                                     wire_);
      }
    }
    const bool overflow = gradcomp::mpi::any_rank(overflow_, comm);
    overflow_ = false;
    const double used = scale_->scale();
    const gradcomp::loss_scale_step step = scale_->update(overflow);
    if (step.apply) {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : params) {
        p.mutable_grad().mul_(1.0 / used);
      }
    }
    if (exchange != nullptr) {
      if (!step.apply) { // in the old scale's units, before the rescale
        returned_ += exchange->return_sent();
      }
      exchange->rescale_state(static_cast<float>(step.factor));
      if (!step.apply) {
        dropped_ += exchange->drop_non_finite_state();
      }
    }
    return step.apply;
  }

  //! Checkpoint: the loss scale's counters (gradcomp::loss_scale_state), if scaling is on.
  void save_state(gradcomp::state_writer& w) const {
    w.tag("loss_scaling");
    w.flag(scale_.has_value());
    if (scale_) {
      const gradcomp::loss_scale_state st = scale_->state();
      w.f64(st.scale);
      w.u64(st.clean_in_a_row);
      w.u64(st.steps);
      w.u64(st.skipped_steps);
    }
    w.u64(dropped_);
  }
  //! Reads what save_state() wrote; the returned function applies it. @throws
  //! gradcomp::state_error if scaling was on in one run and off in the other, or the scale is
  //! outside the options' range.
  std::function<void()> load_state(gradcomp::state_reader& r) {
    r.expect_tag("loss_scaling");
    if (r.flag("loss scaling on") != scale_.has_value()) {
      throw gradcomp::state_error("gradcomp-train: the checkpoint was written with another "
                                  "--loss-scale");
    }
    std::optional<gradcomp::loss_scale> scale = scale_;
    if (scale) {
      gradcomp::loss_scale_state st;
      st.scale = r.f64("loss scale");
      st.clean_in_a_row = r.u64("loss scale clean steps");
      st.steps = r.u64("loss scale steps");
      st.skipped_steps = r.u64("loss scale skipped steps");
      try {
        scale->restore(st);
      } catch (const std::invalid_argument& e) {
        throw gradcomp::state_error(e.what());
      }
    }
    const std::uint64_t dropped = r.u64("dropped values");
    return [this, scale, dropped] {
      scale_ = scale;
      dropped_ = dropped;
    };
  }

  //! Steps skipped for overflow (loss scaling) or, without loss scaling, for a non-finite
  //! gradient value (--nonfinite skip_step).
  [[nodiscard]] std::uint64_t skipped_steps() const noexcept {
    return scale_ ? scale_->skipped_steps() : skipped_nonfinite_;
  }
  //! Values the skipped steps gave back to the error feedback (return_sent), since the start
  //! of this process.
  [[nodiscard]] std::uint64_t returned_values() const noexcept { return returned_; }
  [[nodiscard]] std::uint64_t dropped_values() const noexcept { return dropped_; }

private:
  std::optional<gradcomp::loss_scale> scale_;
  gradcomp::value_type wire_;
  std::int64_t inject_at_;
  bool injector_;
  bool skip_nonfinite_;
  bool overflow_ = false;
  std::uint64_t dropped_ = 0;
  std::uint64_t skipped_nonfinite_ = 0;      // not in checkpoints
  std::uint64_t returned_ = 0;               // not in checkpoints
  std::vector<std::vector<float>> injected_; // testing copies, alive until settle()
};

} // namespace gradcomp_train
