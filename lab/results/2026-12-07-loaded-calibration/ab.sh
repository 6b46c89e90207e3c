#!/usr/bin/env bash
# Alternates two gradcomp-train builds (BEFORE, AFTER: paths) through run.sh (RUN=auto or
# dense-ring) PAIRS times (default 6): OUT/{before,after}-N/RUN.json; ../2026-12-07-calibration-line-up/summarize.py OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output folder}
mkdir -p "$out"
out=$(cd "$out" && pwd) # run.sh works from the repository root
for i in $(seq 1 "${PAIRS:-6}"); do
  for which in before after; do
    bin=$BEFORE
    [[ $which == after ]] && bin=$AFTER
    BIN=$bin "$here/run.sh" "$out/$which-$i" > "$out/$which-$i.log" 2>&1 ||
      echo "run $which-$i failed (see its log)"
  done
done
