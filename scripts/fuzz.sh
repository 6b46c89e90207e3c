#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Long fuzzing outside CI: builds the libFuzzer targets (preset fuzz: clang, ASan + UBSan) and
# runs each for a number of executions (default 10^7), starting from the committed seed corpus
# plus the build tree's working corpus, and prints one line per target: executions, seconds,
# corpus size, and whether a finding was written (crash-*, leak-*, timeout-* in build-fuzz/).
# A finding fails the script; add the input to test/fuzz/corpus/<target>/ as a regression seed
# once it is fixed (docs/testing.md).
#
#   scripts/fuzz.sh                          # every target, 10^7 executions each
#   scripts/fuzz.sh --executions 1000000     # fewer
#   scripts/fuzz.sh --executions 1e7 state_load wire_decode
set -euo pipefail
cd "$(dirname "$0")/.."

executions=10000000
targets=()
while (($#)); do
  case "$1" in
    --executions) executions=$(printf '%.0f' "$2"); shift 2 ;;
    -h|--help) sed -n '3,13p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  targets=(wire_decode allgather_headers profile_csv npy_input state_load)
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" >/dev/null
status=0
for t in "${targets[@]}"; do
  bin=build-fuzz/test/gradcomp_fuzz_$t
  work=build-fuzz/test/fuzz-corpus/$t
  mkdir -p "$work"
  log=build-fuzz/fuzz-$t.log
  start=$(date +%s)
  if (cd build-fuzz && "../$bin" -runs="$executions" -print_final_stats=1 "../$work" \
        "../test/fuzz/corpus/$t" >"../$log" 2>&1); then
    result="no finding"
  else
    result="FINDING (see $log and build-fuzz/crash-*)"
    status=1
  fi
  seconds=$(($(date +%s) - start))
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  corpus=$(find "$work" -type f | wc -l)
  echo "$t: $runs executions in ${seconds} s, working corpus $corpus inputs: $result"
done
exit "$status"
