#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh clone: installs the Debian packages it needs, builds every
# test, tool, benchmark and example (Release), runs ctest; then builds the tests once more with
# AddressSanitizer + UndefinedBehaviorSanitizer and once with ThreadSanitizer (any report fails)
# and runs them again; then runs every libFuzzer target (clang) for GRADCOMP_FUZZ_SECONDS
# (default 60) each.
#
#   scripts/test.sh                                # everything
#   GRADCOMP_SKIP_SANITIZERS=1 scripts/test.sh     # Release tests only (quicker local runs)
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
scripts/install-deps.sh

echo "== Release build and tests"
cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

if [[ "${GRADCOMP_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"

  echo "== ThreadSanitizer build and tests"
  cmake --preset tsan
  cmake --build --preset tsan -j "$jobs"
  ctest --preset tsan -j "$jobs"

  echo "== libFuzzer targets (clang, ASan + UBSan), ${GRADCOMP_FUZZ_SECONDS:-60} s each"
  cmake --preset fuzz -DGRADCOMP_FUZZ_SECONDS="${GRADCOMP_FUZZ_SECONDS:-60}"
  cmake --build --preset fuzz -j "$jobs"
  ctest --preset fuzz
fi
