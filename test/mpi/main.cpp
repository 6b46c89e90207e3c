// SPDX-License-Identifier: Apache-2.0
// Catch2 runner for the MPI tests: initialises MPI, runs the same test sequence on every rank
// (each test is collective), and fails the process if any rank failed.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include "../common/catch.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  int failed = session.applyCommandLine(argc, argv);
  if (failed == 0) {
    failed = session.run();
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
