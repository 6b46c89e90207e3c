#!/usr/bin/env bash
# Alternates two gradcomp-train builds (BEFORE, AFTER: paths) through the main job's auto run on
# the emulated cluster (../2026-12-07-plan-after-backward/run.sh, TRAIN_LIMIT=3000: it stops
# soon after the merge plan) PAIRS times: OUT/{before,after}-N/auto.json. plans.py-style
# summary: summarize.py OUT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output folder}
pairs=${PAIRS:-6}
mkdir -p "$out"
for i in $(seq 1 "$pairs"); do
  for which in before after; do
    bin=$BEFORE
    [[ $which == after ]] && bin=$AFTER
    BIN=$bin TRAIN_LIMIT=3000 "$here/../2026-12-07-plan-after-backward/run.sh" "$out/$which-$i" \
      > "$out/$which-$i.log" 2>&1 || echo "run $which-$i failed (see its log)"
  done
done
