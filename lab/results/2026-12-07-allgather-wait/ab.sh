#!/usr/bin/env bash
# Alternates two gradcomp-train builds (BIN_DIR/gradcomp-train-yield: the allgather waits by
# yield, the default; BIN_DIR/gradcomp-train-sleep: by --wait, i.e. sleep) through the main
# job's auto run (TRAIN_LIMIT=30000, seed 1, the emulated cluster), five pairs: OUT/{yield,sleep}-N.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1; mkdir -p $out
for i in 1 2 3 4 5; do
  for which in yield sleep; do
    BIN=$BIN_DIR/gradcomp-train-$which TRAIN_LIMIT=30000 lab/results/2026-12-07-plan-after-backward/run.sh $out/$which-$i > $out/$which-$i.log 2>&1 || echo "fail $which-$i"
  done
done
