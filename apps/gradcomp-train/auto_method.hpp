// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --method auto: per merge group and per phase of training, what to send,
//! decided by the library's rule (gradcomp::schedule::choose_exchange) on the cost model
//! calibrated at start-up and the measured backward times, with the phase from Accordion's
//! detector of critical regimes (gradcomp::schedule::critical_regime) on the averaged gradient.
//!
//! The exchange is the sparse allgather with its dense switch, and the compressor the reused
//! threshold at a density per layer: a group sent dense gets density 1 (every value on its exact
//! calls, and between them every value at or above the last minimum magnitude, which leaves a
//! handful in the residual; the allgather then switches to its ring allreduce, the dense
//! candidate the rule priced), a sparse group --density, or --auto-critical-density while its
//! gradient is in a critical regime. docs/train.md states the rule and its inputs.
#pragma once

#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "exchange.hpp"
#include "merge_plan.hpp"
#include "setup.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! @brief The decisions of --method auto and the state they come from: every rank computes the
//! same ones from rank 0's calibration (alpha, beta, the selection's seconds per element and
//! the backward times), agreed at construction, and from the averaged gradient, which is
//! bit-identical on every rank; so no communication follows the start.
class auto_control {
public:
  //! Calibrates (collective): the network's alpha and beta from the merge plan's calibration, or
  //! a ring sweep when the plan did not calibrate; the reused threshold's seconds per element
  //! with error feedback on the largest layer; then prices every group of `plan` with and
  //! without a critical regime.
  //! `dense_below`: the exchange's bound of --auto-dense-share (schedule::dense_below_elements),
  //! which its pricing counts as sent whole.
  auto_control(sync_setup& s, const merge_plan& plan, std::size_t dense_below)
      : settings_(s.o.method.automatic), density_(s.o.method.compressor.density),
        numel_(s.model.numel), dense_below_(dense_below), groups_(plan.groups), ranks_(s.ranks),
        interval_iterations_(std::max<std::int64_t>(
            1,
            std::llround(settings_.interval_epochs *
                         static_cast<double>(s.data.iterations_per_epoch)))) {
    const auto start = clock_type::now();
    double alpha = plan.info.value("alpha_seconds", 0.0);
    double beta = plan.info.value("beta_seconds_per_byte", 0.0);
    // the plan calibrated (the same on every rank: decided by the options) where it predicted
    if (!plan.info.contains("predicted_iteration_seconds") && s.ranks > 1) {
      const gradcomp::cost::network net = calibrate_network(s, s.o.calibrate_under_load);
      alpha = net.alpha_seconds;
      beta = net.beta_seconds_per_byte;
    }
    const std::vector<double> backward =
        plan.info.value("backward_seconds_rank0", std::vector<double>(numel_.size(), 0.0));
    // rank 0's inputs on every rank (a sum where the other ranks add zeros)
    std::vector<double> agreed = {alpha, beta, select_seconds_per_element(s)};
    agreed.insert(agreed.end(), backward.begin(), backward.end());
    if (!s.root) {
      std::fill(agreed.begin(), agreed.end(), 0.0);
    }
    allreduce(s.comm, std::span<double>(agreed), MPI_SUM);
    net_.alpha_seconds = agreed[0];
    net_.beta_seconds_per_byte = agreed[1];
    select_per_element_ = agreed[2];
    backward_.assign(agreed.begin() + 3, agreed.end());
    price_groups(s);
    accumulated_.resize(numel_.size());
    block_stride_.resize(numel_.size());
    for (std::size_t l = 0; l < numel_.size(); ++l) {
      const std::size_t blocks = (numel_[l] + block_elements - 1) / block_elements;
      block_stride_[l] = std::max<std::size_t>(1, blocks / sampled_blocks);
      std::size_t sampled = 0;
      for (std::size_t b = 0; b < blocks; b += block_stride_[l]) {
        sampled += std::min(block_elements, numel_[l] - b * block_elements);
      }
      accumulated_[l].assign(sampled, 0.0f);
    }
    regimes_.assign(groups_.size(), gradcomp::schedule::critical_regime(settings_.eta));
    calibration_seconds_ = seconds_since(start);
  }

  //! Seconds the constructor took (its calibrations and pricing: training time).
  [[nodiscard]] double calibration_seconds() const noexcept { return calibration_seconds_; }

  //! At the step boundary before global iteration `it` (learning rate `lr`): at the end of an
  //! interval each group's regime observes the norm of the averaged gradient it accumulated
  //! (a learning-rate drop since the previous boundary marks the next interval critical); then
  //! every layer's density is set from its group's decision in its regime. `train_seconds`:
  //! this rank's training time so far, recorded with the interval.
  void
  before_iteration(std::int64_t it, double lr, double train_seconds, gradient_exchange& exchange) {
    train_seconds_ = train_seconds;
    if (it == 0) {
      apply(it, lr, exchange, {});
    } else if (it % interval_iterations_ == 0) {
      end_interval(it, lr, exchange);
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      critical_iterations_[g] += regimes_[g].critical() ? 1 : 0;
    }
  }

  //! After the exchange: adds the iteration's averaged gradient to the interval's accumulation,
  //! unless the step was skipped (`applied` false: loss scaling's overflow or --nonfinite
  //! skip_step, whose averages hold what was not applied). Only the sampled blocks are added
  //! (see group_sum_of_squares): O(65,536) per layer, not O(n).
  void after_iteration(const gradient_exchange& exchange, bool applied) {
    if (!applied) {
      return;
    }
    for (std::size_t l = 0; l < numel_.size(); ++l) {
      const std::span<const float> avg = exchange.averaged(l);
      float* a = accumulated_[l].data();
      const std::size_t step = block_stride_[l] * block_elements;
      for (std::size_t begin = 0; begin < avg.size(); begin += step) {
        const std::size_t end = std::min(avg.size(), begin + block_elements);
        for (std::size_t i = begin; i < end; ++i) {
          *a++ += avg[i];
        }
      }
    }
  }

  //! Adds the settings to report["config"] and the decisions as report["auto"]: the calibration,
  //! per group its elements, overlap and priced candidates in either regime, per interval the
  //! groups' regimes, norm changes and the densities set, and per group the iterations it spent
  //! critical.
  void add_to(nlohmann::json& report, const std::vector<layer_info>& layers) const {
    report["config"]["auto_critical_density"] = settings_.critical_density;
    report["config"]["auto_interval_epochs"] = settings_.interval_epochs;
    report["config"]["auto_eta"] = settings_.eta;
    report["config"]["auto_min_saving"] = settings_.min_saving;
    report["config"]["auto_drop_intervals"] = settings_.drop_intervals;
    report["config"]["auto_dense_share"] = settings_.dense_share;
    report["config"]["dense_below_elements"] = dense_below_;
    nlohmann::json groups = describe_groups(layers, groups_).first; // layers, elements
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      groups[g]["overlap_seconds"] = overlap_[g];
      groups[g]["normal"] = decision_json(normal_[g]);
      groups[g]["critical"] = decision_json(critical_[g]);
      groups[g]["critical_iterations"] = critical_iterations_[g];
    }
    report["auto"] = {{"ranks", ranks_},
                      {"density", density_},
                      {"critical_density", settings_.critical_density},
                      {"eta", settings_.eta},
                      {"min_saving", settings_.min_saving},
                      {"dense_share", settings_.dense_share},
                      {"dense_below_elements", dense_below_},
                      {"interval_iterations", interval_iterations_},
                      {"alpha_seconds", net_.alpha_seconds},
                      {"beta_seconds_per_byte", net_.beta_seconds_per_byte},
                      {"select_seconds_per_element", select_per_element_},
                      {"calibration_seconds", calibration_seconds_},
                      {"backward_seconds", backward_},
                      {"groups", groups},
                      {"intervals", intervals_}};
  }

private:
  // The reused threshold's seconds per element with error feedback at --density on random
  // normal values of the largest layer's size: the mean of 2 S calls after one (S = --interval,
  // at least 3), on every rank at once (each rank's cores as loaded as in training). Call c's
  // gradient is the window at c x 4099 of one pool of normal values (drawing n fresh values
  // per call took 1.5 s of the start-up on the CNN).
  static double select_seconds_per_element(const sync_setup& s) {
    const std::size_t n = *std::max_element(s.model.numel.begin(), s.model.numel.end());
    const gradcomp::any_compressor c(auto_compressor_name, s.o.method.compressor);
    gradcomp::error_feedback<gradcomp::any_compressor> ef(n, c, s.mc);
    const std::size_t calls = 2 * std::max<std::size_t>(3, s.o.method.compressor.interval);
    constexpr std::size_t shift = 4099; // a prime: every window puts other values at a position
    std::vector<float> pool(n + calls * shift);
    std::mt19937 rng(12345);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    for (float& v : pool) {
      v = normal(rng);
    }
    gradcomp::sparse_message m;
    double seconds = 0;
    for (std::size_t call = 0; call <= calls; ++call) {
      const std::span<const float> g(pool.data() + call * shift, n);
      const auto t0 = clock_type::now();
      ef.compress(g, m);
      if (call > 0) {
        seconds += seconds_since(t0);
      }
    }
    return seconds / static_cast<double>(calls) / static_cast<double>(n);
  }

  // Prices every group dense, fp16 left out (the allgather's switch runs the fp32 ring) and
  // sparse at --density (normal) or --auto-critical-density (critical), its messages as the
  // allgather encodes them (values in --precision, delta + varint indices); the overlap is the
  // backward time of the layers after the group in backward order.
  void price_groups(const sync_setup& s) {
    namespace gs = gradcomp::schedule;
    using kind = gradcomp::cost::transport_kind;
    gs::exchange_costs costs;
    costs.allreduce_seconds = gradcomp::cost::message_cost(kind::ring_allreduce, s.ranks, net_);
    costs.allgather_seconds = gradcomp::cost::message_cost(kind::sparse_allgather, s.ranks, net_);
    costs.select_seconds = {0.0, select_per_element_};
    const gs::exchange_choice_settings choice{
        .density = density_,
        .critical_density = settings_.critical_density,
        .allow_fp16 = false,
        .min_saving = settings_.min_saving,
        .sparse_pairs = {.value_bytes = static_cast<unsigned>(
                             gradcomp::value_size_bytes(wire_type(s.o.large_batch.precision))),
                         .indices = gradcomp::mpi::sparse_allgather_options{}.indices}};
    const std::size_t layers = numel_.size();
    for (const auto& group : groups_) {
      std::uint64_t elements = 0;
      std::uint64_t dense = 0; // the --auto-dense-share layers, sent whole in a sparse message
      for (std::size_t p = group.begin; p < group.end; ++p) {
        const std::size_t n = numel_[gs::forward_index(p, layers)];
        elements += n;
        dense += n < dense_below_ ? n : 0;
      }
      double overlap = 0;
      for (std::size_t p = group.end; p < layers; ++p) {
        overlap += backward_[gs::forward_index(p, layers)];
      }
      overlap_.push_back(overlap);
      // the sparse candidate at the share of the group's elements its message carries
      gs::exchange_choice_settings group_choice = choice;
      const auto sent_share = [&](double d) {
        const double e = static_cast<double>(elements);
        return elements == 0
                   ? d
                   : std::min(1.0,
                              (d * (e - static_cast<double>(dense)) + static_cast<double>(dense)) /
                                  e);
      };
      group_choice.density = sent_share(density_);
      group_choice.critical_density = sent_share(settings_.critical_density);
      normal_.push_back(gs::choose_exchange(elements, costs, group_choice, false, overlap));
      critical_.push_back(gs::choose_exchange(elements, costs, group_choice, true, overlap));
    }
    critical_iterations_.assign(groups_.size(), 0);
  }

  // Ends the interval before iteration `it`: each group's regime observes the norm of the
  // averaged gradient it accumulated (after a learning-rate drop the next --auto-drop-intervals
  // are critical), then apply().
  void end_interval(std::int64_t it, double lr, gradient_exchange& exchange) {
    std::vector<double> change(groups_.size());
    const bool dropped = lr < last_lr_;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      if (dropped) {
        regimes_[g].learning_rate_dropped(settings_.drop_intervals);
      }
      const double norm = std::sqrt(group_sum_of_squares(g));
      if (std::isfinite(norm)) { // not finite: the model diverged; the evaluation point says so
        regimes_[g].observe(norm);
      }
      change[g] = regimes_[g].last_change();
    }
    for (std::vector<float>& a : accumulated_) {
      std::fill(a.begin(), a.end(), 0.0f);
    }
    apply(it, lr, exchange, change);
  }

  // The sum of squares of group g's accumulated gradient, estimated: per layer, the blocks of
  // 16 consecutive elements at a fixed stride (every block of a layer up to 65,536 elements; of
  // a larger one about 4,096 blocks spread over it), their gradcomp::sum_of_squares (in double)
  // scaled by elements / sampled elements; summed over the layers in backward order. The same
  // sample on every rank, so the same norm; Accordion's threshold on the relative change of
  // the norm (eta = 0.5) does not need its last digits.
  [[nodiscard]] double group_sum_of_squares(std::size_t g) const {
    double sum = 0;
    for (std::size_t p = groups_[g].begin; p < groups_[g].end; ++p) {
      const std::size_t l = gradcomp::schedule::forward_index(p, numel_.size());
      const std::vector<float>& a = accumulated_[l];
      if (!a.empty()) {
        sum += gradcomp::sum_of_squares(a) * static_cast<double>(numel_[l]) /
               static_cast<double>(a.size());
      }
    }
    return sum;
  }

  // Sets every layer's density from its group's decision in its group's regime (from `it` on)
  // and records the interval.
  void apply(std::int64_t it,
             double lr,
             gradient_exchange& exchange,
             const std::vector<double>& change) {
    std::vector<double> densities(numel_.size(), 1.0);
    nlohmann::json critical = nlohmann::json::array();
    nlohmann::json group_density = nlohmann::json::array();
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const bool c = regimes_[g].critical();
      const gradcomp::schedule::exchange_candidate& d = (c ? critical_[g] : normal_[g]).chosen;
      // the chosen density is the share of the group sent; its sparse layers' density is set
      // (the --auto-dense-share layers go dense whatever their density says)
      const double layer_density = d.method == gradcomp::schedule::exchange_method::sparse
                                       ? (c ? settings_.critical_density : density_)
                                       : d.density;
      for (std::size_t p = groups_[g].begin; p < groups_[g].end; ++p) {
        densities[gradcomp::schedule::forward_index(p, numel_.size())] = layer_density;
      }
      critical.push_back(c);
      group_density.push_back(layer_density);
    }
    if (densities != densities_) {
      exchange.set_layer_densities(densities);
      densities_ = densities;
    }
    nlohmann::json changes = nlohmann::json::array();
    for (const double c : change) {
      changes.push_back(std::isfinite(c) ? nlohmann::json(c) : nlohmann::json(nullptr));
    }
    intervals_.push_back({{"iteration", it},
                          {"train_seconds", train_seconds_},
                          {"learning_rate", lr},
                          {"critical", critical},
                          {"change", changes},
                          {"density", group_density}});
    last_lr_ = lr;
  }

  static nlohmann::json decision_json(const gradcomp::schedule::exchange_decision& d) {
    const auto candidate = [](const gradcomp::schedule::exchange_candidate& c) {
      return nlohmann::json{{"method", std::string(gradcomp::schedule::name(c.method))},
                            {"density", c.density},
                            {"bytes", c.bytes},
                            {"compress_seconds", c.compress_seconds},
                            {"communication_seconds", c.communication_seconds},
                            {"exposed_seconds", c.exposed_seconds}};
    };
    nlohmann::json all = nlohmann::json::array();
    for (const auto& c : d.candidates) {
      all.push_back(candidate(c));
    }
    return {{"chosen", candidate(d.chosen)}, {"candidates", all}};
  }

  auto_settings settings_;
  double density_;
  std::vector<std::size_t> numel_;
  std::size_t dense_below_; // layers of fewer elements are sent dense (--auto-dense-share)
  gradcomp::schedule::grouping groups_;
  int ranks_;
  std::int64_t interval_iterations_;
  gradcomp::cost::network net_;
  double select_per_element_ = 0;
  double calibration_seconds_ = 0;
  std::vector<double> backward_; // rank 0's backward seconds per layer, forward order
  std::vector<double> overlap_;
  std::vector<gradcomp::schedule::exchange_decision> normal_, critical_;
  std::vector<std::int64_t> critical_iterations_;
  std::vector<gradcomp::schedule::critical_regime> regimes_;
  static constexpr std::size_t block_elements = 16;   // one 64-byte cache line of floats
  static constexpr std::size_t sampled_blocks = 4096; // per layer, at least (65,536 elements)
  std::vector<std::size_t> block_stride_;             // per layer: blocks between sampled ones
  std::vector<std::vector<float>> accumulated_;       // per layer, this interval's sampled averages
  std::vector<double> densities_;                     // the densities set last
  double last_lr_ = 0;
  nlohmann::json intervals_ = nlohmann::json::array();
  double train_seconds_ = 0; // this rank's training time at the current iteration's start
};

} // namespace gradcomp_train
