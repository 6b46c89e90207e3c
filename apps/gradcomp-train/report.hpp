// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The parts of gradcomp-train's report that its synchronous and asynchronous training
//! share: the accuracy curve, the per-iteration means and maxima over ranks, the epoch table,
//! and writing it out (JSON for scripts/compare-runs.py, Markdown on stdout).
#pragma once

#include <gradcomp/mpi/ring_trace.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../common/tool_support.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! One test-set evaluation on the accuracy-vs-time curve.
struct eval_point {
  int epoch = 0;              //!< the epoch it falls in (0: before training)
  std::int64_t iteration = 0; //!< iterations done (per rank, or per worker)
  double epochs_done = 0;     //!< fractional epochs done
  double train_seconds = 0;   //!< training time so far (evaluations excluded)
  double train_loss = 0;      //!< mean over the iterations since the previous point, all ranks
  evaluation test;
};

//! Rank 0's wall time of every evaluation in `points`, summed (seconds).
inline double evaluation_seconds(const std::vector<eval_point>& points) {
  double sum = 0;
  for (const eval_point& p : points) {
    sum += p.test.seconds;
  }
  return sum;
}

//! The report's "curve".
inline nlohmann::json curve_json(const std::vector<eval_point>& points) {
  nlohmann::json curve = nlohmann::json::array();
  for (const eval_point& p : points) {
    curve.push_back({{"epoch", p.epoch},
                     {"epochs_done", p.epochs_done},
                     {"iteration", p.iteration},
                     {"train_seconds", p.train_seconds},
                     {"train_loss", p.train_loss},
                     {"test_accuracy", p.test.accuracy},
                     {"test_loss", p.test.loss},
                     {"test_samples", p.test.samples},
                     {"eval_seconds", p.test.seconds}});
  }
  return curve;
}

//! The per-iteration statistics every report has, in this order (times in seconds, bytes).
inline constexpr const char* per_iteration_names[] = {"iteration",
                                                      "forward",
                                                      "backward",
                                                      "compression",
                                                      "exchange_wait",
                                                      "gradient_apply",
                                                      "communication_thread_busy",
                                                      "communication_thread_cpu",
                                                      "optimizer_step",
                                                      "bytes_sent",
                                                      "bytes_received"};
inline constexpr std::size_t per_iteration_count = std::size(per_iteration_names);

//! The report's "per_iteration": each statistic's mean and maximum over ranks, times in ms
//! ("<name>_ms"), bytes as they are.
inline nlohmann::json per_iteration_json(std::span<const double> mean_over_ranks,
                                         std::span<const double> max_over_ranks) {
  nlohmann::json per_iteration = nlohmann::json::object();
  for (std::size_t i = 0; i < per_iteration_count; ++i) {
    const bool bytes = std::string_view(per_iteration_names[i]).starts_with("bytes");
    const double scale = bytes ? 1.0 : 1000.0;
    per_iteration[std::string(per_iteration_names[i]) + (bytes ? "" : "_ms")] = {
        {"mean_over_ranks", mean_over_ranks[i] * scale},
        {"max_over_ranks", max_over_ranks[i] * scale}};
  }
  return per_iteration;
}

//! Markdown: the evaluation at the start and at each epoch's end.
inline std::string epoch_table(const std::vector<eval_point>& points) {
  using gradcomp_tools::format;
  std::string table = "| epoch | test accuracy | test loss | train loss | training seconds |\n"
                      "|---|---|---|---|---|\n";
  for (const eval_point& p : points) {
    if (p.epoch == 0 || p.epochs_done == static_cast<double>(p.epoch)) {
      table += format("| %d | %.2f %% | %.4f | %s | %.1f |\n", p.epoch, 100.0 * p.test.accuracy,
                      p.test.loss, p.epoch == 0 ? "-" : format("%.4f", p.train_loss).c_str(),
                      p.train_seconds);
    }
  }
  return table;
}

//! Prints the Markdown report on stdout and writes the JSON one to `path` (unless empty), with
//! `markdown` added to it. Returns 0, or 1 (with a message) when the file cannot be written.
inline int emit_report(nlohmann::json& report,
                       const std::string& markdown,
                       const std::string& label,
                       int ranks,
                       const std::string& path) {
  report["markdown"] = markdown;
  std::printf("## gradcomp-train: %s, %d ranks\n\n%s", label.c_str(), ranks, markdown.c_str());
  std::fflush(stdout);
  if (!path.empty()) {
    std::ofstream out(path);
    out << report.dump(2) << '\n';
    if (!out) {
      std::fprintf(stderr, "gradcomp-train: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}

//! The run's exit status: exit_replicas_differ when the replicas differ, else exit_accuracy_low
//! when the final test accuracy is below `required_accuracy` (both fractions), else 0.
inline int run_status(bool replicas_differ, double final_accuracy, double required_accuracy) {
  if (replicas_differ) {
    return exit_replicas_differ;
  }
  return final_accuracy < required_accuracy ? exit_accuracy_low : 0;
}

//! Prints on stderr why `status` (from run_status()) is not 0: `replicas_differ_text` for
//! exit_replicas_differ, the accuracies for exit_accuracy_low. Returns `status`.
inline int explain_status(int status,
                          const std::string& replicas_differ_text,
                          double final_accuracy,
                          double required_accuracy) {
  if (status == exit_replicas_differ) {
    std::fprintf(stderr, "gradcomp-train: error: %s\n", replicas_differ_text.c_str());
  } else if (status == exit_accuracy_low) {
    std::fprintf(
        stderr,
        "gradcomp-train: error: final test accuracy %.4f is below --require-accuracy %.4f\n",
        final_accuracy, required_accuracy);
  }
  return status;
}

//! The report's "config" fields that every mode of gradcomp-train shares (each mode adds its
//! own): the options, the data's and the model's sizes, and the BLAS in use.
inline nlohmann::json common_config(const train_options& o,
                                    int ranks,
                                    std::int64_t train_samples,
                                    std::int64_t test_samples,
                                    std::int64_t iterations_per_epoch,
                                    std::size_t parameters,
                                    std::size_t parameter_tensors,
                                    const std::string& blas) {
  return {{"ranks", ranks},
          {"method", o.method.name},
          {"density", o.method.compressor.density},
          {"interval", o.method.compressor.interval},
          {"levels", o.method.compressor.levels},
          // the quantizers' values per scale as built (their default resolved); else -1
          {"quantization_bucket", is_quantizer_method(o.method.name)
                                      ? std::int64_t{quantizer_bucket_elements(o.method)}
                                      : quantization_bucket_option(o.method)},
          {"dense_below_elements", o.method.dense_below},
          {"model", o.model},
          {"epochs", o.epochs},
          {"batch_size_per_rank", o.batch_size},
          {"train_samples", train_samples},
          {"test_samples", test_samples},
          {"iterations_per_epoch", iterations_per_epoch},
          {"lr", o.lr},
          {"momentum", o.momentum},
          {"seed", o.seed},
          {"torch_threads_per_rank", o.threads},
          {"parameters", parameters},
          {"parameter_tensors", parameter_tensors},
          {"blas", blas},
          {"data", o.data}};
}

//! The replicas' parameter hashes as a JSON array of 16-digit hexadecimal strings.
inline nlohmann::json hash_list_json(const std::vector<std::uint64_t>& hashes) {
  nlohmann::json list = nlohmann::json::array();
  for (const std::uint64_t h : hashes) {
    list.push_back(gradcomp_tools::format("%016llx", static_cast<unsigned long long>(h)));
  }
  return list;
}

//! --ring-trace: writes this rank's ring timeline to `<prefix>.<rank>.csv` (one row per ring
//! step: operation, step, segments, bytes, the operation's start() time, the step's posted /
//! received / sent times, reduction seconds, polls) and its iterations to
//! `<prefix>.<rank>.iterations.csv` (start, backward start, backward end, finish end, step end) and
//! gradient hooks to `<prefix>.<rank>.layers.csv` (parameter, hook entered, hook left: compression
//! included). Times are steady-clock seconds of this rank's process.
//! @throws std::runtime_error if a file cannot be written.
inline void write_ring_trace(const std::string& prefix,
                             int rank,
                             const gradcomp::mpi::ring_trace& trace,
                             const std::vector<std::array<double, 5>>& iterations,
                             const std::vector<std::array<double, 3>>& layers) {
  const std::string base = prefix + "." + std::to_string(rank);
  // a CSV file with its header, times written to the nanosecond
  const auto csv = [](const std::string& path, const char* header) {
    std::ofstream f(path);
    f.precision(9);
    f << std::fixed << header << '\n';
    return f;
  };
  std::ofstream steps = csv(base + ".csv", "operation,step,segments,bytes_sent,bytes_received,"
                                           "started_s,posted_s,received_s,sent_s,reduce_s,polls");
  for (const auto& r : trace.steps) {
    steps << r.operation << ',' << r.step << ',' << r.segments << ',' << r.bytes_sent << ','
          << r.bytes_received << ',' << trace.started_seconds.at(r.operation) << ','
          << r.posted_seconds << ',' << r.received_seconds << ',' << r.sent_seconds << ','
          << r.reduce_seconds << ',' << r.polls << '\n';
  }
  std::ofstream its = csv(base + ".iterations.csv",
                          "start_s,backward_start_s,backward_end_s,finish_end_s,step_end_s");
  for (const auto& t : iterations) {
    its << t[0] << ',' << t[1] << ',' << t[2] << ',' << t[3] << ',' << t[4] << '\n';
  }
  std::ofstream hooks = csv(base + ".layers.csv", "parameter,entered_s,left_s");
  for (const auto& l : layers) {
    hooks << static_cast<int>(l[0]) << ',' << l[1] << ',' << l[2] << '\n';
  }
  if (!steps || !its || !hooks) {
    throw std::runtime_error("gradcomp-train: cannot write the ring trace " + base + ".*.csv");
  }
}

} // namespace gradcomp_train
