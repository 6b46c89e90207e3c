// SPDX-License-Identifier: Apache-2.0
// Loss scaling over MPI: one rank's gradient overflows (an injected infinity) at one step; with
// the overflow agreed by gradcomp::mpi::any_rank every rank skips that same step and halves its
// scale, and the parameters stay bit-identical across ranks (a rank-local decision would let the
// replicas drift apart).
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/mpi.hpp>

#include "../common/catch.hpp"

#include <limits>
#include <vector>

#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

using namespace gradcomp;

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
