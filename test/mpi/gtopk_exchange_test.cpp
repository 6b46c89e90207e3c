// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::gtopk_exchange (mpi/gtopk_exchange.hpp): gTop-k as a pipeline transport keeps
// exactly k = k_for_density(n, density) elements, its average is mpi::gtopk_allreduce's sums
// (called directly on another communicator; test/mpi/gtopk_allreduce_test.cpp checks those
// against a single-process reference) divided by P on G and 0 elsewhere, bit-identical on every
// rank, and with k elements in every set rank 0 sends cost::gtopk_bytes_sent. The pipeline over
// it: test/mpi/global_topk_exchange_test.cpp. Collective: every rank runs every test.
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/cost/gtopk.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/gtopk_allreduce.hpp>
#include <gradcomp/mpi/gtopk_exchange.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_gtopk_exchange_test {

using namespace gradcomp;

static_assert(std::is_same_v<mpi::gtopk_exchange::allreduce_type, mpi::gtopk_allreduce>);
static_assert(std::is_same_v<mpi::gtopk_exchange::options, mpi::gtopk_allreduce_options>);

TEST_CASE("gtopk_exchange keeps exactly k, averages gTop-k's sums and costs the tree's bytes",
          "[mpi][gtopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const mpi::communicator reference_comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t n = 3000;
  const double density = 0.01;
  const std::size_t k = k_for_density(n, density);
  REQUIRE(k == 30);
  mpi::gtopk_exchange exchange(comm, density);
  mpi::gtopk_allreduce direct(reference_comm);
  CHECK(exchange.selected_indices() == nullptr); // nothing exchanged yet
  test::identity_batch averages;
  for (std::uint64_t round = 0; round < 2; ++round) {
    CAPTURE(round);
    sparse_message local; // k of this rank's values, as a compressor at the same density sends
    exact_top_k(density).compress(test::rank_values(n, comm.rank(), 40 + round), local);
    REQUIRE(local.indices.size() == k);
    std::vector<float> average(n, -1.0f);
    exchange.start(local, average);
    CHECK(exchange.test()); // start() ran the whole exchange
    exchange.wait();
    sparse_message global;
    direct(local, k, global);
    REQUIRE(global.indices.size() == k);
    std::vector<float> expected(n, 0.0f);
    for (std::size_t j = 0; j < k; ++j) {
      expected[global.indices[j]] = global.values[j] / static_cast<float>(p);
    }
    CHECK(test::same_bits(average, expected));
    REQUIRE(exchange.selected_indices() != nullptr);
    CHECK(*exchange.selected_indices() == global.indices);
    CHECK(exchange.bytes_sent() == direct.bytes_sent());
    CHECK(exchange.bytes_received() == direct.bytes_received());
    if (comm.rank() == 0) { // the busiest rank: ceil(log2 P) children, k elements in every set
      CHECK(static_cast<double>(exchange.bytes_sent()) ==
            cost::gtopk_bytes_sent(static_cast<double>(k), p));
    }
    averages.add(average, test::describe("round ", round));
  }
  averages.check();
}

} // namespace mpi_gtopk_exchange_test
