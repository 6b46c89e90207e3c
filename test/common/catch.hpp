// SPDX-License-Identifier: Apache-2.0
// Catch2 for gradcomp's tests, v2 or v3: every test includes this header instead of Catch2's
// own. test/CMakeLists.txt defines GRADCOMP_CATCH2_V3 when it found Catch2 v3; the names the
// tests use (Approx, Catch::Contains for a substring) then map to v3's.
#pragma once

#if defined(GRADCOMP_CATCH2_V3)
#include <catch2/catch_all.hpp>

#include <string>
using Catch::Approx;
namespace Catch {
//! v2's substring matcher under its v2 name (v3: Matchers::ContainsSubstring).
inline Matchers::StringContainsMatcher Contains(const std::string& substring,
                                                CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(substring, sensitivity);
}
} // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
