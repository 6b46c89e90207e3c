// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::agree_grouping: every rank gets rank 0's grouping; a layout mismatch or an
// invalid proposal makes every rank throw (none hangs); agreed_grouping plans on rank 0 only.
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/agreed_grouping.hpp>
#include <gradcomp/mpi/pipeline_transports.hpp>
#include <gradcomp/pipeline.hpp>

#include "../common/catch.hpp"

#include <stdexcept>
#include <vector>

#include "mpi_test_util.hpp"

using namespace gradcomp;

namespace {
const std::vector<std::size_t> sizes{300, 17, 1000, 1, 64, 5};
} // namespace

TEST_CASE("agree_grouping gives every rank rank 0's grouping", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  // every rank proposes something different; rank 0's must win
  schedule::grouping mine =
      me == 0 ? schedule::grouping{{0, 2}, {2, 3}, {3, 6}} : schedule::per_layer(sizes.size());
  const schedule::grouping agreed = mpi::agree_grouping(comm, sizes, mine);
  CHECK(agreed == schedule::grouping{{0, 2}, {2, 3}, {3, 6}});
  // non-root ranks may pass nothing
  const schedule::grouping again =
      mpi::agree_grouping(comm, sizes, me == 0 ? schedule::single(6) : schedule::grouping{});
  CHECK(again == schedule::single(6));
}

TEST_CASE("agree_grouping detects a layout mismatch on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int me = test::world_rank();
  if (test::world_size() == 1) {
    return;
  }
  SECTION("different layer counts") {
    std::vector<std::size_t> mine = sizes;
    if (me == 1) {
      mine.push_back(3);
    }
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, mine, schedule::per_layer(mine.size())),
                      mpi::mpi_error);
  }
  SECTION("same count, different sizes") {
    std::vector<std::size_t> mine = sizes;
    if (me == test::world_size() - 1) {
      mine[2] += 1;
    }
    REQUIRE_THROWS_WITH(mpi::agree_grouping(comm, mine, schedule::per_layer(mine.size())),
                        Catch::Contains("different layer sizes"));
  }
  // the communicator is still usable afterwards
  CHECK(mpi::agree_grouping(comm, sizes, schedule::single(6)) == schedule::single(6));
}

TEST_CASE("agree_grouping rejects an invalid proposal on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const schedule::grouping bad{{0, 2}, {3, 6}}; // a gap
  if (test::world_rank() == 0) {
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, sizes, bad), std::invalid_argument);
  } else {
    REQUIRE_THROWS_AS(mpi::agree_grouping(comm, sizes, bad), mpi::mpi_error);
  }
}

TEST_CASE("a pipeline with agreed_grouping uses rank 0's plan on every rank", "[agree_grouping]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  mpi::sparse_exchange exchange(comm);
  // every rank plans from different backward times; only rank 0's plan may be used
  pipeline_policy::planned_grouping planner;
  planner.strategy = schedule::strategy::optimal;
  planner.model = schedule::cost_model::affine(1e-3, 1e-9);
  planner.backward_seconds.assign(sizes.size(), 1e-3 * (1 + test::world_rank()));
  planner.backward_seconds[static_cast<std::size_t>(test::world_rank()) % sizes.size()] = 0.5;
  mpi::agreed_grouping<pipeline_policy::planned_grouping> policy{&comm, planner};
  pipeline p(sizes, policy, exact_top_k(0.1), exchange);
  pipeline_policy::planned_grouping rank0 = planner;
  rank0.backward_seconds.assign(sizes.size(), 1e-3);
  rank0.backward_seconds[0] = 0.5;
  CHECK(p.groups() == rank0.groups(sizes));
}
