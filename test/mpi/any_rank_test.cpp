// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::any_rank (mpi/any_rank.hpp): true on every rank exactly when some rank of the
// communicator passed true (against the OR every rank computes from the flags' pattern, on
// MPI_COMM_WORLD and on each half of a split of it); and its use, loss scaling over MPI: one
// rank's gradient overflows (an injected infinity) at one step; with the overflow agreed by
// any_rank every rank skips that same step and halves its scale, and the parameters stay
// bit-identical across ranks (a rank-local decision would let the replicas drift apart).
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/any_rank.hpp>

#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_any_rank_test {

using namespace gradcomp;

namespace {

// Whether any of ranks 0 .. ranks - 1 sets its flag.
bool any_of_ranks(int ranks, const std::function<bool(int)>& flag) {
  for (int r = 0; r < ranks; ++r) {
    if (flag(r)) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("any_rank is true on every rank exactly when some rank passes true", "[mpi][any_rank]") {
  const int world_rank = test::world_rank();
  const int p = test::world_size();
  const std::vector<std::pair<const char*, std::function<bool(int)>>> patterns{
      {"no rank", [](int) { return false; }},
      {"rank 0 only", [](int r) { return r == 0; }},
      {"the last rank only", [p](int r) { return r == p - 1; }},
      {"the odd ranks", [](int r) { return r % 2 == 1; }},
      {"every rank", [](int) { return true; }},
  };
  {
    const mpi::communicator comm(MPI_COMM_WORLD);
    for (const auto& [name, flag] : patterns) {
      CAPTURE(name);
      CHECK(mpi::any_rank(flag(world_rank), comm) == any_of_ranks(p, flag));
    }
  }
  // on a communicator of its own: only its ranks' flags count (rank 1 alone sets its flag,
  // so the even half, rank 1 not in it, agrees on false)
  MPI_Comm halves = MPI_COMM_NULL; // even and odd world ranks, in world order
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &halves) == MPI_SUCCESS);
  {
    const mpi::communicator half(halves);
    CHECK(mpi::any_rank(world_rank == 1, half) == (world_rank % 2 == 1));
  }
  MPI_Comm_free(&halves);
}

TEST_CASE("loss scale: an overflow on one rank is skipped on every rank", "[loss_scale]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int injector = p - 1;
  constexpr int steps = 6;
  constexpr int bad_step = 3;
  const std::size_t n = 257;
  std::vector<float> w = test::rank_values(n, 0, 7); // same start on every rank
  loss_scale scale({.initial_scale = 1024, .growth_interval = 2});
  mpi::ring_allreduce allreduce(comm);
  std::vector<bool> applied;
  std::vector<double> scales;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> g = test::rank_values(n, comm.rank(), 100 + static_cast<unsigned>(t));
    for (float& x : g) {
      x *= static_cast<float>(scale.scale());
    }
    if (t == bad_step && comm.rank() == injector) {
      g[17] = std::numeric_limits<float>::infinity();
    }
    const bool overflow = mpi::any_rank(has_overflow(g, value_type::fp16), comm);
    const std::vector<float> before = w;
    const double used_scale = scale.scale();
    const auto step = scale.update(overflow);
    applied.push_back(step.apply);
    scales.push_back(scale.scale());
    if (step.apply) {
      round_values_to(value_type::fp16, g); // the fp16 wire
      allreduce(g);
      const auto unscale = static_cast<float>(1.0 / used_scale / p);
      for (std::size_t i = 0; i < n; ++i) {
        w[i] -= 0.1f * g[i] * unscale;
      }
    } else {
      REQUIRE(test::same_bits(w, before));
    }
    REQUIRE(test::identical_on_all_ranks(w));
  }
  CHECK(applied == std::vector<bool>{true, true, true, false, true, true});
  CHECK(scales == std::vector<double>{1024, 2048, 2048, 1024, 1024, 2048});
  CHECK(scale.skipped_steps() == 1);
}

} // namespace mpi_any_rank_test
