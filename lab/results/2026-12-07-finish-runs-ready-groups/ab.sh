#!/usr/bin/env bash
# Alternated short runs (../2026-12-07-training-cpu-ab/run.sh): A with the gradcomp-train
# BEFORE, B with AFTER (two binaries), N pairs, the order within a pair swapped every other pair.
#   BEFORE=bin1 AFTER=bin2 RUN=auto|dense-ring ab.sh OUT N
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output folder}; n=${2:?pairs}
mkdir -p "$out"; out=$(cd "$out" && pwd)
run=${RUN:-auto}
for i in $(seq 1 "$n"); do
  order=(A B); (( i % 2 == 0 )) && order=(B A)
  for v in "${order[@]}"; do
    if [[ $v == A ]]; then bin=${BEFORE:?}; else bin=${AFTER:?}; fi
    BIN=$bin RUN=$run "$here/../2026-12-07-training-cpu-ab/run.sh" "$out/tmp" >/dev/null 2>"$out/$v$i.log"
    mv "$out/tmp/$run.json" "$out/$v$i.json"; mv "$out/tmp/$run.md" "$out/$v$i.md" 2>/dev/null || true
  done
done
rm -rf "$out/tmp"
