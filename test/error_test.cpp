// SPDX-License-Identifier: Apache-2.0
// gradcomp's exceptions and the helpers that build their messages (error.hpp): wire_error is a
// std::runtime_error; require() throws std::invalid_argument and require_wire() wire_error, each
// with its prefix and the arguments streamed one after the other (9 significant digits), and
// neither throws when the condition holds; a bad argument and malformed wire bytes reach the user
// as these types.
#include <gradcomp/error.hpp>
#include <gradcomp/sparse/wire.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/catch.hpp"

namespace error_test {

using namespace gradcomp;

static_assert(std::is_base_of_v<std::runtime_error, wire_error>);
static_assert(!std::is_base_of_v<std::invalid_argument, wire_error>);

TEST_CASE("error: concat streams its arguments with 9 significant digits", "[error]") {
  CHECK(detail::concat() == "");
  CHECK(detail::concat("a", 1, ' ', 2.5, "b") == "a1 2.5b");
  CHECK(detail::concat(1.0 / 3.0) == "0.333333333");
  CHECK(detail::concat(123456789012.0) == "1.23456789e+11");
  CHECK(detail::concat(std::string("x"), 'y', 7u) == "xy7");
}

TEST_CASE("error: require and require_wire throw their types with their prefixes", "[error]") {
  CHECK_NOTHROW(detail::require(true, "never"));
  CHECK_NOTHROW(detail::require_wire(true, "never"));
  try {
    detail::require(false, "density ", 1.5, " is outside (0, 1]");
    FAIL("require did not throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "gradcomp: density 1.5 is outside (0, 1]");
  }
  try {
    detail::require_wire(false, "truncated at byte ", 12);
    FAIL("require_wire did not throw");
  } catch (const wire_error& e) {
    CHECK(std::string(e.what()) == "gradcomp wire: truncated at byte 12");
  }
  // a wire_error is caught as a runtime_error, never as an invalid_argument
  CHECK_THROWS_AS(detail::require_wire(false, "x"), std::runtime_error);
  bool as_invalid_argument = false;
  try {
    detail::require_wire(false, "x");
  } catch (const std::invalid_argument&) {
    as_invalid_argument = true;
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(as_invalid_argument);
}

TEST_CASE("error: the library reports bad bytes as wire_error, bad arguments as "
          "invalid_argument",
          "[error]") {
  CHECK_THROWS_AS(decode(std::vector<std::byte>(5)), wire_error);
  sparse_message m;
  m.clear(3);
  m.indices = {2, 1};
  m.values = {1.0f, 2.0f};
  CHECK_THROWS_AS(m.validate(), std::invalid_argument);
}

} // namespace error_test
