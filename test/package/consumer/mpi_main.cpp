// SPDX-License-Identifier: Apache-2.0
// A consumer of gradcomp::mpi: every rank compresses its gradient, the sparse allgather
// exchange averages the messages, and the result is checked against MPI_Allreduce of what each
// rank sent.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  const gradcomp::mpi::communicator comm(MPI_COMM_WORLD);
  const std::vector<std::size_t> layer_numel = {500};
  gradcomp::mpi::sparse_exchange exchange(comm);
  const gradcomp::schedule::grouping groups = gradcomp::schedule::per_layer(layer_numel.size());
  gradcomp::pipeline pipe(layer_numel, gradcomp::pipeline_policy::fixed_grouping{groups},
                          gradcomp::exact_top_k(0.1), exchange);
  std::vector<float> grad(500);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    grad[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(comm.rank()) * 13) % 101) - 50;
  }
  pipe.gradient_ready(0, grad);
  pipe.finish();
  std::vector<float> sent(grad.size()), reference(grad.size());
  const std::span<const float> residual = pipe.residual(0);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    sent[i] = grad[i] - residual[i];
  }
  MPI_Allreduce(sent.data(), reference.data(), static_cast<int>(sent.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  const std::span<const float> average = pipe.averaged(0);
  bool ok = true;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    ok = ok && std::abs(average[i] - reference[i] / static_cast<float>(comm.size())) <= 1e-4f;
  }
  if (comm.rank() == 0) {
    std::printf("consumer_mpi: %s (%d ranks)\n", ok ? "ok" : "FAILED", comm.size());
  }
  return ok ? 0 : 1;
}
