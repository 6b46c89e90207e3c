// SPDX-License-Identifier: Apache-2.0
// A pipeline over MPI initialised with MPI_THREAD_FUNNELED: its communication thread may not call
// MPI, so the transport's first start() throws mpi_error naming the level, and finish() rethrows
// it on every rank (no MPI call made, no hang). The same transport driven from the main thread,
// which FUNNELED allows, averages as MPI_Allreduce does. Its own program: the level is fixed at
// MPI_Init_thread. Run under mpiexec with 2 or more ranks; prints "all N ranks ok".
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

namespace gm = gradcomp::mpi;

void expect(bool condition, const char* what, int rank, int& failures) {
  if (!condition) {
    std::printf("FAILED on rank %d: %s\n", rank, what);
    ++failures;
  }
}

} // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int failures = 0;
  int rank = 0;
  int p = 1;
  {
    const gm::communicator comm(MPI_COMM_WORLD);
    rank = comm.rank();
    p = comm.size();
    expect(provided == MPI_THREAD_FUNNELED, "MPI provides MPI_THREAD_FUNNELED as asked", rank,
           failures);
    const std::vector<std::size_t> layer_numel = {1000, 10};
    std::vector<std::vector<float>> gradients;
    for (const std::size_t n : layer_numel) {
      gradients.emplace_back(n, static_cast<float>(rank + 1));
    }

    // 1. a pipeline: the communication thread's start() refuses, finish() rethrows
    {
      gm::sparse_exchange exchange(comm);
      gradcomp::pipeline pipe(layer_numel, gradcomp::pipeline_policy::fixed_grouping{},
                              gradcomp::exact_top_k(1.0), exchange);
      std::string message;
      try {
        for (std::size_t l = layer_numel.size(); l-- > 0;) {
          pipe.gradient_ready(l, gradients[l]);
        }
        pipe.finish();
      } catch (const gm::mpi_error& e) {
        message = e.what();
      }
      expect(message.find("MPI_THREAD_FUNNELED") != std::string::npos &&
                 message.find("MPI_THREAD_SERIALIZED") != std::string::npos &&
                 message.find("sparse_exchange") != std::string::npos,
             "finish() rethrows mpi_error naming the transport, the provided and the needed "
             "level",
             rank, failures);
      if (!message.empty() && rank == 0) {
        std::printf("thread level: %s\n", message.c_str());
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    // 2. the same transport from the main thread: allowed, and it averages
    {
      gm::dense_exchange exchange(comm);
      std::vector<float> values(1000, static_cast<float>(rank + 1));
      exchange.start_in_place(values);
      exchange.wait();
      const float want = static_cast<float>(p + 1) / 2.0f; // mean of 1 .. p
      expect(std::abs(values.front() - want) < 1e-6f && std::abs(values.back() - want) < 1e-6f,
             "the main thread's exchange averages", rank, failures);
    }
  }
  int all_ok = failures == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0 && all_ok) {
    std::printf("all %d ranks ok\n", p);
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
