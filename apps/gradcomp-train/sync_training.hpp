// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp-train --sync sync: data-parallel training in which every rank trains on its
//! own shard and the gradients are averaged through a gradcomp pipeline each iteration (or, with
//! --transport coded, CSSGD's coded exchange over the parts of the global batch). Its steps, each
//! in the header named after it: the set-up (setup.hpp: input checks, data.hpp, model.hpp,
//! hooks.hpp), the hybrid plan (hybrid_plan.hpp, --mp-layers auto), the merge plan
//! (merge_plan.hpp), the epoch loop (training_loop.hpp, coded_training.hpp) and the replicas' check
//! and report (sync_report.hpp).
#pragma once

#include <gradcomp/mpi.hpp>

#include "hybrid_plan.hpp"
#include "merge_plan.hpp"
#include "report.hpp"
#include "setup.hpp"
#include "sync_report.hpp"
#include "training_loop.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! @brief Trains synchronously (see the file) and reports (rank 0). Collective over `comm`.
//! Returns the exit status (0, exit_bad_input, exit_replicas_differ, exit_accuracy_low, 1 when
//! the report cannot be written).
inline int train_sync(const train_options& o, const gradcomp::mpi::communicator& comm) {
  sync_setup s(o, comm);
  if (const int status = set_up(s); status != 0) {
    return status;
  }
  // training time from here: the hybrid plan (auto) and the merge plan profile and calibrate
  const auto training_start = clock_type::now();
  const double hybrid_plan_seconds = plan_hybrid(s);
  sync_update update(s);
  describe_run(s);
  // each parameter's gradient goes to s.hooks.on_gradient as backward produces it
  s.hooks.attach(s.model.params, !o.ring_trace.empty());

  merge_plan plan = plan_merge(s);
  plan.seconds += hybrid_plan_seconds; // both plans' profiles and calibrations: training time
  plan.info["seconds"] = plan.seconds;
  sync_trainer trainer(s, update, plan);
  trainer.train();
  const double wall_seconds = seconds_since(training_start);
  if (!o.ring_trace.empty()) {
    write_ring_trace(o.ring_trace, s.rank, trainer.ring_trace, trainer.iteration_trace,
                     s.hooks.layer_trace);
  }

  const sync_outcome outcome = check_replicas(s, trainer);
  if (!s.root) {
    return outcome.status;
  }
  return write_report(s, plan, update, trainer, outcome, wall_seconds);
}

} // namespace gradcomp_train
