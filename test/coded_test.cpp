// SPDX-License-Identifier: Apache-2.0
// The umbrella header <gradcomp/coded.hpp> alone gives every piece it promises: the placement
// (coded/placement.hpp), exact coding (coded/exact_coding.hpp), the cost model with the choice of
// r (coded/cost.hpp) and the sparse form's union (coded/sparse.hpp), each checked here on the
// n = 3, r = 2 example of docs/coded.md worked by hand. The pieces' own tests are in test/coded/.
#include <gradcomp/coded.hpp>

#include <cstdint>
#include <span>
#include <vector>

#include "common/catch.hpp"

namespace coded_test {

using namespace gradcomp::coded;

TEST_CASE("coded.hpp: n = 3, r = 2 worked by hand with the umbrella header alone",
          "[coded][umbrella]") {
  // placement: the parts are the 2-subsets {0,1}, {0,2}, {1,2}; one group, every rank
  const placement p(3, 2);
  REQUIRE(p.part_count() == 3);
  REQUIRE(p.group_count() == 1);
  CHECK(std::vector<int>(p.owners(0).begin(), p.owners(0).end()) == std::vector<int>{0, 1});
  CHECK(std::vector<int>(p.owners(1).begin(), p.owners(1).end()) == std::vector<int>{0, 2});
  CHECK(std::vector<int>(p.owners(2).begin(), p.owners(2).end()) == std::vector<int>{1, 2});
  CHECK(std::vector<int>(p.members(0).begin(), p.members(0).end()) == std::vector<int>{0, 1, 2});
  // rank j lacks exactly the part the other two own: rank 0 lacks {1,2}, rank 2 lacks {0,1}
  CHECK(p.missing_part(0, 0) == 2);
  CHECK(p.missing_part(0, 1) == 1);
  CHECK(p.missing_part(0, 2) == 0);
  CHECK(p.packet_elements(1000) == 500); // a packet holds one of r = 2 slices

  // exact coding: CSSGD's range [-10, 10] for one term is scaled by 2^27 (10 x 2^27 < 2^31)
  CHECK(fixed_point_scale(10.0, 1) == 134217728.0);
  const double s = fixed_point_scale(1.0, 3); // 3 terms: 2^29 (3 x 2^29 < 2^31 - 1 < 3 x 2^30)
  CHECK(s == 536870912.0);
  std::vector<std::int32_t> codes(3);
  encode_fixed_point(std::vector<float>{0.5f, -0.25f, 1.0f}, s, codes);
  CHECK(codes == std::vector<std::int32_t>{268435456, -134217728, 536870912});
  std::vector<double> back(3);
  decode_fixed_point(codes, s, back);
  CHECK(back == std::vector<double>{0.5, -0.25, 1.0});
  std::vector<std::uint32_t> words(1);
  encode_bits(std::vector<float>{1.0f}, words);
  CHECK(words[0] == 0x3f800000U);

  // cost: each of the 3 ranks multicasts one packet of d / 2 (uncoded: d)
  CHECK(coded_exchange_load(3, 2, 1000, 1, delivery::multicast).sent_bytes == 500.0);
  CHECK(uncoded_exchange_load(3, 2, 1000, 1).sent_bytes == 1000.0);
  const redundancy_choice c = choose_redundancy(3, workload{.gradient_elements = 1000}, {});
  CHECK(c.table.size() == 2); // r = 1 and r = 2
  CHECK(c.redundancy == 1);   // a free network and no compute: the tie goes to the smallest r

  // sparse form: the union of {1, 4, 9} and {0, 4, 7}
  const std::vector<std::uint32_t> a{1, 4, 9}, b{0, 4, 7};
  const std::span<const std::uint32_t> lists[] = {a, b};
  std::vector<std::uint32_t> u;
  index_union(lists, u);
  CHECK(u == std::vector<std::uint32_t>{0, 1, 4, 7, 9});
  const std::vector<int> contributors = union_contributors(p);
  REQUIRE(contributors.size() == 3);
  for (std::size_t t = 0; t < 3; ++t) {
    CHECK(p.owns(contributors[t], t)); // one of the part's owners sends its indices
  }
}

} // namespace coded_test
