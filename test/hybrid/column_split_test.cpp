// SPDX-License-Identifier: Apache-2.0
// column_split (gradcomp/hybrid/column_split.hpp): the N outputs of a model-parallel layer over P
// ranks, checked against the partition it must be and against S2's floor / ceil sizes.
#include <gradcomp/hybrid/column_split.hpp>

#include <cstddef>

#include "../common/catch.hpp"

namespace hybrid_column_split_test {

using namespace gradcomp;

TEST_CASE("column_split covers N outputs in order, sizes differing by at most one", "[hybrid]") {
  for (int p = 1; p <= 9; ++p) {
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
      std::size_t next = 0;
      for (int r = 0; r < p; ++r) {
        const column_slice s = column_split(n, p, r);
        CHECK(s.offset == next);
        CHECK((s.rows == n / static_cast<std::size_t>(p) ||
               s.rows == n / static_cast<std::size_t>(p) + 1));
        next += s.rows;
      }
      CHECK(next == n);
    }
  }
  CHECK_THROWS_WITH(column_split(10, 3, 3), Catch::Contains("rank 3 is outside [0, 3)"));
  CHECK_THROWS_WITH(column_split(10, 0, 0), Catch::Contains("rank count 0"));
}

TEST_CASE("column_split gives the first N mod P ranks the extra output, worked by hand",
          "[hybrid]") {
  // N = 10 over P = 4: 10 = 4 x 2 + 2, so ranks 0 and 1 hold 3 outputs, ranks 2 and 3 hold 2
  CHECK(column_split(10, 4, 0) == column_slice{0, 3});
  CHECK(column_split(10, 4, 1) == column_slice{3, 3});
  CHECK(column_split(10, 4, 2) == column_slice{6, 2});
  CHECK(column_split(10, 4, 3) == column_slice{8, 2});
  // fewer outputs than ranks: the last ranks hold none, at offset N
  CHECK(column_split(2, 3, 1) == column_slice{1, 1});
  CHECK(column_split(2, 3, 2) == column_slice{2, 0});
  // one rank holds everything
  CHECK(column_split(4096, 1, 0) == column_slice{0, 4096});
  CHECK_FALSE(column_split(10, 4, 0) == column_slice{0, 2});
  CHECK_THROWS_WITH(column_split(10, 4, -1), Catch::Contains("rank -1 is outside [0, 4)"));
}

} // namespace hybrid_column_split_test
