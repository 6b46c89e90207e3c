// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The set-up of gradcomp-train's synchronous training (--sync sync): the input checks
//! every rank agrees on before any training, the data, transport coded's placement, this rank's
//! replica and its gradient hooks. sync_setup is what the later steps (merge_plan.hpp,
//! training_loop.hpp, sync_report.hpp) share.
#pragma once

#include <gradcomp/coded.hpp>
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "../common/tool_support.hpp"
#include "data.hpp"
#include "exchange.hpp"
#include "hooks.hpp"
#include "model.hpp"
#include "training_support.hpp"

namespace gradcomp_train {

//! What the steps of one synchronous training run share. Not copyable: the gradient hooks and
//! the hybrid layers refer to it.
struct sync_setup {
  sync_setup(const train_options& options, const gradcomp::mpi::communicator& world)
      : o(options), comm(world), rank(world.rank()), ranks(world.size()), root(rank == 0) {}
  sync_setup(const sync_setup&) = delete;
  sync_setup& operator=(const sync_setup&) = delete;

  const train_options& o;
  const gradcomp::mpi::communicator& comm;
  const int rank;
  const int ranks;
  const bool root;
  training_data data;
  //! Transport coded: the placement, which parts of the global batch this rank computes.
  std::optional<gradcomp::coded::placement> coded;
  replica model;
  //! DGC's momentum correction in the pipeline's error feedback (momentum 0: off).
  bool correction = false;
  gradcomp::momentum_correction mc;
  std::string blas; //!< the BLAS library in use
  gradient_hooks hooks;

  //! Prints `text` on stderr, prefixed with the program's name (rank 0 only).
  void say(const std::string& text) const {
    if (root) {
      std::fprintf(stderr, "gradcomp-train: %s\n", text.c_str());
    }
  }
  //! Test accuracy and mean loss of the replica (the hybrid layers gathered) on the whole test
  //! set, or with `staged` in --eval-stages stages that stop early far below
  //! --target-accuracy. Collective.
  evaluation evaluate(bool staged = false) {
    return staged ? evaluate_replica(comm, model, data.test_set, o.eval_stages, o.target_accuracy)
                  : evaluate_replica(comm, model, data.test_set);
  }
};

//! @brief Checks the input on every rank and agrees on it (the data, and with transport coded
//! 1 <= R < P and the coded exchange's options), then builds the replica and decides on
//! momentum correction. Collective.
//! @return 0, or exit_bad_input (each problem printed on stderr) before any training.
inline int set_up(sync_setup& s) {
  const train_options& o = s.o;
  // --- input checks, agreed by every rank before any training
  std::string problem = load_data(o, s.ranks, "ranks", s.data.train_set, s.data.test_set);
  // transport coded: 1 <= R < P; building a coded exchange (local) also checks the options
  // and the placement's limits. `coded` is the placement: which parts this rank computes.
  const bool coded_transport = o.transport.name == "coded";
  if (problem.empty() && coded_transport) {
    const int r = o.transport.redundancy;
    if (r < 1 || r >= s.ranks) {
      problem = gradcomp_tools::format(
          "--redundancy %d is outside [1, P) = [1, %d): --transport coded needs 1 <= R < P%s", r,
          s.ranks, s.ranks == 1 ? " (one rank has nothing to exchange: run 2 or more ranks)" : "");
    } else {
      try {
        const gradcomp::mpi::coded_allreduce check(s.comm, coded_options(o.transport));
        s.coded.emplace(check.placement());
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
  }
  if (any_rank_has_problem(s.comm, problem)) {
    return exit_bad_input;
  }

  if (const std::string why = build_replica(s.model, o, s.comm); !why.empty()) {
    s.say("error: " + why);
    return exit_bad_input;
  }
  // DGC's momentum correction for sparse methods (Lin et al. 2018, eqs. 4-6), inside the
  // pipeline's error feedback (gradcomp::momentum_correction): each rank keeps its own velocity
  // u = m u + g per layer, accumulates u (not g) in the residual, sends the top of it and zeroes
  // u where it sent (momentum factor masking); the optimizer then applies the averaged update
  // without momentum. With a dense method this is exactly momentum SGD, so dense methods keep
  // the optimizer's momentum.
  s.correction =
      o.momentum_correction && is_sparse_method(o.method.name) && o.transport.name != "none";
  // --factor-masking false keeps the velocity of sent elements (gradcomp::momentum_correction)
  s.mc = gradcomp::momentum_correction{s.correction ? o.momentum : 0.0, o.factor_masking};
  s.data.cut(s.ranks, o.batch_size);
  if (const std::string why = lr_decay_problem(o.large_batch, s.data.iterations_per_epoch);
      !why.empty()) { // the same on every rank
    s.say("error: " + why);
    return exit_bad_input;
  }
  return 0;
}

//! Describes the run on stderr (rank 0): ranks, model, data, method, transport, merge, threads,
//! BLAS, and with transport coded the placement.
inline void describe_run(sync_setup& s) {
  using gradcomp_tools::format;
  const train_options& o = s.o;
  s.blas = blas_in_use();
  s.say(format(
      "%d ranks, model %s (%zu parameters in %zu tensors), %lld training samples "
      "(%lld per rank, %lld iterations of batch %d per epoch), method %s, transport %s, "
      "merge %s, %d torch thread(s) per rank, BLAS: %s",
      s.ranks, o.model.c_str(), s.model.total_numel, s.model.layers.size(),
      static_cast<long long>(s.data.train_set.size()), static_cast<long long>(s.data.per_rank),
      static_cast<long long>(s.data.iterations_per_epoch), o.batch_size, o.method.name.c_str(),
      o.transport.name.c_str(), o.merge.c_str(), o.threads, s.blas.c_str()));
  if (s.coded) {
    const gradcomp::coded::placement& pl = *s.coded;
    s.say(format("coded: redundancy R = %d, coding %s, schedule %s, variant %s: each global "
                 "batch of up to "
                 "%lld samples is split into C(%d, %d) = %zu parts; every rank computes %zu of "
                 "them (R/P of the batch, R times the work of plain data parallelism)",
                 pl.redundancy(), o.transport.coding.c_str(), o.transport.coded_schedule.c_str(),
                 o.transport.coded_variant.c_str(), static_cast<long long>(o.batch_size) * s.ranks,
                 s.ranks, pl.redundancy(), pl.part_count(), pl.parts_per_rank()));
  }
}

} // namespace gradcomp_train
