// SPDX-License-Identifier: Apache-2.0
// Your own transport for gradcomp::pipeline, written with plain MPI calls: each group's message
// is decompressed into the average buffer and summed across the ranks with a nonblocking
// MPI_Iallreduce; completion (test() or wait(), whichever sees it first) divides by the ranks.
// A type that opts in with `using transport_concept = gradcomp::transport_tag;` and has
// start(message, average), bool test() and wait() models gradcomp::pipeline_policy::transport;
// the pipeline calls them on its communication thread.
// The checks, independent of the transport: polled with test(), it averages a known message;
// in the pipeline, error feedback sends (residual before + gradient - residual after), so
// MPI_Allreduce of that over the ranks, divided by their number, must equal the pipeline's
// average, and each layer must send exactly its 10 %. Exits 1 on every rank on a
// mismatch. Needs MPI (not gradcomp::mpi's headers). Run: mpiexec -n 3
// build/examples/gradcomp_example_custom_transport. See docs/extending.md.
#include <gradcomp/pipeline.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

//! Averages one message across the ranks of its own duplicate of `comm` with MPI_Iallreduce.
//! O(n) per operation, 4n bytes reduced; one operation at a time; collective (every rank starts
//! the same sequence of operations with the same dense lengths). MPI errors are returned, not
//! fatal, and thrown as std::runtime_error.
class iallreduce_exchange {
public:
  using transport_concept = gradcomp::transport_tag; // start() leaves the mean over the ranks
  explicit iallreduce_exchange(MPI_Comm comm) {
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_size(comm_, &ranks_), "MPI_Comm_size");
  }
  iallreduce_exchange(const iallreduce_exchange&) = delete;
  iallreduce_exchange& operator=(const iallreduce_exchange&) = delete;
  ~iallreduce_exchange() {
    if (!done_) {
      MPI_Wait(&request_, MPI_STATUS_IGNORE); // never free a pending collective's buffer
    }
    MPI_Comm_free(&comm_);
  }

  //! Starts averaging `m` (dense length n) into `average` (n floats, untouched until done).
  //! @throws std::invalid_argument if the lengths differ or n exceeds INT_MAX;
  //! std::logic_error if the previous operation has not completed.
  void start(const gradcomp::sparse_message& m, std::span<float> average) {
    if (!done_) {
      throw std::logic_error("iallreduce_exchange: the previous operation is still in flight");
    }
    if (average.size() > static_cast<std::size_t>(INT_MAX)) {
      throw std::invalid_argument("iallreduce_exchange: " + std::to_string(average.size()) +
                                  " elements exceed MPI's int count " + std::to_string(INT_MAX));
    }
    gradcomp::decompress(m, average); // checks the lengths; `m` is free again after start()
    average_ = average;
    check(MPI_Iallreduce(MPI_IN_PLACE, average.data(), static_cast<int>(average.size()), MPI_FLOAT,
                         MPI_SUM, comm_, &request_),
          "MPI_Iallreduce");
    done_ = false;
  }
  //! Progress without blocking; true once `average` holds the mean.
  bool test() {
    int flag = 0;
    if (!done_) {
      check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    }
    if (!done_ && flag != 0) {
      complete();
    }
    return done_;
  }
  //! Blocks until `average` holds the mean (returns at once when done).
  void wait() {
    if (!done_) {
      check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
      complete();
    }
  }

private:
  static void check(int rc, const char* call) {
    if (rc != MPI_SUCCESS) {
      throw std::runtime_error(std::string("iallreduce_exchange: ") + call + " failed");
    }
  }
  void complete() {
    for (float& v : average_) {
      v /= static_cast<float>(ranks_);
    }
    done_ = true;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::span<float> average_;
  int ranks_ = 1;
  bool done_ = true;
};

static_assert(gradcomp::pipeline_policy::transport<iallreduce_exchange>);

//! The transport alone, completed by polling test(): every rank sends (rank + 1) at every
//! other element, so the mean there is (ranks + 1) / 2 and 0 elsewhere.
bool polls_to_the_mean(iallreduce_exchange& exchange, int rank, int ranks) {
  gradcomp::sparse_message m;
  m.clear(1000);
  for (std::uint32_t i = 0; i < 1000; i += 2) {
    m.indices.push_back(i);
    m.values.push_back(static_cast<float>(rank + 1));
  }
  std::vector<float> average(1000, -1.0f);
  exchange.start(m, average);
  while (!exchange.test()) {
  }
  bool ok = true;
  for (std::size_t i = 0; i < average.size(); ++i) {
    ok = ok && average[i] == (i % 2 == 0 ? static_cast<float>(ranks + 1) / 2.0f : 0.0f);
  }
  return ok;
}

bool train(int rank, int ranks) {
  const std::vector<std::size_t> numel = {3000, 100, 2000, 10}; // forward order
  iallreduce_exchange exchange(MPI_COMM_WORLD);                 // must outlive the pipeline
  bool ok = polls_to_the_mean(exchange, rank, ranks);           // before the pipeline uses it
  gradcomp::pipeline pipe(
      numel,
      gradcomp::pipeline_policy::fixed_grouping{gradcomp::schedule::grouping_from_ends({2, 4}, 4)},
      gradcomp::exact_top_k(0.1), exchange);
  std::mt19937 rng(2000u + static_cast<unsigned>(rank)); // different gradients per rank
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int iteration = 0; iteration < 5; ++iteration) {
    std::vector<std::vector<float>> grads, before;
    for (std::size_t l = 0; l < numel.size(); ++l) {
      grads.emplace_back(numel[l]);
      std::generate(grads[l].begin(), grads[l].end(), [&] { return normal(rng); });
      before.emplace_back(pipe.residual(l).begin(), pipe.residual(l).end());
    }
    for (std::size_t l = numel.size(); l-- > 0;) { // backward: last layer first
      pipe.gradient_ready(l, grads[l]);
    }
    pipe.finish(); // the communication thread ran start/test/wait for both groups
    for (std::size_t l = 0; l < numel.size(); ++l) {
      std::vector<float> sent(numel[l]), reference(numel[l]);
      for (std::size_t i = 0; i < sent.size(); ++i) {
        sent[i] = (before[l][i] + grads[l][i]) - pipe.residual(l)[i];
      }
      MPI_Allreduce(sent.data(), reference.data(), static_cast<int>(sent.size()), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      for (std::size_t i = 0; i < sent.size(); ++i) {
        const float expected = reference[i] / static_cast<float>(ranks);
        ok = ok && std::abs(pipe.averaged(l)[i] - expected) <= 1e-5f * (1.0f + std::abs(expected));
      }
      const auto nonzeros = std::count_if(sent.begin(), sent.end(), [](float v) { return v != 0; });
      ok = ok && static_cast<std::size_t>(nonzeros) == gradcomp::k_for_density(numel[l], 0.1);
    }
    if (rank == 0) {
      std::printf("iteration %d: rank 0 sent %zu of %zu elements\n", iteration,
                  pipe.last_stats().selected, pipe.last_stats().numel);
    }
  }
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // the pipeline's thread calls MPI while this one waits in finish(): SERIALIZED is enough
  int ok = provided >= MPI_THREAD_SERIALIZED ? 1 : 0;
  if (ok != 0) {
    try {
      ok = train(rank, ranks) ? 1 : 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(ok != 0 ? "ok: %d ranks, averages match MPI_Allreduce of what each rank sent\n"
                        : "FAILED: %d ranks, an average or a count differs from the reference\n",
                ranks);
  }
  MPI_Finalize();
  return ok != 0 ? 0 : 1;
}
