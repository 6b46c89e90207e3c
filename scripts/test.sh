#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh clone: installs the Debian packages it needs, builds every
# test, tool, benchmark and example (Release) and runs ctest (with the installed-package
# consumers and the pip install into a fresh venv), compiles every public header on its own,
# builds the API reference (Doxygen, warnings fail), builds the Debian packages and installs
# them with apt (consumers built against them with CMake and pkg-config; root or sudo only);
# compiles the CUDA component when nvcc exists (its GPU tests run only on a GPU); then builds
# the tests with AddressSanitizer + UndefinedBehaviorSanitizer and runs them, builds the tests
# that start threads with ThreadSanitizer and runs them (any report fails), and runs every
# libFuzzer target (clang) for GRADCOMP_FUZZ_SECONDS (default 10) each. Prints each stage's
# wall time as it ends and a table of them at the end (docs/testing.md states the budget: CI's
# 2 cores, 40 minutes).
#
#   scripts/test.sh                                # everything
#   GRADCOMP_SKIP_SANITIZERS=1 scripts/test.sh     # Release stages only (quicker local runs)
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
stage_names=()
stage_seconds=()
stage_name=""
stage_start=0
suite_start=$SECONDS
# stage NAME: ends the running stage (prints its time) and starts NAME; "" ends the last one
stage() {
  if [[ -n "$stage_name" ]]; then
    local took=$((SECONDS - stage_start))
    stage_names+=("$stage_name")
    stage_seconds+=("$took")
    printf '== %s: %d min %02d s\n' "$stage_name" $((took / 60)) $((took % 60))
  fi
  stage_name=$1
  stage_start=$SECONDS
  if [[ -n "$stage_name" ]]; then
    echo "== $stage_name"
  fi
}
summary() {
  stage ""
  local total=$((SECONDS - suite_start))
  echo "== stage times"
  for i in "${!stage_names[@]}"; do
    printf '  %5d s  %s\n' "${stage_seconds[$i]}" "${stage_names[$i]}"
  done
  printf '  %5d s  total (%d min %02d s)\n' "$total" $((total / 60)) $((total % 60))
}
trap 'status=$?; if ((status != 0)); then echo "== FAILED in stage: $stage_name"; fi; summary' EXIT

stage "Debian packages (scripts/install-deps.sh)"
scripts/install-deps.sh

stage "Release build (tests, tools, benchmarks, examples, Python module)"
cmake --preset release
cmake --build --preset release -j "$jobs"

stage "Release tests (ctest)"
ctest --preset release -j "$jobs"

stage "Every public header compiles on its own (one check per component)"
cmake --build --preset release -j "$jobs" --target all_verify_interface_header_sets

stage "API reference (Doxygen, docs/api/Doxyfile, 0 warnings)"
scripts/api-docs.sh

stage "Debian packages of gradcomp: cpack, apt install, consumers (CMake, pkg-config)"
scripts/test-packages.sh build

# The CUDA component: compiled by nvcc for sm_90 (+ PTX) wherever a CUDA Toolkit is installed
# (CI has one, but no GPU: the GPU tests then report "Skipped"; their logic also ran above, on
# the host backend, in "cuda host backend: " tests).
nvcc_path="${CUDACXX:-$(command -v nvcc || true)}"
if [[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
fi
if [[ -n "$nvcc_path" ]]; then
  stage "CUDA component ($nvcc_path): build, GPU tests (skipped without a GPU)"
  CUDACXX="$nvcc_path" cmake --preset cuda
  cmake --build --preset cuda -j "$jobs" --target gradcomp_cuda_device_tests \
    gradcomp_bench_cuda_compressors
  ctest --preset cuda -R "^cuda: device"
else
  echo "== no nvcc found: the CUDA component is not compiled"
fi

if [[ "${GRADCOMP_SKIP_SANITIZERS:-0}" != "1" ]]; then
  stage "AddressSanitizer + UndefinedBehaviorSanitizer: build (tests only) and tests"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"

  stage "ThreadSanitizer: build and run the tests that start threads"
  cmake --preset tsan
  cmake --build --preset tsan -j "$jobs"
  ctest --preset tsan -j "$jobs"

  stage "libFuzzer targets (clang, ASan + UBSan), ${GRADCOMP_FUZZ_SECONDS:-10} s each"
  cmake --preset fuzz -DGRADCOMP_FUZZ_SECONDS="${GRADCOMP_FUZZ_SECONDS:-10}"
  cmake --build --preset fuzz -j "$jobs"
  ctest --preset fuzz -j "$jobs" # each target is one process on one core
fi
