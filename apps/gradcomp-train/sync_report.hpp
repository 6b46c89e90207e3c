// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The end of gradcomp-train's synchronous training: the replicas' check and the
//! statistics across ranks (collective), the run's exit status, and rank 0's report (the table on
//! stdout, the JSON of --report; the parts shared with --sync async are in report.hpp).
#pragma once

#include <gradcomp/coded.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../common/tool_support.hpp"
#include "hybrid.hpp"
#include "merge_plan.hpp"
#include "report.hpp"
#include "setup.hpp"
#include "training_loop.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! What every rank learns after training, and the run's exit status.
struct sync_outcome {
  //! hybrid: the model-parallel slices against the model with the gathered full layers
  //! (outputs of a fixed batch; only the order of fp32 sums differs, so they must agree within
  //! mp_tolerance, or the run fails like differing replicas)
  static constexpr double mp_tolerance = 1e-3;
  double mp_difference = 0.0;
  double mp_sent_bytes = 0.0; //!< this rank's model-parallel bytes, all iterations
  bool slices_agree = true;
  std::vector<std::uint64_t> hashes; //!< every rank's parameter hash, rank order
  bool identical = false;            //!< the replicas are bit-identical
  //! the per-iteration statistics (report.hpp's per_iteration_names): mean and max over ranks
  std::array<double, per_iteration_count> mean_values{};
  std::array<double, per_iteration_count> max_values{};
  std::array<double, 3> counts{}; //!< selected elements, elements, guard fallbacks: all ranks
  evaluation final_eval;          //!< the last evaluation
  int status = 0;                 //!< run_status()
};

//! @brief Checks the replicas (the parameter hashes of every rank; hybrid: the model-parallel
//! slices against the gathered layers) and gathers the statistics of `t`'s iterations across
//! ranks. Collective.
inline sync_outcome check_replicas(sync_setup& s, const sync_trainer& t) {
  sync_outcome r;
  if (s.model.hybrid->active()) {
    r.mp_sent_bytes = s.model.hybrid->sent_bytes(); // before the check's own forward pass
    const auto [x, y] = s.data.batch(s.data.shard(s.ranks, s.rank, s.o.seed, 0), 0);
    r.mp_difference = s.model.hybrid->max_difference_to_gathered(s.comm, x);
  }
  r.slices_agree = r.mp_difference <= sync_outcome::mp_tolerance;
  const std::uint64_t hash = parameter_hash(s.model.params);
  r.hashes = allgather(s.comm, hash);
  r.identical = std::all_of(r.hashes.begin(), r.hashes.end(),
                            [&](std::uint64_t h) { return h == r.hashes[0]; });
  const iteration_sums& m = t.totals;
  const auto n_it = static_cast<double>(std::max<std::int64_t>(1, m.iterations));
  const std::array<double, per_iteration_count> per_rank_values = {
      m.iteration / n_it,   m.forward / n_it,    m.backward / n_it,      m.compress / n_it,
      m.finish_wait / n_it, m.apply / n_it,      m.communicate / n_it,   m.communicate_cpu / n_it,
      m.step / n_it,        m.bytes_sent / n_it, m.bytes_received / n_it};
  r.mean_values = per_rank_values;
  allreduce(s.comm, std::span<double>(r.mean_values), MPI_SUM);
  for (double& v : r.mean_values) {
    v /= s.ranks;
  }
  r.max_values = per_rank_values;
  allreduce(s.comm, std::span<double>(r.max_values), MPI_MAX);
  r.counts = {m.selected, m.numel, static_cast<double>(m.fallbacks)};
  allreduce(s.comm, std::span<double>(r.counts), MPI_SUM);

  r.final_eval = t.points.back().test;
  r.status = run_status((!r.identical && s.o.transport.name != "none") || !r.slices_agree,
                        r.final_eval.accuracy, s.o.require_accuracy);
  return r;
}

//! The run's label: --label, or method / transport (coded: its settings) / merge.
inline std::string run_label(const sync_setup& s) {
  const train_options& o = s.o;
  if (!o.label.empty()) {
    return o.label;
  }
  const std::string coded_text =
      s.coded
          ? gradcomp_tools::format("R = %d, %s, %s, %s%s", o.transport.redundancy,
                                   o.transport.coding.c_str(), o.transport.coded_schedule.c_str(),
                                   o.transport.coded_variant.c_str(),
                                   o.transport.uncoded ? ", uncoded" : "")
          : std::string();
  return s.coded ? o.method.name + " / coded (" + coded_text + ") / " + o.merge
                 : o.method.name + " / " + o.transport.name + " / " + o.merge;
}

//! @brief The report's JSON: the label, the configuration (with the synchronous training's
//! fields, hybrid's and coded's), the plan, the curve, the final accuracy, times, the statistics
//! and the replicas' check, loss scaling's and the remedies' records.
//! --replan-after: whether the pipeline re-planned, its groups, the backward times rank 0's
//! pipeline measured over the warm-up and the iteration the merge model predicts with them (for
//! the new groups and for the initial ones; with --replan-mode keep the two are the same
//! groups); null without --replan-after. The prediction also takes rank 0's forward and update
//! (the averages into .grad plus the optimizer step: outside the merge model) as measured over
//! the same iterations, their medians; where this process did not run them (resumed after the
//! warm-up) the profile's forward and no update, and the two medians are null.
inline nlohmann::json
replan_json(const sync_setup& s, const merge_plan& plan, const sync_trainer& t) {
  if (s.o.replan_after <= 0 || !t.exchange) {
    return nullptr;
  }
  const replan_state r = t.exchange->replan();
  nlohmann::json j = {{"after_iterations", s.o.replan_after},
                      {"mode", s.o.replan_mode},
                      {"replanned", r.replanned}};
  if (!r.replanned) {
    return j;
  }
  gradcomp::pipeline_policy::planned_grouping measured = plan.planner;
  measured.backward_seconds = r.measured_backward_seconds;
  double update_seconds = 0.0;
  j["measured_forward_seconds_rank0"] = nullptr;
  j["measured_update_seconds_rank0"] = nullptr;
  if (!t.warmup_forward_seconds.empty()) {
    measured.forward_seconds = median(t.warmup_forward_seconds);
    update_seconds = median(t.warmup_update_seconds);
    j["measured_forward_seconds_rank0"] = measured.forward_seconds;
    j["measured_update_seconds_rank0"] = update_seconds;
  }
  std::string text;
  std::tie(j["groups"], text) = describe_groups(s.model.layers, r.groups);
  j["text"] = text;
  j["measured_backward_seconds_rank0"] = r.measured_backward_seconds;
  j["predicted_iteration_seconds"] =
      measured.predicted_iteration_seconds(s.model.numel, r.groups) + update_seconds;
  j["initial_groups_predicted_iteration_seconds"] =
      measured.predicted_iteration_seconds(s.model.numel, plan.groups) + update_seconds;
  return j;
}

//! The training time (evaluations excluded) at the first evaluation that reached
//! --target-accuracy, or null (no target, or not reached within --epochs).
inline nlohmann::json time_to_target_json(const sync_trainer& t) {
  const eval_point* p = t.target_point();
  return p != nullptr ? nlohmann::json(p->train_seconds) : nlohmann::json(nullptr);
}

//! The epochs done at the first evaluation that reached --target-accuracy, or null.
inline nlohmann::json epochs_to_target_json(const sync_trainer& t) {
  const eval_point* p = t.target_point();
  return p != nullptr ? nlohmann::json(p->epochs_done) : nlohmann::json(nullptr);
}

inline nlohmann::json report_json(const sync_setup& s,
                                  const merge_plan& plan,
                                  const sync_update& u,
                                  const sync_trainer& t,
                                  const sync_outcome& r,
                                  double wall_seconds) {
  const train_options& o = s.o;
  const double density = r.counts[1] > 0 ? r.counts[0] / r.counts[1] : 1.0;
  nlohmann::json config = common_config(o, s.ranks, s.data.train_set.size(), s.data.test_set.size(),
                                        s.data.iterations_per_epoch, s.model.total_numel,
                                        s.model.layers.size(), s.blas);
  config["transport"] = o.transport.name;
  config["sync"] = "sync";
  config["parallel"] = o.parallel;
  if (o.parallel == "hybrid") {
    config["mp_layers"] = o.mp_layers;
    config["hybrid_layers"] = s.model.hybrid->decisions();
    config["hybrid_plan"] = s.model.hybrid->plan();
    config["model_parallel_check_max_difference"] = r.mp_difference;
    config["model_parallel_check_tolerance"] = sync_outcome::mp_tolerance;
    config["model_parallel_sent_bytes_per_iteration"] =
        r.mp_sent_bytes / static_cast<double>(std::max<std::int64_t>(1, t.totals.iterations));
  }
  config["ps_pull"] = o.transport.name != "ps"    ? "n/a"
                      : o.transport.ps_dense_pull ? "dense"
                                                  : "adaptive";
  config["merge"] = o.merge;
  // --checkpoint / --resume (checkpoint.hpp): where this run started and whether it stopped early
  config["checkpoint"] = o.checkpoint;
  config["resumed_from"] = o.resume;
  config["resumed_at_iteration"] = t.resumed ? t.points.front().iteration : 0;
  config["stopped_early"] = t.stopped_early;
  config["target_accuracy"] = s.o.target_accuracy;
  config["momentum_correction"] = s.correction;
  config["factor_masking"] = s.correction && o.factor_masking;
  config["compression_scope"] = o.method.scope;
  config["precision"] = o.large_batch.precision;
  config["loss_scale"] = o.large_batch.loss_scale;
  config["optimizer"] = o.large_batch.optimizer;
  config["warmup_epochs"] = o.large_batch.warmup_epochs;
  config["lr_decay"] = lr_decay_text(o.large_batch);
  if (o.large_batch.optimizer == "lars") {
    config["trust_coefficient"] = o.large_batch.trust_coefficient;
    config["weight_decay"] = o.large_batch.weight_decay;
  }
  nlohmann::json report = {{"label", run_label(s)},
                           {"config", config},
                           {"plan", plan.info},
                           {"replan", replan_json(s, plan, t)},
                           {"curve", curve_json(t.points)},
                           {"final_test_accuracy", r.final_eval.accuracy},
                           {"final_test_loss", r.final_eval.loss},
                           {"train_seconds", t.train_seconds},
                           {"wall_seconds", wall_seconds},
                           {"eval_seconds", evaluation_seconds(t.points)},
                           {"time_to_target_seconds", time_to_target_json(t)},
                           {"epochs_to_target", epochs_to_target_json(t)},
                           {"per_iteration", per_iteration_json(r.mean_values, r.max_values)},
                           {"achieved_density", density},
                           {"guard_fallbacks", r.counts[2]},
                           {"replica_hashes", hash_list_json(r.hashes)},
                           {"replicas_identical", r.identical},
                           {"loss_scale_final", u.scaling.scale()},
                           {"skipped_steps", u.scaling.skipped_steps()},
                           {"dropped_non_finite", u.scaling.dropped_values()},
                           {"returned_values", u.scaling.returned_values()}};
  t.remedies.add_to(report);
  if (t.automatic) {
    t.automatic->add_to(report, s.model.layers);
  }
  if (s.coded) {
    const gradcomp::coded::placement& pl = *s.coded;
    nlohmann::json& coded_config = report["config"];
    coded_config["redundancy"] = pl.redundancy();
    coded_config["coding"] = o.transport.coding;
    coded_config["coded_schedule"] = o.transport.coded_schedule;
    coded_config["coded_variant"] = o.transport.coded_variant;
    coded_config["uncoded"] = o.transport.uncoded;
    coded_config["parts"] = pl.part_count();
    coded_config["parts_per_rank"] = pl.parts_per_rank();
    coded_config["global_batch"] = static_cast<std::int64_t>(o.batch_size) * s.ranks;
  }
  return report;
}

//! The report's Markdown: the epoch table, the per-iteration means over ranks, the plan, the
//! times and the replicas' check.
inline std::string report_table(const sync_setup& s,
                                const merge_plan& plan,
                                const sync_trainer& t,
                                const sync_outcome& r,
                                double wall_seconds) {
  using gradcomp_tools::format;
  const train_options& o = s.o;
  const std::array<double, per_iteration_count>& mean_values = r.mean_values;
  const double density = r.counts[1] > 0 ? r.counts[0] / r.counts[1] : 1.0;
  std::string table = epoch_table(t.points);
  table += "\n| per iteration (mean over ranks) | value |\n|---|---|\n";
  table += format("| iteration | %.1f ms |\n", 1000 * mean_values[0]);
  const std::string over_parts =
      s.coded ? format(" over this rank's %zu parts", s.coded->parts_per_rank()) : std::string();
  table += format("| compute (forward + backward%s, compression excluded) | %.1f ms |\n",
                  over_parts.c_str(), 1000 * (mean_values[1] + mean_values[2]));
  table += format("| compression (in the backward hooks) | %.2f ms |\n", 1000 * mean_values[3]);
  table += format("| communication not overlapped (waiting in finish) | %.2f ms |\n",
                  1000 * mean_values[4]);
  table +=
      format("| averages into .grad (copy, momentum masking) | %.2f ms |\n", 1000 * mean_values[5]);
  table += format("| communication thread busy | %.2f ms |\n", 1000 * mean_values[6]);
  table += format("| communication thread CPU time | %.2f ms |\n", 1000 * mean_values[7]);
  table += format("| optimizer step | %.2f ms |\n", 1000 * mean_values[8]);
  table +=
      format("| bytes sent / received per rank | %.0f / %.0f |\n", mean_values[9], mean_values[10]);
  table += format("| achieved density | %.5f |\n", density);
  if (s.coded) {
    const gradcomp::coded::placement& pl = *s.coded;
    table += format("| redundancy R (parts, parts per rank) | %d (%zu, %zu) |\n", pl.redundancy(),
                    pl.part_count(), pl.parts_per_rank());
    table += format("| coding (schedule, variant) | %s (%s, %s)%s |\n", o.transport.coding.c_str(),
                    o.transport.coded_schedule.c_str(), o.transport.coded_variant.c_str(),
                    o.transport.uncoded ? ", uncoded baseline: slices unicast, no coding" : "");
  }
  table += format("| merge plan (%s) | %s |\n", o.merge.c_str(), plan.text.c_str());
  if (plan.info.contains("predicted_iteration_seconds")) {
    table += format("| iteration predicted by the merge model (rank 0's profile) | %.1f ms |\n",
                    1000 * plan.info["predicted_iteration_seconds"].get<double>());
  }
  if (const nlohmann::json replan = replan_json(s, plan, t);
      replan.is_object() && replan["replanned"].get<bool>()) {
    const bool kept = o.replan_mode == "keep";
    table += format("| %s after %d iterations (measured backward times) | %s |\n",
                    kept ? "plan kept" : "re-planned", o.replan_after,
                    replan["text"].get<std::string>().c_str());
    table += format("| iteration predicted %s (rank 0's measured forward, backward and "
                    "update) | %.1f ms |\n",
                    kept ? "for the plan in use" : "after re-planning",
                    1000 * replan["predicted_iteration_seconds"].get<double>());
  }
  table += format("| training time / evaluation time / wall time | %.1f s / %.1f s / %.1f s |\n",
                  t.train_seconds, evaluation_seconds(t.points), wall_seconds);
  if (o.target_accuracy > 0) {
    const eval_point* p = t.target_point();
    table += p != nullptr ? format("| time to %.2f %% test accuracy | %.1f s (epoch %.3f) |\n",
                                   100 * o.target_accuracy, p->train_seconds, p->epochs_done)
                          : format("| time to %.2f %% test accuracy | not reached in %d epochs |\n",
                                   100 * o.target_accuracy, o.epochs);
  }
  table += format("| replicas identical | %s (%s) |\n", r.identical ? "yes" : "NO",
                  hash_list_json(r.hashes).dump().c_str());
  table += format("| BLAS | %s |\n", s.blas.c_str());
  return table;
}

//! @brief Rank 0: prints the report's table, writes its JSON (--report) and explains a failing
//! status on stderr. Returns the exit status (1 if the report cannot be written).
inline int write_report(const sync_setup& s,
                        const merge_plan& plan,
                        const sync_update& u,
                        const sync_trainer& t,
                        const sync_outcome& r,
                        double wall_seconds) {
  nlohmann::json report = report_json(s, plan, u, t, r, wall_seconds);
  const std::string table = report_table(s, plan, t, r, wall_seconds);
  if (emit_report(report, table, run_label(s), s.ranks, s.o.report) != 0) {
    return 1;
  }
  return explain_status(
      r.status,
      r.slices_agree ? "the replicas differ across ranks: " + hash_list_json(r.hashes).dump()
                     : gradcomp_tools::format("the model-parallel slices give outputs %g away from "
                                              "the gathered layers' (tolerance %g)",
                                              r.mp_difference, sync_outcome::mp_tolerance),
      r.final_eval.accuracy, s.o.require_accuracy);
}

} // namespace gradcomp_train
