// SPDX-License-Identifier: Apache-2.0
// gradcomp::mpi::oktopk_exchange (mpi/oktopk_exchange.hpp): Ok-Topk as a pipeline transport
// keeps its regions and threshold per group length: one exchange fed two lengths in turn gives,
// call for call, the bits of two exchanges that each see one length (the second call of a length
// reuses the threshold its first call evaluated: another length's threshold there would change
// the selection); where the threshold is evaluated the selection holds exactly
// k = k_for_density(n, density); the average is 0 outside it and bit-identical on every rank.
// Ok-Topk's own sums: test/mpi/oktopk_allreduce_test.cpp; the pipeline over the exchange:
// test/mpi/global_topk_exchange_test.cpp. Collective: every rank runs every test.
#include <gradcomp/compressor/exact_top_k.hpp>
#include <gradcomp/mpi/communicator.hpp>
#include <gradcomp/mpi/oktopk_allreduce.hpp>
#include <gradcomp/mpi/oktopk_exchange.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../common/catch.hpp"
#include "../common/same_bits.hpp"
#include "mpi_test_util.hpp"

namespace mpi_oktopk_exchange_test {

using namespace gradcomp;

static_assert(std::is_same_v<mpi::oktopk_exchange::allreduce_type, mpi::oktopk_allreduce>);
static_assert(std::is_same_v<mpi::oktopk_exchange::options, mpi::oktopk_allreduce_options>);

TEST_CASE("oktopk_exchange keeps regions and threshold per group length", "[mpi][oktopk]") {
  const mpi::communicator comm(MPI_COMM_WORLD);
  const double density = 0.02;
  const std::vector<std::size_t> lengths{1500, 400};
  mpi::oktopk_exchange both(comm, density); // the lengths in turn
  std::vector<mpi::oktopk_exchange> alone;  // one exchange per length
  alone.reserve(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    alone.emplace_back(comm, density);
  }
  test::identity_batch averages;
  for (std::uint64_t call = 0; call < 2; ++call) {
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const std::size_t n = lengths[i];
      CAPTURE(call, n);
      sparse_message local;
      exact_top_k(density).compress(test::rank_values(n, comm.rank(), 70 + 10 * call + i), local);
      std::vector<float> mixed(n), own(n);
      both.start(local, mixed);
      both.wait();
      alone[i].start(local, own);
      alone[i].wait();
      CHECK(test::same_bits(mixed, own));
      REQUIRE(both.selected_indices() != nullptr);
      REQUIRE(alone[i].selected_indices() != nullptr);
      const std::vector<std::uint32_t>& g = *both.selected_indices();
      CHECK(g == *alone[i].selected_indices());
      if (call == 0) { // evaluated: the exact top k of the sums (ties aside: random values)
        CHECK(g.size() == k_for_density(n, density));
      }
      std::size_t nonzero_outside = 0;
      for (std::size_t j = 0; j < n; ++j) {
        nonzero_outside +=
            mixed[j] != 0.0f && !std::binary_search(g.begin(), g.end(), static_cast<uint32_t>(j));
      }
      CHECK(nonzero_outside == 0);
      averages.add(mixed, test::describe("call ", call, ", length ", n));
    }
  }
  averages.check();
}

} // namespace mpi_oktopk_exchange_test
