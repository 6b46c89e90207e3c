// SPDX-License-Identifier: Apache-2.0
// The pipeline's transport concepts (pipeline/transport.hpp): only a type that opts in with
// transport_tag and has every member of a concept models it (the members alone, as
// mpi::sparse_allgather has them, do not); a multi-part transport is a pipeline_transport but no
// transport; the byte counters, the in-place form and the global selection are optional extras.
#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../common/catch.hpp"

namespace pipeline_transport_test {

using namespace gradcomp;
using namespace gradcomp::pipeline_policy;

namespace {

struct not_a_transport {
  using transport_concept = transport_tag;
  void start(const sparse_message&, std::span<float>) {}
};

// Every member of a transport, but no opt-in tag (like mpi::sparse_allgather, which sums).
struct untagged_exchange {
  void start(const sparse_message& m, std::span<float> out) { decompress(m, out); }
  bool test() { return true; }
  void wait() {}
};

// A transport with every optional member: byte counters, the in-place form, a selection.
struct full_exchange {
  using transport_concept = transport_tag;
  void start(const sparse_message&, std::span<float>) {}
  bool test() { return true; }
  void wait() {}
  void start_in_place(std::span<float>) {}
  [[nodiscard]] bool accepts_in_place() const { return true; }
  [[nodiscard]] std::size_t bytes_sent() const { return 0; }
  [[nodiscard]] std::size_t bytes_received() const { return 0; }
  [[nodiscard]] const std::vector<std::uint32_t>* selected_indices() const { return nullptr; }
};

// test() must return bool exactly.
struct int_test_exchange {
  using transport_concept = transport_tag;
  void start(const sparse_message&, std::span<float>) {}
  int test() { return 1; }
  void wait() {}
};

// Several messages per rank.
struct parts_exchange {
  using transport_concept = transport_tag;
  [[nodiscard]] std::size_t parts_per_rank() const { return 2; }
  void start(std::span<const sparse_message>, std::span<float>) {}
  bool test() { return true; }
  void wait() {}
};

// The selection by value instead of a pointer to the transport's own indices.
struct copied_selection_exchange {
  using transport_concept = transport_tag;
  void start(const sparse_message&, std::span<float>) {}
  bool test() { return true; }
  void wait() {}
  [[nodiscard]] std::vector<std::uint32_t> selected_indices() const { return {}; }
};

} // namespace

TEST_CASE("transport concepts: the opt-in tag and every required member", "[pipeline][transport]") {
  STATIC_REQUIRE_FALSE(transport<not_a_transport>);
  STATIC_REQUIRE_FALSE(transport<untagged_exchange>);
  STATIC_REQUIRE_FALSE(pipeline_transport<untagged_exchange>);
  STATIC_REQUIRE_FALSE(transport<int_test_exchange>);
  STATIC_REQUIRE(transport<full_exchange>);
  STATIC_REQUIRE(pipeline_transport<full_exchange>);
  STATIC_REQUIRE_FALSE(multi_part_transport<full_exchange>);
  STATIC_REQUIRE(multi_part_transport<parts_exchange>);
  STATIC_REQUIRE(pipeline_transport<parts_exchange>);
  STATIC_REQUIRE_FALSE(transport<parts_exchange>);
}

TEST_CASE("transport concepts: byte counters, in place and selection are optional",
          "[pipeline][transport]") {
  STATIC_REQUIRE(byte_counting_transport<full_exchange>);
  STATIC_REQUIRE(in_place_transport<full_exchange>);
  STATIC_REQUIRE(selecting_transport<full_exchange>);
  STATIC_REQUIRE(transport<copied_selection_exchange>);
  STATIC_REQUIRE_FALSE(selecting_transport<copied_selection_exchange>);
  STATIC_REQUIRE_FALSE(byte_counting_transport<parts_exchange>);
  STATIC_REQUIRE_FALSE(in_place_transport<parts_exchange>);
  STATIC_REQUIRE_FALSE(selecting_transport<parts_exchange>);
}

} // namespace pipeline_transport_test
