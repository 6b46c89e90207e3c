# SPDX-License-Identifier: Apache-2.0
# One version everywhere: VERSION (CMake's project version, read from
# include/gradcomp/version.hpp) must be CITATION.cff's `version:`, the newest release heading of
# CHANGELOG.md (`## [X.Y.Z] - date`, after [Unreleased]) and the version in the generated
# gradcomp.pc (PC_FILE). Prints "version: X.Y.Z everywhere" or fails naming the file.
file(STRINGS "${SOURCE_DIR}/CITATION.cff" citation REGEX "^version: ")
if(NOT citation MATCHES "^version: \"?([0-9]+\\.[0-9]+\\.[0-9]+)\"?$")
  message(FATAL_ERROR "CITATION.cff: no 'version: X.Y.Z' line")
endif()
set(citation_version ${CMAKE_MATCH_1})
file(STRINGS "${SOURCE_DIR}/CHANGELOG.md" releases REGEX "^## \\[[0-9]+\\.[0-9]+\\.[0-9]+\\]")
list(GET releases 0 newest)
string(REGEX REPLACE "^## \\[([0-9.]+)\\].*" "\\1" changelog_version "${newest}")
file(STRINGS "${PC_FILE}" pc REGEX "^Version: ")
string(REGEX REPLACE "^Version: " "" pc_version "${pc}")
foreach(pair "CITATION.cff;${citation_version}" "CHANGELOG.md;${changelog_version}"
             "gradcomp.pc;${pc_version}")
  list(GET pair 0 file)
  list(GET pair 1 found)
  if(NOT found STREQUAL VERSION)
    message(FATAL_ERROR "${file} says version ${found}, include/gradcomp/version.hpp ${VERSION}")
  endif()
endforeach()
message("version: ${VERSION} everywhere")
