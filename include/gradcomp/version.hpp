// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp's version.
#pragma once

//! The major version (version_string's first number).
#define GRADCOMP_VERSION_MAJOR 0
//! The minor version (version_string's second number).
#define GRADCOMP_VERSION_MINOR 1
//! The patch version (version_string's third number).
#define GRADCOMP_VERSION_PATCH 0

namespace gradcomp {
//! @brief The library version as "major.minor.patch".
inline constexpr const char* version_string = "0.1.0";
} // namespace gradcomp
