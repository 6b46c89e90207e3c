// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Catch2 printing of the scheduler's groups, so that a failed comparison of groupings
//! shows the groups ("[0, 2) [2, 3)") instead of "{?}".
#pragma once

#include <gradcomp/schedule/grouping.hpp>

#include <string>

#include "catch.hpp"

namespace Catch {
template <>
struct StringMaker<gradcomp::schedule::layer_group> {
  static std::string convert(const gradcomp::schedule::layer_group& g) {
    std::string text = "["; // appended piecewise: g++ 12 warns (-Wrestrict) on "[" + string
    text += std::to_string(g.begin);
    text += ", ";
    text += std::to_string(g.end);
    text += ")";
    return text;
  }
};
} // namespace Catch
