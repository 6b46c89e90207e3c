// SPDX-License-Identifier: Apache-2.0
// gradcomp over MPI with plain std::vector<float> gradients (no LibTorch). Every rank has four
// "layers"; each iteration it reports their gradients, last layer first as backward would, to a
// gradcomp::pipeline that keeps 10 % of each (exact top-k, error feedback per layer), merges
// the layers into two groups and averages each group across the ranks with the sparse
// allgather (mpi::sparse_exchange) on its communication thread.
// The check, independent of the transport: error feedback sends (residual before + gradient -
// residual after), so each rank recomputes what it sent from the pipeline's public residuals;
// MPI_Allreduce of that, divided by the ranks, must equal the pipeline's average, and each
// layer must have sent exactly its 10 %. Exits 1 on every rank on a mismatch.
// Needs gradcomp::mpi. Run: mpiexec -n 3 build/examples/gradcomp_example_mpi_vector
#include <gradcomp/gradcomp.hpp> // the compressors
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr double density = 0.10;

//! What error feedback sent for one layer: residual_before + gradient - residual_after.
std::vector<float> sent_values(std::span<const float> residual_before,
                               std::span<const float> gradient,
                               std::span<const float> residual_after) {
  std::vector<float> sent(gradient.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    sent[i] = (residual_before[i] + gradient[i]) - residual_after[i];
  }
  return sent;
}

//! True if `average` matches the reference MPI_Allreduce(sent) / ranks and `sent` has exactly
//! ceil(density x n) nonzeros (the compression really happened). Collective on MPI_COMM_WORLD.
bool matches_reference(const std::vector<float>& sent, std::span<const float> average, int ranks) {
  std::vector<float> reference(sent.size());
  MPI_Allreduce(sent.data(), reference.data(), static_cast<int>(sent.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  bool ok = true;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const float expected = reference[i] / static_cast<float>(ranks);
    ok = ok && std::abs(average[i] - expected) <= 1e-5f * (1.0f + std::abs(expected));
  }
  const auto nonzeros = static_cast<std::size_t>(
      std::count_if(sent.begin(), sent.end(), [](float v) { return v != 0.0f; }));
  return ok && nonzeros == static_cast<std::size_t>(std::ceil(density * sent.size()));
}

} // namespace

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  const gradcomp::mpi::communicator comm(MPI_COMM_WORLD);             // gradcomp's own duplicate
  const std::vector<std::size_t> layer_numel = {3000, 100, 2000, 10}; // forward order

  // Two groups in backward order: layers 3 and 2 in one message, then layers 1 and 0.
  const gradcomp::schedule::grouping groups =
      gradcomp::schedule::grouping_from_ends({2, 4}, layer_numel.size());
  gradcomp::mpi::sparse_exchange exchange(comm); // must outlive the pipeline
  gradcomp::pipeline pipe(layer_numel, gradcomp::pipeline_policy::fixed_grouping{groups},
                          gradcomp::exact_top_k(density), exchange);

  std::mt19937 rng(1000u + static_cast<unsigned>(comm.rank())); // different gradients per rank
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bool ok = true;
  for (int iteration = 0; iteration < 5; ++iteration) {
    std::vector<std::vector<float>> gradients, residuals_before;
    for (std::size_t l = 0; l < layer_numel.size(); ++l) {
      gradients.emplace_back(layer_numel[l]);
      std::generate(gradients[l].begin(), gradients[l].end(), [&] { return normal(rng); });
      const std::span<const float> r = pipe.residual(l);
      residuals_before.emplace_back(r.begin(), r.end());
    }
    for (std::size_t l = layer_numel.size(); l-- > 0;) { // backward: last layer first
      pipe.gradient_ready(l, gradients[l]);
    }
    pipe.finish(); // waits for both groups' exchanges
    for (std::size_t l = 0; l < layer_numel.size(); ++l) {
      const std::vector<float> sent =
          sent_values(residuals_before[l], gradients[l], pipe.residual(l));
      ok = matches_reference(sent, pipe.averaged(l), comm.size()) && ok;
    }
    if (comm.rank() == 0) {
      const gradcomp::pipeline_iteration_stats& stats = pipe.last_stats();
      std::printf("iteration %d: rank 0 sent %zu of %zu elements, %zu bytes (dense: %zu)\n",
                  iteration, stats.selected, stats.numel, stats.bytes_sent,
                  stats.numel * sizeof(float));
    }
  }

  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (comm.rank() == 0) {
    std::printf(all_ok ? "ok: %d ranks, averages match MPI_Allreduce of what each rank sent\n"
                       : "FAILED: %d ranks, an average differs from the MPI_Allreduce reference\n",
                comm.size());
  }
  return all_ok ? 0 : 1;
}
