// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp's version: the one place it is written. CMake's `project(VERSION)`, the
//! Python package's `__version__`, the Debian package and `gradcomp.pc` read it from here.
#pragma once

//! The major version (version_string's first number).
#define GRADCOMP_VERSION_MAJOR 0
//! The minor version (version_string's second number).
#define GRADCOMP_VERSION_MINOR 2
//! The patch version (version_string's third number).
#define GRADCOMP_VERSION_PATCH 0

//! @cond GRADCOMP_INTERNAL
#define GRADCOMP_VERSION_STRINGIFY_(x) #x
#define GRADCOMP_VERSION_STRINGIFY(x) GRADCOMP_VERSION_STRINGIFY_(x)
//! @endcond

//! The version as a string literal, "major.minor.patch", made from the three numbers above.
#define GRADCOMP_VERSION_STRING                                                                    \
  GRADCOMP_VERSION_STRINGIFY(GRADCOMP_VERSION_MAJOR)                                               \
  "." GRADCOMP_VERSION_STRINGIFY(GRADCOMP_VERSION_MINOR) "." GRADCOMP_VERSION_STRINGIFY(           \
      GRADCOMP_VERSION_PATCH)

namespace gradcomp {
//! @brief The library version as "major.minor.patch" (GRADCOMP_VERSION_STRING).
inline constexpr const char* version_string = GRADCOMP_VERSION_STRING;
} // namespace gradcomp
