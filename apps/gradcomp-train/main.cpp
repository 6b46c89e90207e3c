// SPDX-License-Identifier: Apache-2.0
// gradcomp-train: data-parallel training of a LibTorch network on Fashion-MNIST across MPI
// ranks, gradients exchanged through a gradcomp pipeline chosen on the command line (docs/
// train.md). Every rank trains on its own shard; per-parameter tensor hooks hand each gradient
// to the pipeline as backward produces it (WFBP), which compresses it (per-layer error feedback)
// and exchanges merged groups on a communication thread; the averaged gradient then drives
// SGD with momentum. --transport coded runs CSSGD (docs/coded.md): every part of the global
// batch is computed by R ranks, one backward per part, through a multi-part pipeline whose
// coded exchange (mpi::coded_dense_exchange, or mpi::coded_sparse_exchange for top-k methods)
// averages all parts.
// Prints a table on stdout (rank 0), writes the same as JSON (--report), and fails unless every
// rank ends with bit-identical parameters.
// This file parses the command line (options.hpp) and starts MPI; --sync sync trains in
// sync_training.hpp (its steps: setup.hpp with data.hpp, model.hpp and hooks.hpp; merge_plan.hpp;
// training_loop.hpp with coded_training.hpp; sync_report.hpp), --sync async in
// async_training.hpp.
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "async_training.hpp"
#include "exchange.hpp"
#include "large_batch.hpp"
#include "options.hpp"
#include "sync_training.hpp"
#include "training_support.hpp"

namespace {

namespace gt = gradcomp_train;
using gt::barrier;
using gt::exit_bad_input;

// MPI_Finalize can hang with 3+ ranks over UCX/TCP (MPICH 4.0.2; docs/emulated-cluster.md,
// "Known problems"): everything is written and every rank has passed a barrier by then, so a
// watchdog ends the process with its status if MPI_Finalize has not returned in 20 s.
void finalize_with_watchdog(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 200 && !done.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!done.load()) {
      std::_Exit(status);
    }
  });
  MPI_Finalize();
  done = true;
  watchdog.join();
}

// This process's rank from the launcher's environment, before MPI_Init (MPICH's PMI_RANK or Open
// MPI's OMPI_COMM_WORLD_RANK; 0 without either): only rank 0 prints the command line's errors.
int rank_from_environment() {
  for (const char* name : {"PMI_RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(name)) {
      return std::atoi(v);
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  gt::train_options o;
  CLI::App app{"gradcomp-train: data-parallel training on Fashion-MNIST with gradcomp "
               "(run under mpiexec)"};
  gt::add_options(app, o);

  const bool root = rank_from_environment() == 0;
  try {
    app.parse(argc, argv);
    // the compressor settings' other fields (--precision is one of precision_names by now)
    o.method.compressor.seed = o.seed;
    o.method.compressor.values = gt::wire_type(o.large_batch.precision);
    o.method.compressor.threads = static_cast<unsigned>(o.threads);
    if (o.method.name == "auto" && app.count("--factor-masking") == 0) {
      o.factor_masking = false; // auto's dense groups (density 1) then run momentum SGD
    }
    gt::check_options(o);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) { // --help
      if (root) {
        app.exit(e);
      }
      return 0;
    }
    if (root) {
      std::fprintf(stderr, "gradcomp-train: error: %s\n(run with --help for the options)\n",
                   e.what());
    }
    return exit_bad_input;
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int status = 0;
  try {
    if (provided < MPI_THREAD_SERIALIZED) {
      throw std::runtime_error("MPI provides " + gradcomp::mpi::thread_level_name(provided) +
                               ", below the MPI_THREAD_SERIALIZED the pipeline's "
                               "communication thread needs");
    }
    if (o.parallel == "hybrid" && provided < MPI_THREAD_MULTIPLE) {
      // the model-parallel collectives run while the pipeline's thread calls MPI
      throw std::runtime_error("--parallel hybrid needs MPI_THREAD_MULTIPLE; this MPI provides " +
                               gradcomp::mpi::thread_level_name(provided));
    }
    const gradcomp::mpi::communicator comm(MPI_COMM_WORLD);
    status = o.sync == "async" ? gt::train_async(o, comm) : gt::train_sync(o, comm);
    barrier(comm);
  } catch (const gt::agreed_refusal& e) {
    // every rank got here together: one message, a clean end
    if (root) {
      std::fprintf(stderr, "gradcomp-train: error: %s\n", e.what());
    }
    status = e.exit_status();
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "gradcomp-train: rank %d: error: %s\n", rank, e.what());
    if (std::string_view(e.what()).find("NaN") != std::string_view::npos &&
        o.method.compressor.nonfinite == gradcomp::nonfinite_policy::propagate) {
      // the wire refuses NaN (gradcomp::nonfinite_policy::propagate): the training diverged
      std::fprintf(stderr,
                   "gradcomp-train: rank %d: hint: a gradient became NaN (the training "
                   "diverged): %s\n",
                   rank, gt::divergence_hint);
    }
    std::fflush(stderr);
    // Hydra forwards a rank's stderr through a pipe that MPI_Abort's teardown may not drain
    // (the message was seen lost in CI): give the proxy a moment to forward the line first
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // every rank ends (after mpi::timeout_error, too: MPICH cannot recover inside the job);
    // restart from the last --checkpoint
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  finalize_with_watchdog(status);
  return status;
}
