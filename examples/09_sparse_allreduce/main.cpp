// SPDX-License-Identifier: Apache-2.0
// Sparse allreduces whose traffic grows slower than the sparse allgather's (docs/sparse-
// allreduce.md): gTop-k and Ok-Topk. Every rank selects the top 1 % of its accumulated gradient
// (error feedback written out by hand: the residual keeps what was not sent), the exchange
// agrees on a global selection G of about k elements with the sums over the ranks there, and
// the values a rank selected outside G go back to its residual. Then a dense ring allreduce
// whose waits sleep instead of spinning and give up after a timeout (docs/faq.md).
// Checked on every rank, every iteration: G is not empty (gTop-k: exactly k elements; Ok-Topk:
// what its reused threshold selects, about k), each sum equals MPI_Allreduce of the ranks' selected
// values there, and residual + the values sent at G is exactly the accumulated gradient (nothing is
// lost); the ring's average equals MPI_Allreduce / P. Exits 1 on every rank on a mismatch.
// Needs gradcomp::mpi. Run: mpiexec -n 3 build/examples/09_sparse_allreduce/...
#include <gradcomp/gradcomp.hpp> // exact_top_k, sparse_message
#include <gradcomp/mpi.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t n = 20000; // gradient elements
constexpr double density = 0.01; // each rank's local selection
constexpr std::size_t k = 200;   // the global count: density x n
constexpr int iterations = 5;

bool all_ranks(bool ok) {
  int all = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all == 1;
}

//! A few iterations of a global top-k exchange `step(local_message, residual, global_message)`
//! with error feedback; true when every check of the header comment holds (|G| == g_size
//! unless g_size is 0).
template <class Step>
bool global_selection(const gradcomp::mpi::communicator& comm, std::size_t g_size, Step step) {
  std::mt19937 rng(7u + static_cast<unsigned>(comm.rank())); // different gradients per rank
  std::normal_distribution<float> normal(0.0f, 1.0f);
  gradcomp::exact_top_k top(density);
  std::vector<float> residual(n, 0.0f);
  bool ok = true;
  for (int it = 0; it < iterations; ++it) {
    for (float& r : residual) {
      r += normal(rng); // accumulate this iteration's gradient
    }
    const std::vector<float> accumulated = residual;
    gradcomp::sparse_message local_message, global_message;
    top.compress(std::span<const float>(residual), local_message);
    for (const std::uint32_t i : local_message.indices) {
      residual[i] = 0.0f; // sent
    }
    step(local_message, residual, global_message);

    // the sums at G against MPI_Allreduce of every rank's selected values
    std::vector<float> selected(n, 0.0f), reference(n);
    gradcomp::decompress(local_message, selected);
    MPI_Allreduce(selected.data(), reference.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    ok = ok && !global_message.indices.empty() &&
         (g_size == 0 || global_message.indices.size() == g_size);
    std::vector<bool> in_g(n, false);
    for (std::size_t j = 0; j < global_message.indices.size(); ++j) {
      const std::uint32_t i = global_message.indices[j];
      in_g[i] = true;
      ok = ok && std::abs(global_message.values[j] - reference[i]) <=
                     1e-5f * (1.0f + std::abs(reference[i]));
    }
    // conservation: what was summed at G plus the residual is the accumulation, bit for bit
    for (std::size_t i = 0; i < n; ++i) {
      ok = ok && residual[i] + (in_g[i] ? selected[i] : 0.0f) == accumulated[i];
    }
  }
  return ok;
}

bool gtopk_example(const gradcomp::mpi::communicator& comm) {
  gradcomp::mpi::gtopk_allreduce gtopk(comm); // options: tags, wait policy
  const auto step = [&](const gradcomp::sparse_message& local_message, std::span<float> residual,
                        gradcomp::sparse_message& global_message) {
    gtopk(local_message, k, global_message); // collective
    gradcomp::mpi::return_unselected(residual, local_message, global_message);
  };
  return global_selection(comm, k, step); // G: exactly k elements
}

bool oktopk_example(const gradcomp::mpi::communicator& comm) {
  gradcomp::mpi::oktopk_allreduce oktopk(comm); // options: encoding, intervals, tags, wait
  const auto step = [&](const gradcomp::sparse_message& local_message, std::span<float> residual,
                        gradcomp::sparse_message& global_message) {
    oktopk(local_message, k, global_message); // collective
    gradcomp::mpi::return_unselected(residual, local_message, global_message);
  };
  // G: what the global threshold selects (about k; reused between evaluations): no size check
  return global_selection(comm, 0, step);
}

//! A dense ring allreduce whose waits sleep (backing off to 50 us) and time out after 300 s.
bool sleeping_ring(const gradcomp::mpi::communicator& comm) {
  gradcomp::mpi::ring_allreduce_options o;
  o.wait = {.kind = gradcomp::mpi::wait_kind::sleep, .max_sleep = std::chrono::microseconds{50}};
  o.wait.timeout_seconds = 300.0; // gradcomp-train's default (--timeout 300)
  gradcomp::mpi::dense_exchange exchange(comm, o);

  std::vector<float> values(n), reference(n);
  for (std::size_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>((i * 31 + static_cast<std::size_t>(comm.rank()) * 17) % 101);
  }
  MPI_Allreduce(values.data(), reference.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  exchange.start_in_place(values); // the average over the ranks, in place
  exchange.wait();
  bool ok = true;
  for (std::size_t i = 0; i < n; ++i) {
    ok = ok && values[i] == reference[i] / static_cast<float>(comm.size()); // integers: exact
  }
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  const gradcomp::mpi::communicator comm(MPI_COMM_WORLD);
  bool ok = true;
  const auto check = [&](std::string_view what, bool passed) {
    passed = all_ranks(passed);
    if (comm.rank() == 0) {
      std::printf("%s: %.*s\n", passed ? "ok" : "FAILED", static_cast<int>(what.size()),
                  what.data());
    }
    ok = ok && passed;
  };
  check("gTop-k: sums at G, error feedback exact", gtopk_example(comm));
  check("Ok-Topk: sums at G, error feedback exact", oktopk_example(comm));
  check("dense ring with a sleeping wait policy and a timeout", sleeping_ring(comm));
  if (comm.rank() == 0) {
    std::printf(ok ? "ok: %d ranks\n" : "FAILED: %d ranks\n", comm.size());
  }
  return ok ? 0 : 1;
}
