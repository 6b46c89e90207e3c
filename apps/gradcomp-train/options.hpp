// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train's command line: the CLI11 definition of every option (docs/train.md) and
//! the checks across options that CLI11's validators cannot express.
#pragma once

#include <gradcomp/schedule.hpp>

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "../common/tool_support.hpp"
#include "exchange.hpp"
#include "fidelity.hpp"
#include "hybrid.hpp"
#include "large_batch.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! The method, the exchange, the model and the optimizer's basic options of gradcomp-train.
inline void add_method_options(CLI::App& app, train_options& o) {
  namespace gt = gradcomp_train;
  using gradcomp::schedule::strategy;
  app.add_option("--method", o.method.name, "gradient compressor")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::method_names));
  // --density, --interval, --levels (and --threads, --seed, --precision, --nonfinite) fill the
  // library's compressor settings, which check_options() validates with the library's check
  gradcomp::named_compressor_settings& cs = o.method.compressor;
  app.add_option("--density", cs.density, "fraction of each gradient sent, in (0, 1]")
      ->capture_default_str();
  app.add_option("--interval", cs.interval,
                 "reused_threshold: exact top-k every S iterations, S >= 1")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber); // "-1" would wrap around in the unsigned field
  app.add_option("--rank", o.method.rank,
                 "powersgd: the approximation rank r (each layer's gradient sent as two factors "
                 "of r columns; --transport ring)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--levels", cs.levels,
                 "qsgd: quantization levels per sign, S in [1, 32768] (15: 5 bits per value, "
                 "255: 9)")
      ->capture_default_str();
  app.add_option_function<std::int64_t>(
         "--quantization-bucket",
         [&cs](std::int64_t e) { cs.bucket_elements = static_cast<std::uint32_t>(e); },
         "signsgd, terngrad, qsgd: values per scale, E in [0, 2^32) (0: one scale per "
         "layer, or per merge group with --compression-scope group; default: qsgd 512, "
         "signsgd and terngrad 0)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{4294967295}));
  app.add_option("--transport", o.transport.name,
                 "exchange: allreduce (MPI_Iallreduce), ring, allgather (sparse), ps, "
                 "hierarchical, none (each rank trains alone on its own gradients, no pipeline: "
                 "the no-communication floor; --method is then ignored), coded (CSSGD's coded "
                 "multicast through a multi-part pipeline, --redundancy, --coding, "
                 "--coded-schedule, --coded-variant), gtopk (gTop-k: the global top --density "
                 "of each group by a tree of sparse merges; sparse methods), oktopk (Ok-Topk: "
                 "a balanced sparse reduce-scatter, then an allgather of the sums above a "
                 "reused global threshold, about --density of each group; sparse methods)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::transport_names));
  std::vector<std::string> merges;
  for (const strategy st : gradcomp::schedule::all_strategies) {
    merges.emplace_back(gradcomp::schedule::name(st));
  }
  app.add_option("--merge", o.merge, "merge strategy (layers per message)")
      ->capture_default_str()
      ->check(CLI::IsMember(merges));
  app.add_option("--bucket-mib", o.bucket_mib, "size_threshold's bucket cap, MiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--model", o.model,
                 "cnn (ddp-baseline's CNN), vgg (deeper, 18 tensors) or mlp (S3's 784-512-512-10 "
                 "MLP)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cnn", "vgg", "mlp"}));
  app.add_option("--epochs", o.epochs, "epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "batch per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--train-limit", o.train_limit, "use the first N training samples (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-limit", o.test_limit,
                 "evaluate on the first N test samples (0 = all 10,000; fewer evaluate faster "
                 "and measure accuracy coarser)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lr", o.lr, "SGD learning rate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--compression-scope", o.method.scope,
                 "error feedback and top-k selection per layer (each layer its k) or per merge "
                 "group (one selection over the group's concatenated gradient)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::scope_names));
  app.add_option("--momentum-correction", o.momentum_correction,
                 "sparse methods: DGC's momentum correction and factor masking (true/false)")
      ->capture_default_str();
  app.add_option("--factor-masking", o.factor_masking,
                 "with momentum correction: zero the velocity of every sent element (DGC; "
                 "true) or keep it and clear only the accumulation (false: density 1 is "
                 "momentum SGD)")
      ->capture_default_str();
  app.add_option("--dense-below", o.method.dense_below,
                 "sparse methods: send layers of fewer elements than this dense (0 = none)")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--nonfinite",
         [&cs](const std::string& name) {
           cs.nonfinite = gradcomp::nonfinite_policy_from_string(name);
         },
         "NaN / infinity in a gradient: propagate (send it), raise (end the run naming the "
         "layer and element) or skip_step (every rank skips the step; nothing finite is lost)")
      ->default_str("propagate")
      ->check(CLI::IsMember({"propagate", "raise", "skip_step"}));
}

//! The run's options: seed, data, report, checkpoints, target accuracy, threads, evaluations,
//! planning.
inline void add_run_options(CLI::App& app, train_options& o) {
  app.add_option("--seed", o.seed, "seed of the model, the shards and the samplers")
      ->capture_default_str();
  app.add_option("--data", o.data, "folder with the Fashion-MNIST IDX files (.gz or not)")
      ->capture_default_str();
  app.add_option("--report", o.report, "write the report as JSON to this file (rank 0)");
  app.add_option("--checkpoint", o.checkpoint,
                 "write a checkpoint into this folder (model, optimizer and every rank's "
                 "compression state: residuals, velocities, thresholds) at the end of training "
                 "and every --checkpoint-every iterations")
      ->check(CLI::ExistingDirectory);
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "with --checkpoint: also every N iterations (0 = only at the end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", o.resume,
                 "continue the training a --checkpoint run wrote into this folder (same options; "
                 "the run then continues bit for bit)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--stop-after-iterations", o.stop_after_iterations,
                 "stop after N iterations in all (a preemption, for tests; with --checkpoint the "
                 "checkpoint is written first; 0 = train every epoch)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--target-accuracy", o.target_accuracy,
                 "train until the first evaluation whose test accuracy reaches this fraction, "
                 "--epochs being the cap (0 = train every epoch); the report gives the time to "
                 "it (time_to_target_seconds; evaluations every 1/--evals-per-epoch epoch)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--label", o.label, "name of the run in the report");
  app.add_option("--threads", o.threads, "LibTorch and compressor threads per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--evals-per-epoch", o.evals_per_epoch, "test-set evaluations per epoch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--eval-stages", o.eval_stages,
                 "with --target-accuracy, an evaluation before an epoch's end runs in this many "
                 "parts of the (randomly ordered) test set and stops after a part whose accuracy "
                 "so far plus 3 standard errors is below the target; 1: always the whole test "
                 "set (the initial and the epochs' last evaluations always are)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--calibrate-under-load", o.calibrate_under_load,
                 "calibrate the network model's alpha and beta while this rank's forward and "
                 "backward passes run in a second thread, as in training, and once more without "
                 "them for what the merge plan sends after backward (true/false)")
      ->capture_default_str();
  app.add_option("--profile-iterations", o.profile_iterations,
                 "forward/backward passes timed before planning the merge")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--replan-after", o.replan_after,
                 "re-plan the merge once after W iterations from the backward times the "
                 "pipeline measured meanwhile, with the exchange running (0: never; not with "
                 "--method powersgd or --transport coded)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--replan-mode", o.replan_mode,
                 "with --replan-after: replan adopts the plan made from the measured backward "
                 "times; keep keeps the initial plan (the same groups, so the same results as "
                 "without --replan-after) and only predicts the iteration from those times")
      ->capture_default_str()
      ->check(CLI::IsMember({"replan", "keep"}));
}

//! The transports' parameters: servers, waits and deadlines, ring, hierarchical and coded exchange,
//! --sync.
inline void add_transport_options(CLI::App& app, train_options& o) {
  namespace gt = gradcomp_train;
  app.add_option("--servers", o.transport.servers,
                 "ps: co-located server ranks (0 = every rank); --sync async: dedicated server "
                 "ranks (0 = 1)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--ps-dense-pull", o.transport.ps_dense_pull,
               "ps: pull the dense average (default: the pushes' union when that is smaller)");
  app.add_option("--wait", o.transport.wait,
                 "ring and the allgather's dense switch: how the communication thread waits "
                 "between MPI_Test calls: spin, yield (sched_yield) or sleep (5 us doubling to "
                 "--wait-max-sleep-us)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::wait_names));
  app.add_option("--timeout", o.transport.timeout_seconds,
                 "deadline of every wait of the synchronous transports, seconds (0: none): a "
                 "rank that dies or a link that goes down ends every other rank with "
                 "mpi::timeout_error naming the transport, the peer and the time (exit 1); "
                 "restart from the last --checkpoint")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--wait-yield-rounds", o.transport.wait_yield_rounds,
                 "--wait sleep: MPI_Test rounds that yield before the first sleep")
      ->capture_default_str();
  app.add_option("--wait-max-sleep-us", o.transport.wait_max_sleep_us,
                 "--wait sleep: the longest sleep between MPI_Test calls, microseconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--segment-kib", o.transport.segment_kib,
                 "ring and the allgather's dense switch: largest message of a ring step, KiB (a "
                 "step's block is sent as segments of this size, at most 64)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ring-steps-in-flight", o.transport.ring_steps_in_flight,
                 "ring and the allgather's dense switch: steps in flight, 2 (each segment "
                 "forwarded to the next step as soon as it arrived: the link does not idle "
                 "between steps) or 1 (one step after the other; the same sums)")
      ->capture_default_str()
      ->check(CLI::Range(1, 2));
  app.add_option("--ring-trace", o.ring_trace,
                 "ring: write every rank's per-step ring timeline as CSV to FILE.<rank>.csv "
                 "(steady-clock seconds; docs/transport-benchmarks.md)");
  app.add_option("--group-size", o.transport.group_size, "hierarchical: ranks per group")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--redundancy", o.transport.redundancy,
                 "coded: R, the ranks that compute each part of the global batch, 1 <= R < P")
      ->capture_default_str();
  app.add_option("--coding", o.transport.coding,
                 "coded: packet coding, fixed_point (int32, agreed scale) or xor (float bits)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::coding_names));
  app.add_flag("--uncoded", o.transport.uncoded,
               "coded: the uncoded baseline of the same placement (each slice unicast to the "
               "rank that lacks it; no coding)");
  app.add_option("--coded-schedule", o.transport.coded_schedule,
                 "coded: concurrent (all groups at once) or serialized (one sender at a time)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::coded_schedule_names));
  app.add_option("--coded-variant", o.transport.coded_variant,
                 "coded: full (S3: every rank decodes whole missing parts) or reduce_scatter "
                 "(each rank decodes one block of coordinates, then a ring allgather)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::coded_variant_names));
  app.add_option("--sync", o.sync,
                 "sync (every transport) or async: asynchronous SGD through a parameter server of "
                 "--servers dedicated ranks (the last ones; 0 means 1), the others train without "
                 "a barrier (--transport ps only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--staleness-bound", o.staleness_bound,
                 "--sync async: SSP bound k (a worker at most k pushes ahead of the slowest; 0: "
                 "pure ASGD)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

//! Precision, loss scaling, optimizer and learning-rate schedule; fidelity remedies; hybrid
//! parallelism.
inline void add_training_remedy_options(CLI::App& app, train_options& o) {
  namespace gt = gradcomp_train;
  gt::large_batch_settings& lb = o.large_batch;
  app.add_option("--precision", lb.precision,
                 "type of every sent value (all methods): fp32, fp16 or bf16 (fp16 and bf16 "
                 "round, the rounding error stays in error feedback's residual)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::precision_names));
  app.add_option("--loss-scale", lb.loss_scale,
                 "none, dynamic (2^16, halved on overflow, doubled after 2000 clean steps) or a "
                 "fixed scale S; an overflowing step is skipped on every rank")
      ->capture_default_str();
  app.add_option("--optimizer", lb.optimizer,
                 "sgd (momentum SGD) or lars (layer-wise adaptive rate scaling, no weight decay "
                 "on biases and batch norm)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::optimizer_names));
  app.add_option("--warmup-epochs", lb.warmup_epochs,
                 "linear learning-rate warm-up, epochs (then --lr-decay)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--lr-decay", lb.lr_decay,
                 "after the warm-up: none (constant --lr), poly (decay as (1 - t)^2 to 0 at the "
                 "end of training, t the fraction of the steps after the warm-up), step (x "
                 "--lr-decay-factor at each of --lr-decay-epochs) or auto (poly for lars, none "
                 "for sgd)")
      ->capture_default_str()
      ->check(CLI::IsMember(gt::lr_decay_names));
  app.add_option("--lr-decay-epochs", lb.lr_decay_epochs,
                 "--lr-decay step: the epochs E (ascending, comma-separated, fractions "
                 "allowed): from iteration floor(E x iterations per epoch) on the rate is "
                 "multiplied by --lr-decay-factor")
      ->delimiter(',');
  app.add_option("--lr-decay-factor", lb.lr_decay_factor,
                 "--lr-decay step: the multiplier at each of --lr-decay-epochs, in (0, 1]")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--trust-coefficient", lb.trust_coefficient, "lars: eta")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", lb.weight_decay,
                 "lars: weight decay (not on 1-D tensors: biases, batch norm)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--inject-overflow-at", lb.inject_overflow_at,
                 "testing: at this iteration the last rank's gradients get +inf (needs "
                 "--loss-scale or --nonfinite raise or skip_step; -1: never)")
      ->capture_default_str();
  gt::fidelity_settings& fs = o.fidelity;
  app.add_option("--density-warmup-epochs", fs.density_warmup_epochs,
                 "sparse methods: DGC's density warm-up, from --warmup-initial-density down to "
                 "--density exponentially over E epochs, one density per epoch unless "
                 "--warmup-stepped false (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--warmup-initial-density", fs.warmup_initial_density,
                 "the density warm-up's first density, in (0, 1] (DGC: 0.25; a --density "
                 "above it warms up from --density, i.e. not at all)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--warmup-stepped", fs.warmup_stepped,
                 "the density warm-up: one density per whole epoch (DGC; true) or a continuous "
                 "exponential decay, a new density every iteration (false)")
      ->capture_default_str();
  app.add_option("--factor-masking-after-warmup", fs.mask_after_warmup,
                 "with --density-warmup-epochs and --factor-masking false: switch factor "
                 "masking on when the warm-up ends (true/false)")
      ->capture_default_str();
  app.add_option("--clip-norm", fs.clip_norm,
                 "DGC's local gradient clipping: each rank clips its whole gradient's L2 norm at "
                 "C / sqrt(P) before error feedback (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e30));
  app.add_option("--adaptive-density", fs.adaptive_density,
                 "sparse methods: per-layer densities from each layer's share of the gradient "
                 "norm, the same elements in total (true/false)")
      ->capture_default_str();
  app.add_option("--residual-stats", fs.residual_stats,
                 "sparse methods, --precision fp32: per layer and epoch, the error-feedback "
                 "residual's norm against the gradient's and the staleness of the values sent "
                 "(report's fidelity.residual; this rank; true/false)")
      ->capture_default_str();
  app.add_option("--parallel", o.parallel,
                 "data (every layer data parallel) or hybrid (S2: fully connected layers chosen "
                 "by --mp-layers run model parallel, the rest data parallel; docs/hybrid.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"data", "hybrid"}));
  app.add_option("--mp-layers", o.mp_layers,
                 "--parallel hybrid: auto (the planner's cost choice per FC layer) or a list of "
                 "FC layer names, e.g. fc1 or fc1,fc2")
      ->capture_default_str();
  app.add_option("--require-accuracy", o.require_accuracy,
                 "exit with status 4 if the final test accuracy is below this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
}

//! --method auto's options (auto_method.hpp, docs/train.md).
inline void add_auto_options(CLI::App& app, train_options& o) {
  auto_settings& a = o.method.automatic;
  app.add_option("--auto-critical-density", a.critical_density,
                 "--method auto: a sparse group's density while its gradient is in a critical "
                 "regime (Accordion), in [--density, 1]")
      ->capture_default_str();
  app.add_option("--auto-interval-epochs", a.interval_epochs,
                 "--method auto: the interval whose accumulated gradient norm decides the "
                 "regime, in epochs")
      ->capture_default_str();
  app.add_option("--auto-eta", a.eta,
                 "--method auto: a relative change of a group's gradient norm of at least this "
                 "from one interval to the next is a critical regime")
      ->capture_default_str();
  app.add_option("--auto-min-saving", a.min_saving,
                 "--method auto: a lossier choice must save at least this fraction of the "
                 "exposed time, in [0, 1)")
      ->capture_default_str();
  app.add_option("--auto-drop-intervals", a.drop_intervals,
                 "--method auto: the intervals after a learning-rate drop that are critical, "
                 "in [1, 1000]")
      ->capture_default_str();
  app.add_option("--auto-dense-share", a.dense_share,
                 "--method auto: the smallest layers that together hold at most this share of "
                 "the parameters are sent dense in every phase (a CNN's convolutions and "
                 "biases), in [0, 1); 0: none")
      ->capture_default_str();
}

//! Defines every option of gradcomp-train on `app`, each stored into its field of `o` (whose
//! values are the defaults).
inline void add_options(CLI::App& app, train_options& o) {
  add_method_options(app, o);
  add_run_options(app, o);
  add_transport_options(app, o);
  add_training_remedy_options(app, o);
  add_auto_options(app, o);
}

//! Checks of --sync and the learning-rate schedule (part of check_options).
//! @throws CLI::ValidationError naming the option and the problem.
inline void check_sync_and_schedule(const train_options& o) {
  namespace gt = gradcomp_train;
  using gradcomp_tools::format;
  const gt::large_batch_settings& lb = o.large_batch;
  if (o.sync == "async" && o.transport.name != "ps") {
    throw CLI::ValidationError(
        "--sync", "async runs through the parameter server: pass --transport ps (not '" +
                      o.transport.name + "')");
  }
  if (o.sync == "async" && o.target_accuracy > 0) {
    throw CLI::ValidationError("--target-accuracy", "training to a target is for --sync sync");
  }
  if (o.sync == "async" &&
      (lb.precision != "fp32" || lb.loss_scale != "none" || lb.optimizer != "sgd" ||
       lb.warmup_epochs != 0.0 || lb.lr_decay == "poly" || lb.lr_decay == "step")) {
    throw CLI::ValidationError("--sync", "async trains with fp32 values and plain SGD: "
                                         "--precision, --loss-scale, --optimizer, "
                                         "--warmup-epochs and --lr-decay poly and step are for "
                                         "--sync sync");
  }
  if (lb.lr_decay == "step") {
    if (lb.lr_decay_epochs.empty()) {
      throw CLI::ValidationError("--lr-decay", "step needs --lr-decay-epochs (the epochs the "
                                               "rate drops at)");
    }
    for (std::size_t i = 0; i < lb.lr_decay_epochs.size(); ++i) {
      const double e = lb.lr_decay_epochs[i];
      if (!std::isfinite(e) || e < lb.warmup_epochs || e <= 0.0 || e > 1e6 ||
          (i > 0 && e <= lb.lr_decay_epochs[i - 1])) {
        throw CLI::ValidationError(
            "--lr-decay-epochs",
            format("%g: each epoch must be positive, at most 1e6, at or after --warmup-epochs "
                   "%g and above the one before it",
                   e, lb.warmup_epochs));
      }
    }
    if (!(lb.lr_decay_factor > 0.0)) {
      throw CLI::ValidationError("--lr-decay-factor",
                                 format("%g is outside (0, 1]", lb.lr_decay_factor));
    }
  } else if (!lb.lr_decay_epochs.empty()) {
    throw CLI::ValidationError("--lr-decay-epochs",
                               "needs --lr-decay step (--lr-decay is '" + lb.lr_decay + "')");
  }
}

//! Checks of the method against the transport, --parallel and re-planning (part of check_options).
//! @throws CLI::ValidationError naming the option and the problem.
inline void check_method_and_transport(const train_options& o) {
  namespace gt = gradcomp_train;
  const gt::large_batch_settings& lb = o.large_batch;
  if (o.parallel == "hybrid" &&
      (o.sync != "sync" || o.transport.name == "coded" || o.transport.name == "none" ||
       lb.optimizer != "sgd" || lb.loss_scale != "none")) {
    throw CLI::ValidationError("--parallel", "hybrid runs with --sync sync, a transport other "
                                             "than coded and none, --optimizer sgd and no "
                                             "--loss-scale");
  }
  if (gt::is_quantizer_method(o.method.name) &&
      (o.transport.name == "ring" || o.transport.name == "allreduce" ||
       o.transport.name == "hierarchical" || o.transport.name == "coded" ||
       o.transport.name == "gtopk" || o.transport.name == "oktopk" || lb.precision != "fp32" ||
       o.sync != "sync")) {
    throw CLI::ValidationError(
        "--method", o.method.name +
                        " quantizes every value: it travels packed through --transport "
                        "allgather or ps (or none), with --precision fp32 and --sync sync (the "
                        "dense reductions would send 4-byte floats)");
  }
  if (o.method.name == "powersgd" &&
      (o.transport.name != "ring" || o.sync != "sync" || o.parallel != "data" ||
       lb.precision != "fp32" || lb.loss_scale != "none" ||
       o.method.compressor.nonfinite != gradcomp::nonfinite_policy::propagate ||
       !o.checkpoint.empty() || !o.resume.empty())) {
    throw CLI::ValidationError("--method", "powersgd runs its own two ring allreduces: it needs "
                                           "--transport ring, --sync sync, --parallel data, "
                                           "--precision fp32, no --loss-scale, --nonfinite "
                                           "propagate and no checkpoints");
  }
  if (o.replan_mode == "keep" && o.replan_after <= 0) {
    throw CLI::ValidationError("--replan-mode", "keep measures the warm-up of --replan-after W: "
                                                "it needs --replan-after W > 0 (got " +
                                                    std::to_string(o.replan_after) + ")");
  }
  if (o.replan_after > 0 &&
      (o.method.name == "powersgd" || o.transport.name == "coded" || o.sync != "sync")) {
    throw CLI::ValidationError("--replan-after",
                               "re-plans the pipeline's merge: not with --method powersgd "
                               "(one bucket after backward), --transport coded or --sync async");
  }
}

//! Why --method auto cannot run with these options (empty: it can, or the method is another).
inline std::string auto_problem(const train_options& o) {
  if (o.method.name != "auto") {
    return {};
  }
  const auto_settings& a = o.method.automatic;
  const fidelity_settings& f = o.fidelity;
  if (o.transport.name != "allgather" || o.sync != "sync" || o.parallel != "data" ||
      o.method.scope != "layer") {
    return "auto sends each group dense through the sparse allgather's ring or sparse through "
           "the allgather: it needs --transport allgather, --sync sync, --parallel data and "
           "--compression-scope layer";
  }
  if (f.density_warmup_epochs > 0 || f.adaptive_density || o.replan_after > 0 ||
      !o.checkpoint.empty() || !o.resume.empty()) {
    return "auto sets every layer's density itself and keeps its state in memory only: not with "
           "--density-warmup-epochs, --adaptive-density, --replan-after, --checkpoint or "
           "--resume";
  }
  if (!(a.critical_density > 0 && a.critical_density <= 1) ||
      a.critical_density < o.method.compressor.density) {
    return gradcomp_tools::format("--auto-critical-density %g is outside [--density, 1] = "
                                  "[%g, 1]",
                                  a.critical_density, o.method.compressor.density);
  }
  if (!(a.interval_epochs > 0 && a.interval_epochs <= 1e3)) {
    return gradcomp_tools::format("--auto-interval-epochs %g is outside (0, 1000]",
                                  a.interval_epochs);
  }
  if (!(a.eta > 0 && std::isfinite(a.eta))) {
    return gradcomp_tools::format("--auto-eta %g is not a finite value above 0", a.eta);
  }
  if (!(a.min_saving >= 0 && a.min_saving < 1)) {
    return gradcomp_tools::format("--auto-min-saving %g is outside [0, 1)", a.min_saving);
  }
  if (a.drop_intervals < 1 || a.drop_intervals > 1000) {
    return gradcomp_tools::format("--auto-drop-intervals %d is outside [1, 1000]",
                                  a.drop_intervals);
  }
  if (!(a.dense_share >= 0 && a.dense_share < 1)) {
    return gradcomp_tools::format("--auto-dense-share %g is outside [0, 1)", a.dense_share);
  }
  if (o.method.dense_below != 0) {
    return "auto chooses the layers it sends dense by --auto-dense-share: not with --dense-below";
  }
  return {};
}

//! Checks of the remedies, checkpoints and the compressor settings (part of check_options).
//! @throws CLI::ValidationError naming the option and the problem.
inline void check_remedies_and_state(const train_options& o) {
  namespace gt = gradcomp_train;
  using gradcomp_tools::format;
  const gt::large_batch_settings& lb = o.large_batch;
  const gt::fidelity_settings& fs = o.fidelity;
  if (const std::string why = gt::mp_layers_problem(o.mp_layers, o.model); !why.empty()) {
    throw CLI::ValidationError("--mp-layers", why);
  }
  if (lb.inject_overflow_at >= 0 && lb.loss_scale == "none" &&
      o.method.compressor.nonfinite == gradcomp::nonfinite_policy::propagate) {
    throw CLI::ValidationError("--inject-overflow-at",
                               "needs --loss-scale (dynamic or S) or --nonfinite raise or "
                               "skip_step");
  }
  try { // a malformed --loss-scale fails here, on every rank
    static_cast<void>(gt::make_loss_scale(lb.loss_scale));
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--loss-scale", e.what());
  }
  if (const std::string why =
          gt::fidelity_problem(fs, o.method.name, o.transport.name, o.method.scope, o.sync);
      !why.empty()) {
    throw CLI::ValidationError("--density-warmup-epochs/--clip-norm/--adaptive-density/"
                               "--residual-stats",
                               why);
  }
  if (const std::string why = auto_problem(o); !why.empty()) {
    throw CLI::ValidationError("--method", why);
  }
  if (fs.residual_stats && lb.precision != "fp32") {
    throw CLI::ValidationError("--residual-stats", "needs --precision fp32 (with fp16 / bf16 "
                                                   "values a sent element keeps its rounding "
                                                   "error and would count as held)");
  }
  if ((!o.checkpoint.empty() || !o.resume.empty()) &&
      (o.sync != "sync" || o.parallel != "data" || o.transport.name == "coded" ||
       fs.adaptive_density)) {
    throw CLI::ValidationError("--checkpoint/--resume",
                               "checkpoints are written and resumed for --sync sync, --parallel "
                               "data, a transport other than coded and no --adaptive-density");
  }
  if ((o.transport.name == "gtopk" || o.transport.name == "oktopk") &&
      (!gt::is_sparse_method(o.method.name) || fs.density_warmup_epochs > 0.0 ||
       fs.adaptive_density || o.sync != "sync")) {
    throw CLI::ValidationError("--transport", o.transport.name +
                                                  " takes a sparse --method at a fixed "
                                                  "--density (no --density-warmup-epochs or "
                                                  "--adaptive-density) and --sync sync");
  }
  if (fs.mask_after_warmup &&
      (!(fs.density_warmup_epochs > 0.0) || !o.momentum_correction || o.factor_masking)) {
    throw CLI::ValidationError("--factor-masking-after-warmup",
                               "switches masking on at the end of a density warm-up: it needs "
                               "--density-warmup-epochs E > 0, --momentum-correction true and "
                               "--factor-masking false");
  }
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) {
    throw CLI::ValidationError("--checkpoint-every", "needs --checkpoint DIR");
  }
  if (!(fs.warmup_initial_density > 0.0)) {
    throw CLI::ValidationError("--warmup-initial-density",
                               format("density %g is outside (0, 1]", fs.warmup_initial_density));
  }
  try { // the compressor settings' one check: the library's (density, interval, levels, threads)
    gradcomp::check_named_compressor_settings(o.method.compressor);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--density/--interval/--levels/--threads", e.what());
  }
}

//! Checks the options against each other after parsing (what CLI11's validators cannot), and
//! the compressor settings (o.method.compressor, complete: main() copies --seed, --precision and
//! --threads into them before) with the library's check.
//! @throws CLI::ValidationError naming the option and the problem.
inline void check_options(const train_options& o) {
  check_sync_and_schedule(o);
  check_method_and_transport(o);
  check_remedies_and_state(o);
}

} // namespace gradcomp_train
