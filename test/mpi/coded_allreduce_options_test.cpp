// SPDX-License-Identifier: Apache-2.0
// The options of coded_allreduce (mpi/coded_allreduce_options.hpp), also those of
// coded_sparse_allreduce and the pipeline's coded exchanges: the documented defaults; a bad
// redundancy, tag range or window is rejected at construction naming the value and the limit,
// and each limit itself is accepted; the last tag must not pass MPI_TAG_UB; options that differ
// between ranks (schedule, variant, uncoded, tag_base) make every rank throw, and the
// communicator is usable again afterwards. Collective: every rank runs every test; with one rank
// there is no valid r, and the tests check the rejection.
#include <gradcomp/coded.hpp>
#include <gradcomp/mpi/coded_allreduce_options.hpp>
#include <gradcomp/mpi/coded_exchange.hpp>
#include <gradcomp/mpi/communicator.hpp>

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "coded_test_util.hpp"
#include "mpi_test_util.hpp"

namespace mpi_coded_allreduce_options_test {

using gradcomp::test::same_bits;
using namespace gradcomp::test::coded_helpers;

using namespace gradcomp;

TEST_CASE("coded_allreduce rejects different options on every rank", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  const coded::placement layout(p, 1);
  const std::size_t d = 8;
  const std::vector<std::vector<float>> g = all_gradients(layout, d, 6);
  const std::vector<std::span<const float>> mine = owned_parts(layout, g, comm.rank());
  std::vector<float> sum(d);
  mpi::coded_allreduce_options o{.redundancy = 1};
  SECTION("schedule") {
    if (comm.rank() == 0) {
      o.schedule = mpi::coded_schedule::serialized;
    }
    mpi::coded_allreduce op(comm, o);
    REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                        Catch::Contains("different options: schedule"));
  }
  SECTION("variant") {
    if (comm.rank() == 0) {
      o.variant = mpi::coded_variant::reduce_scatter;
    }
    mpi::coded_allreduce op(comm, o);
    REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                        Catch::Contains("different options: variant from 0 to 1"));
    // usable again afterwards, every rank with the same variant
    mpi::coded_allreduce same(comm,
                              {.redundancy = 1, .variant = mpi::coded_variant::reduce_scatter});
    same(std::span<const std::span<const float>>(mine), std::span<float>(sum));
    CHECK(same_bits(sum, fixed_point_reference(g, d)));
  }
  SECTION("uncoded") {
    if (comm.rank() == 0) {
      o.uncoded = true;
    }
    mpi::coded_allreduce op(comm, o);
    REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                        Catch::Contains("different options: uncoded from 0 to 1"));
  }
  SECTION("tag_base") {
    if (comm.rank() == 0) {
      o.tag_base = 100;
    }
    mpi::coded_allreduce op(comm, o);
    REQUIRE_THROWS_WITH(op(std::span<const std::span<const float>>(mine), std::span<float>(sum)),
                        Catch::Contains("different options: tag_base from 0 to 100"));
  }
}

TEST_CASE("coded_allreduce rejects a bad redundancy and bad tags", "[mpi][coded]") {
  mpi::communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.redundancy = 0}),
                    Catch::Contains("redundancy r = 0 is below 1"));
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.redundancy = -3}),
                    Catch::Contains("redundancy r = -3 is below 1"));
  CHECK_THROWS_AS(mpi::coded_allreduce(comm, {.redundancy = p}), std::invalid_argument);
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.redundancy = p + 1}),
                    Catch::Contains("is not below the rank count"));
  if (p < 2) {
    return;
  }
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.tag_base = -1}),
                    Catch::Contains("tag_base -1 is negative"));
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.tag_range = 0}),
                    Catch::Contains("tag_range 0 is below 1"));
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.max_requests = 1}),
                    Catch::Contains("max_requests 1 is outside [2, 64]"));
  // the last tag must not pass MPI_TAG_UB
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  REQUIRE(found != 0);
  const int tag_ub = *static_cast<int*>(value);
  CHECK_NOTHROW(mpi::coded_allreduce(comm, {.tag_base = tag_ub, .tag_range = 1}));
  if (coded::placement(p, 1).group_count() >= 2) {
    CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.tag_base = tag_ub, .tag_range = 2}),
                      Catch::Contains("exceeds MPI_TAG_UB"));
  }
}

TEST_CASE("coded_allreduce options: the documented defaults, and each limit accepted",
          "[mpi][coded]") {
  const mpi::coded_allreduce_options o;
  CHECK(o.redundancy == 1);
  CHECK(o.coding == mpi::packet_coding::fixed_point);
  CHECK(o.schedule == mpi::coded_schedule::concurrent);
  CHECK(o.variant == mpi::coded_variant::full_recovery);
  CHECK_FALSE(o.uncoded);
  CHECK(o.tag_base == 0);
  CHECK(o.tag_range == 1024);
  CHECK(o.max_requests == 32);
  mpi::communicator comm(MPI_COMM_WORLD);
  if (single_rank_rejects(comm)) {
    return;
  }
  const int p = comm.size();
  // r in [1, P), tag_range >= 1, max_requests in [2, 64] (construction is local)
  CHECK_NOTHROW(mpi::coded_allreduce(comm, {.redundancy = p - 1}));
  CHECK_NOTHROW(mpi::coded_allreduce(comm, {.tag_range = 1}));
  CHECK_NOTHROW(mpi::coded_allreduce(comm, {.max_requests = 2}));
  CHECK_NOTHROW(mpi::coded_allreduce(comm, {.max_requests = 64}));
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.max_requests = 65}),
                    "gradcomp: coded_allreduce: max_requests 65 is outside [2, 64]");
  CHECK_THROWS_WITH(mpi::coded_allreduce(comm, {.redundancy = p}),
                    Catch::Contains("redundancy r = " + std::to_string(p) +
                                    " is not below the rank count P = " + std::to_string(p)));
}

} // namespace mpi_coded_allreduce_options_test
