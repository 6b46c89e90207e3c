// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's accuracy remedies for sparse gradients (docs/fidelity.md):
//! --density-warmup-epochs (DGC's density warm-up, gradcomp::density_warmup), --clip-norm (DGC's
//! local gradient clipping, gradcomp::clip_by_global_norm at gradcomp::local_clip_threshold) and
//! --adaptive-density (gradcomp::adaptive_densities from each layer's share of the gradient
//! norm), and the diagnostic --residual-stats (gradcomp::residual_monitor per layer). The
//! learning-rate warm-up is --warmup-epochs (large_batch.hpp). This file wires the library
//! pieces to the training loop's hooks and step boundaries and records what they did.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exchange.hpp"

namespace gradcomp_train {

//! --density-warmup-epochs, --warmup-initial-density, --warmup-stepped,
//! --factor-masking-after-warmup, --clip-norm, --adaptive-density, --residual-stats.
struct fidelity_settings {
  //! DGC's density warm-up over this many epochs, from warmup_initial_density down to --density
  //! (exponentially; one density per epoch unless warmup_stepped is false); 0 = off.
  double density_warmup_epochs = 0.0;
  //! --warmup-stepped: one density per whole epoch (DGC) or a continuous decay (a new density
  //! every iteration; reused_threshold then selects exactly at each change).
  bool warmup_stepped = true;
  //! --factor-masking-after-warmup: with the density warm-up and --factor-masking false, switch
  //! DGC's factor masking on when the warm-up ends (the velocity kept at its high densities,
  //! where masking leaves little momentum; masked at the target, where a kept velocity feeds
  //! stale momentum).
  bool mask_after_warmup = false;
  //! --warmup-initial-density: the first density (DGC sec. 3.4: 25 %), in (0, 1]; a --density
  //! above it warms up from --density.
  double warmup_initial_density = 0.25;
  //! DGC's local gradient clipping: the global L2-norm threshold C; every rank clips its whole
  //! gradient (all layers together) at C / sqrt(P) before error feedback; 0 = off.
  double clip_norm = 0.0;
  //! Per-layer densities from each layer's share of the gradient norm, same total elements.
  bool adaptive_density = false;
  //! adaptive_density: a layer's density never falls below density / this.
  double adaptive_floor_divisor = 10.0;
  //! Per layer and epoch: the residual's norm against the gradient's and the staleness of the
  //! values sent (gradcomp::residual_monitor on this rank; float32 values only).
  bool residual_stats = false;
};

//! Why the remedies cannot run with these options (empty: they can). `method`, `transport`,
//! `scope` and `sync` are the other options' values.
inline std::string fidelity_problem(const fidelity_settings& f,
                                    const std::string& method,
                                    const std::string& transport,
                                    const std::string& scope,
                                    const std::string& sync) {
  const bool any =
      f.density_warmup_epochs > 0 || f.clip_norm > 0 || f.adaptive_density || f.residual_stats;
  if (!any) {
    return {};
  }
  if (sync != "sync") {
    return "--density-warmup-epochs, --clip-norm, --adaptive-density and --residual-stats are "
           "for --sync sync";
  }
  if (transport == "none") {
    return "--density-warmup-epochs, --clip-norm, --adaptive-density and --residual-stats need "
           "a transport (not none: there is no pipeline)";
  }
  const bool sparse = is_sparse_method(method);
  if (f.residual_stats && (!sparse || transport == "coded")) {
    return "--residual-stats needs a sparse method (not '" + method +
           "') and a transport other than coded (one residual per layer)";
  }
  if ((f.density_warmup_epochs > 0 || f.adaptive_density) && !sparse) {
    return "--density-warmup-epochs and --adaptive-density need a sparse method (not '" + method +
           "', which sends every value)";
  }
  if ((f.clip_norm > 0 || f.adaptive_density) && transport == "coded") {
    return "--clip-norm and --adaptive-density are not available with --transport coded "
           "(several parts per rank)";
  }
  if (f.adaptive_density && scope != "layer") {
    return "--adaptive-density needs --compression-scope layer (one density per layer)";
  }
  return {};
}

//! The remedies in one training run (synchronous, one part per rank). Per iteration: call
//! before_iteration() at the step boundary (before the forward pass), hand every gradient the
//! hooks see to gradient(), and after the exchange call after_iteration().
class fidelity_remedies {
public:
  //! @param numel the parameter tensors' elements, forward order.
  //! @param iterations_per_epoch iterations of one epoch (> 0).
  fidelity_remedies(const fidelity_settings& s,
                    const method_settings& method,
                    std::vector<std::size_t> numel,
                    int ranks,
                    std::int64_t iterations_per_epoch)
      : s_(s), method_(method), numel_(std::move(numel)),
        iterations_per_epoch_(static_cast<std::uint64_t>(iterations_per_epoch)),
        squares_(numel_.size(), 0.0), held_(s.clip_norm > 0 ? numel_.size() : 0) {
    if (s_.residual_stats) {
      for (const std::size_t n : numel_) {
        monitors_.emplace_back(n);
        gradients_.emplace_back(n, 0.0f);
      }
    }
    if (s_.density_warmup_epochs > 0) {
      warmup_ = gradcomp::density_warmup{
          .initial_density = std::max(s_.warmup_initial_density, method_.compressor.density),
          .final_density = method_.compressor.density,
          .warmup_epochs = s_.density_warmup_epochs,
          .stepped = s_.warmup_stepped};
      warmup_.validate();
    }
    if (s_.clip_norm > 0) {
      local_threshold_ =
          gradcomp::local_clip_threshold(s_.clip_norm, static_cast<std::size_t>(ranks));
    }
    for (std::size_t l = 0; l < numel_.size(); ++l) {
      if (numel_[l] >= method_.dense_below) {
        sparse_layers_.push_back(l);
      }
    }
  }

  [[nodiscard]] bool active() const noexcept {
    return s_.density_warmup_epochs > 0 || s_.clip_norm > 0 || s_.adaptive_density ||
           s_.residual_stats;
  }

  //! At the step boundary before global iteration `it` (0-based) whose learning rate is `lr`:
  //! sets the pipeline's density (the warm-up's, or adaptive per-layer densities of that total
  //! from the previous iteration's gradient norms, agreed across ranks). Collective with
  //! --adaptive-density (one allreduce of one double per layer).
  void before_iteration(std::int64_t it,
                        double lr,
                        gradient_exchange& exchange,
                        const gradcomp::mpi::communicator& comm) {
    const auto i = static_cast<std::uint64_t>(it);
    const std::uint64_t epoch = i / iterations_per_epoch_;
    if (s_.residual_stats && !epochs_.empty() && epochs_.back()["epoch"] != epoch) {
      close_residual_epoch();
    }
    const double total = s_.density_warmup_epochs > 0
                             ? warmup_.at_iteration(i, iterations_per_epoch_)
                             : method_.compressor.density;
    if (s_.adaptive_density && it > 0) {
      // every rank's squared norms summed: weight = the layer's norm over all local gradients
      MPI_Request r = MPI_REQUEST_NULL;
      gradcomp::mpi::check(MPI_Iallreduce(MPI_IN_PLACE, squares_.data(),
                                          static_cast<int>(squares_.size()), MPI_DOUBLE, MPI_SUM,
                                          comm.native(), &r),
                           "MPI_Iallreduce");
      gradcomp::mpi::wait(r);
      std::vector<std::size_t> n;
      std::vector<double> w;
      for (const std::size_t l : sparse_layers_) {
        n.push_back(numel_[l]);
        w.push_back(std::sqrt(squares_[l]));
      }
      layer_density_.assign(numel_.size(), total);
      if (!n.empty()) {
        const std::vector<double> d =
            gradcomp::adaptive_densities(n, w, total, total / s_.adaptive_floor_divisor);
        for (std::size_t j = 0; j < sparse_layers_.size(); ++j) {
          layer_density_[sparse_layers_[j]] = d[j];
        }
      }
      exchange.set_layer_densities(layer_density_);
    } else if ((s_.density_warmup_epochs > 0 || s_.adaptive_density) && total != current_) {
      exchange.set_density(total);
    }
    current_ = total;
    if (s_.mask_after_warmup) {
      // the warm-up is over where density_warmup::at_iteration gives the final density: the
      // same epoch, computed the same way
      const bool masking = static_cast<double>(i) / static_cast<double>(iterations_per_epoch_) >=
                           s_.density_warmup_epochs;
      if (masking != masking_) {
        exchange.set_factor_masking(masking);
        masking_ = masking;
      }
    }
    std::fill(squares_.begin(), squares_.end(), 0.0);
    // one entry per epoch this run trains (a resumed run starts at its checkpoint's epoch)
    if (epochs_.empty() || epochs_.back()["epoch"] != epoch) {
      epochs_.push_back({{"epoch", epoch}, {"density", total}, {"learning_rate", lr}});
      selected_.push_back(0);
      compressed_.push_back(0);
      clipped_.push_back(0);
    }
  }

  //! A gradient from a backward hook (`g` is read during the call only), in the loss's scale
  //! `loss_scale`: handed to `report(layer, values)` at once, or, with --clip-norm, kept until
  //! every layer of the iteration has arrived and then clipped by the whole gradient's L2 norm
  //! at C / sqrt(P) (times the loss scale) and reported in arrival order.
  template <class Report>
  void gradient(std::size_t layer, std::span<const float> g, double loss_scale, Report&& report) {
    if (held_.empty()) {
      note(layer, g);
      report(layer, g);
      return;
    }
    held_[layer].assign(g.begin(), g.end());
    order_.push_back(layer);
    if (order_.size() < numel_.size()) {
      return;
    }
    std::vector<std::span<float>> all(held_.begin(), held_.end());
    const gradcomp::clip_result c =
        gradcomp::clip_by_global_norm(all, local_threshold_ * loss_scale);
    if (c.clipped && !clipped_.empty()) {
      ++clipped_.back();
    }
    for (const std::size_t l : order_) {
      note(l, held_[l]);
      report(l, std::span<const float>(held_[l]));
    }
    order_.clear();
  }

  //! After the exchange (and a skipped step's return_sent): the iteration's selected and
  //! compressed elements (achieved density); with --residual-stats each layer's residual
  //! observed against the gradient it accumulated (`exchange` may be null without a pipeline).
  void after_iteration(const gradcomp::pipeline_iteration_stats& st,
                       const gradient_exchange* exchange) {
    if (!selected_.empty()) {
      selected_.back() += st.selected;
      compressed_.back() += st.numel;
    }
    if (s_.residual_stats && exchange != nullptr) {
      for (std::size_t l = 0; l < monitors_.size(); ++l) {
        static_cast<void>(monitors_[l].observe(exchange->residual(l), gradients_[l]));
      }
    }
  }

  //! Adds the settings to report["config"] and report() as report["fidelity"].
  void add_to(nlohmann::json& report) const {
    report["config"]["density_warmup_epochs"] = s_.density_warmup_epochs;
    report["config"]["warmup_initial_density"] = s_.warmup_initial_density;
    report["config"]["warmup_stepped"] = s_.warmup_stepped;
    report["config"]["factor_masking_after_warmup"] = s_.mask_after_warmup;
    report["config"]["clip_norm"] = s_.clip_norm;
    report["config"]["adaptive_density"] = s_.adaptive_density;
    report["config"]["residual_stats"] = s_.residual_stats;
    report["fidelity"] = this->report();
  }

  //! The report's "fidelity": settings, the local threshold, and per epoch the density asked
  //! for at its first iteration, the learning rate, the achieved density (this rank) and the
  //! iterations clipped; with --adaptive-density the last per-layer densities and the layers'
  //! elements.
  [[nodiscard]] nlohmann::json report() const {
    nlohmann::json j = {{"density_warmup_epochs", s_.density_warmup_epochs},
                        {"clip_norm", s_.clip_norm},
                        {"adaptive_density", s_.adaptive_density}};
    if (s_.density_warmup_epochs > 0) {
      j["warmup_initial_density"] = warmup_.initial_density;
    }
    if (s_.clip_norm > 0) {
      j["local_clip_threshold"] = local_threshold_;
    }
    nlohmann::json epochs = nlohmann::json::array();
    for (std::size_t e = 0; e < epochs_.size(); ++e) {
      nlohmann::json x = epochs_[e];
      x["achieved_density"] = compressed_[e] > 0 ? static_cast<double>(selected_[e]) /
                                                       static_cast<double>(compressed_[e])
                                                 : 0.0;
      x["clipped_iterations"] = clipped_[e];
      epochs.push_back(x);
    }
    j["epochs"] = epochs;
    if (s_.adaptive_density) {
      j["last_layer_densities"] = layer_density_;
      j["layer_numel"] = numel_;
      j["adaptive_min_density"] = method_.compressor.density / s_.adaptive_floor_divisor;
    }
    if (s_.residual_stats) {
      nlohmann::json r = residual_epochs_;
      if (!monitors_.empty() && monitors_.front().current_summary().iterations > 0) {
        r.push_back(
            residual_epoch_json(epochs_.empty() ? nlohmann::json(0) : epochs_.back()["epoch"]));
      }
      j["residual"] = r;
    }
    return j;
  }

private:
  void note(std::size_t layer, std::span<const float> g) {
    if (s_.adaptive_density) {
      squares_[layer] = gradcomp::sum_of_squares(g);
    }
    if (s_.residual_stats) {
      std::copy(g.begin(), g.end(), gradients_[layer].begin());
    }
  }

  // --residual-stats: one epoch's per-layer summaries (means per iteration), this rank.
  [[nodiscard]] nlohmann::json residual_epoch_json(const nlohmann::json& epoch) const {
    nlohmann::json layers = nlohmann::json::array();
    for (const gradcomp::residual_monitor& m : monitors_) {
      const gradcomp::residual_monitor::summary s = m.current_summary();
      const double it = std::max<double>(1.0, static_cast<double>(s.iterations));
      layers.push_back(
          {{"numel", m.numel()},
           {"residual_to_gradient_norm", s.mean_residual_to_gradient},
           {"mean_gradient_norm", s.total.gradient_norm / it},
           {"mean_residual_norm", s.total.residual_norm / it},
           {"sent_per_iteration", static_cast<double>(s.total.sent) / it},
           {"mean_sent_staleness", s.total.mean_sent_staleness()},
           {"max_sent_staleness", s.total.sent_staleness_max},
           {"held_fraction", static_cast<double>(s.total.held) / it /
                                 std::max<double>(1.0, static_cast<double>(m.numel()))},
           {"mean_held_age", s.total.mean_held_age()}});
    }
    const std::uint64_t iterations =
        monitors_.empty() ? 0 : monitors_.front().current_summary().iterations;
    return {{"epoch", epoch}, {"iterations", iterations}, {"layers", layers}};
  }

  void close_residual_epoch() {
    if (monitors_.empty() || monitors_.front().current_summary().iterations == 0) {
      return;
    }
    residual_epochs_.push_back(residual_epoch_json(epochs_.back()["epoch"]));
    for (gradcomp::residual_monitor& m : monitors_) {
      m.reset_summary();
    }
  }

  fidelity_settings s_;
  method_settings method_;
  std::vector<std::size_t> numel_;
  std::uint64_t iterations_per_epoch_;
  gradcomp::density_warmup warmup_;
  double local_threshold_ = 0.0;
  double current_ = -1.0; // the density set last (uniform)
  bool masking_ = false;  // --factor-masking-after-warmup: factor masking is on
  std::vector<std::size_t> sparse_layers_;
  std::vector<double> squares_;          // this iteration's sum of squares per layer
  std::vector<double> layer_density_;    // adaptive: the last per-layer densities
  std::vector<std::vector<float>> held_; // clipping: the iteration's gradients
  std::vector<std::size_t> order_;       // clipping: arrival order
  std::vector<nlohmann::json> epochs_;   // per epoch: density, learning rate
  std::vector<std::uint64_t> selected_, compressed_, clipped_;
  std::vector<gradcomp::residual_monitor> monitors_;         // --residual-stats, per layer
  std::vector<std::vector<float>> gradients_;                // --residual-stats: the iteration's
  nlohmann::json residual_epochs_ = nlohmann::json::array(); // closed epochs
};

} // namespace gradcomp_train
