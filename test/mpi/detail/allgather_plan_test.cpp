// SPDX-License-Identifier: Apache-2.0
// The header step of the sparse allgather (gradcomp::mpi::detail::plan_allgather, no MPI):
// headers from real encodings are accepted and planned (counts, displacements, the dense switch
// by SparCML's rule); malformed peer headers (negative or out-of-range bytes, nnz, lengths,
// totals past MPI's int counts) are rejected with a wire_error naming the rank and the field.
#include <gradcomp/mpi/detail/allgather_plan.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <climits>
#include <cstdint>
#include <vector>

#include "../../common/catch.hpp"

namespace mpi_detail_allgather_plan_test {

using gradcomp::wire_error;
using gradcomp::mpi::detail::plan_allgather;

namespace {

// headers of real encodings: rank r sends k_r values of an n-element tensor as delta + varint
std::vector<std::int64_t> real_headers(std::size_t n, const std::vector<std::size_t>& ks) {
  std::vector<std::int64_t> h;
  for (const std::size_t k : ks) {
    gradcomp::sparse_message m;
    m.clear(n);
    for (std::size_t i = 0; i < k; ++i) {
      m.indices.push_back(static_cast<std::uint32_t>(i * (n / k)));
      m.values.push_back(1.0f);
    }
    h.push_back(static_cast<std::int64_t>(
        gradcomp::encode(m, gradcomp::index_encoding::delta_varint).size()));
    h.push_back(static_cast<std::int64_t>(n));
    h.push_back(static_cast<std::int64_t>(k));
  }
  return h;
}

} // namespace

TEST_CASE("allgather plan: real headers give counts and displacements", "[allgather_plan]") {
  const auto h = real_headers(10000, {100, 0, 37});
  const auto plan = plan_allgather(h, true);
  REQUIRE(plan.length_mismatch_rank == -1);
  REQUIRE_FALSE(plan.use_dense);
  REQUIRE(plan.counts ==
          std::vector<int>{static_cast<int>(h[0]), static_cast<int>(h[3]), static_cast<int>(h[6])});
  REQUIRE(plan.displacements ==
          std::vector<int>{0, static_cast<int>(h[0]), static_cast<int>(h[0] + h[3])});
  CHECK(plan.total_bytes == h[0] + h[3] + h[6]);
  CHECK(plan.most_received_bytes == h[0] + h[6]); // rank 1 (the empty message) receives most
}

TEST_CASE("allgather plan: the dense switch follows SparCML's rule", "[allgather_plan]") {
  // n = 1000: a 4-rank ring moves 2 * 3/4 * 4000 = 6000 bytes; messages of 500 values each
  // (about 32 + 500 * 5 bytes) gathered from 3 ranks exceed that
  const auto big = real_headers(1000, {500, 500, 500, 500});
  CHECK(plan_allgather(big, true).use_dense);
  CHECK_FALSE(plan_allgather(big, false).use_dense);
  const auto small = real_headers(1000, {10, 10, 10, 10});
  CHECK_FALSE(plan_allgather(small, true).use_dense);
}

TEST_CASE("allgather plan: a different dense length is reported with its rank",
          "[allgather_plan]") {
  auto h = real_headers(1000, {10, 10, 10});
  h[7] = 999;
  const auto plan = plan_allgather(h, true);
  CHECK(plan.length_mismatch_rank == 2);
}

TEST_CASE("allgather plan: malformed peer headers throw a wire_error naming rank and field",
          "[allgather_plan]") {
  const auto good = real_headers(1000, {10, 10});
  struct bad_case {
    std::size_t field;
    std::int64_t value;
    const char* says;
  };
  const std::vector<bad_case> cases = {
      {3, -1, "rank 1 announced invalid arguments"},
      {3, -2, "rank 1's header states encoded bytes -2"},
      {3, 31, "encoded bytes 31, outside"},
      {3, INT64_MAX, "encoded bytes"},
      {5, -3, "nnz -3, outside [0, 1000]"},
      {5, 1001, "nnz 1001"},
      {4, -1000, "dense length -1000, outside [0, "},
      {1, INT64_MAX, "rank 0's header states dense length"},
  };
  for (const bad_case& c : cases) {
    auto h = good;
    h[c.field] = c.value;
    CAPTURE(c.field, c.value);
    REQUIRE_THROWS_AS(plan_allgather(h, true), wire_error);
    REQUIRE_THROWS_WITH(plan_allgather(h, true), Catch::Contains(c.says));
  }
}

TEST_CASE("allgather plan: totals past MPI's int counts switch to dense or are flagged",
          "[allgather_plan]") {
  // three ranks with 300 M values each: every header is plausible, the sum is not an int
  const std::int64_t n = 1'000'000'000;
  const std::int64_t k = 300'000'000;
  const std::int64_t bytes = 32 + 5 * k;
  const std::vector<std::int64_t> h = {bytes, n, k, bytes, n, k, bytes, n, k};
  const auto with_switch = plan_allgather(h, true);
  CHECK(with_switch.exceeds_int_count);
  CHECK(with_switch.use_dense);
  const auto without = plan_allgather(h, false);
  CHECK(without.exceeds_int_count);
  CHECK_FALSE(without.use_dense);
  CHECK(without.counts.empty());
}

TEST_CASE("allgather plan: a header list of the wrong shape is a usage error", "[allgather_plan]") {
  CHECK_THROWS_AS(plan_allgather(std::vector<std::int64_t>{}, true), std::invalid_argument);
  CHECK_THROWS_AS(plan_allgather(std::vector<std::int64_t>{32, 0}, true), std::invalid_argument);
}

TEST_CASE("allgather header screen: invalid arguments and settings that differ, in rank order",
          "[allgather_plan]") {
  using gradcomp::mpi::detail::gathered_header_fields;
  using gradcomp::mpi::detail::invalid_arguments_bytes;
  using gradcomp::mpi::detail::screen_headers;
  // 4 ranks: bytes, length, nnz, settings
  std::vector<std::int64_t> h = {40, 100, 1, 7, 40, 100, 1, 7, 40, 100, 1, 7, 40, 100, 1, 7};
  auto s = screen_headers(h);
  CHECK(s.invalid_rank == -1);
  CHECK(s.settings_mismatch_rank == -1);
  h[gathered_header_fields * 2] = invalid_arguments_bytes;
  h[gathered_header_fields * 3] = invalid_arguments_bytes;
  h[gathered_header_fields * 1 + 3] = 8;
  h[gathered_header_fields * 3 + 3] = 9;
  s = screen_headers(h);
  CHECK(s.invalid_rank == 2);
  CHECK(s.settings_mismatch_rank == 1);
  std::vector<std::int64_t> fields;
  gradcomp::mpi::detail::plan_fields(h, fields);
  CHECK(fields == std::vector<std::int64_t>{40, 100, 1, 40, 100, 1, -1, 100, 1, -1, 100, 1});
  CHECK_THROWS_AS(screen_headers(std::vector<std::int64_t>{1, 2, 3}), std::invalid_argument);
}

} // namespace mpi_detail_allgather_plan_test
