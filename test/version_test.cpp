// SPDX-License-Identifier: Apache-2.0
// gradcomp's version (version.hpp): the string is "major.minor.patch" made from the three numbers,
// as the constant and as the macro, digits and two dots only. (That CMake, the Python package and
// gradcomp.pc say the same is the ctest "package: one version everywhere".)
#include <gradcomp/version.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/catch.hpp"

namespace version_test {

TEST_CASE("version: the string is made of the three numbers", "[version]") {
  const std::string expected = std::to_string(GRADCOMP_VERSION_MAJOR) + "." +
                               std::to_string(GRADCOMP_VERSION_MINOR) + "." +
                               std::to_string(GRADCOMP_VERSION_PATCH);
  CHECK(std::string(GRADCOMP_VERSION_STRING) == expected);
  CHECK(std::string(gradcomp::version_string) == expected);
  static_assert(std::string_view(gradcomp::version_string) == GRADCOMP_VERSION_STRING);
  // three numbers and two dots, nothing else
  std::size_t dots = 0;
  for (const char c : std::string_view(gradcomp::version_string)) {
    CHECK(((c >= '0' && c <= '9') || c == '.'));
    dots += c == '.' ? 1 : 0;
  }
  CHECK(dots == 2);
}

} // namespace version_test
