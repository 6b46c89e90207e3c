#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh clone: installs the Debian packages it needs, builds every
# test, tool, benchmark and example (Release), runs ctest, compiles every public header on its
# own and builds the API reference (Doxygen, warnings fail); compiles the CUDA component when
# nvcc exists (its GPU tests run only on a GPU); then builds the tests once more with
# AddressSanitizer + UndefinedBehaviorSanitizer and once with
# ThreadSanitizer (any report fails) and runs them again; then runs every libFuzzer target
# (clang) for GRADCOMP_FUZZ_SECONDS (default 30) each.
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

echo "== Every public header compiles on its own (CMake header sets, one check per component)"
cmake --build --preset release -j "$jobs" --target all_verify_interface_header_sets

echo "== API reference (Doxygen, docs/api/Doxyfile): every public entity documented, 0 warnings"
scripts/api-docs.sh

# The CUDA component: compiled by nvcc for sm_90 (+ PTX) wherever a CUDA Toolkit is installed
# (CI has one, but no GPU: the GPU tests then report "Skipped"; their logic also ran above, on
# the host backend, in "cuda host backend: " tests).
nvcc_path="${CUDACXX:-$(command -v nvcc || true)}"
if [[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
fi
if [[ -n "$nvcc_path" ]]; then
  echo "== CUDA component ($nvcc_path): build, GPU tests (skipped without a GPU)"
  CUDACXX="$nvcc_path" cmake --preset cuda
  cmake --build --preset cuda -j "$jobs" --target gradcomp_cuda_device_tests \
    gradcomp_bench_cuda_compressors
  ctest --preset cuda -R "^cuda: device"
else
  echo "== no nvcc found: the CUDA component is not compiled"
fi

if [[ "${GRADCOMP_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"

  echo "== ThreadSanitizer build and tests"
  cmake --preset tsan
  cmake --build --preset tsan -j "$jobs"
  ctest --preset tsan -j "$jobs"

  echo "== libFuzzer targets (clang, ASan + UBSan), ${GRADCOMP_FUZZ_SECONDS:-30} s each"
  cmake --preset fuzz -DGRADCOMP_FUZZ_SECONDS="${GRADCOMP_FUZZ_SECONDS:-30}"
  cmake --build --preset fuzz -j "$jobs"
  ctest --preset fuzz
fi
