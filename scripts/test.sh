#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh clone: installs the Debian packages it needs, builds every
# test, tool, benchmark and example (Release), runs ctest; then builds the tests once more with
# AddressSanitizer + UndefinedBehaviorSanitizer (any report fails) and runs them again.
#
#   scripts/test.sh            # everything
#   GRADCOMP_SKIP_SANITIZERS=1 scripts/test.sh   # skip the sanitizer pass (quicker local runs)
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
fi
