#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")/../../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8 --target-accuracy 0.905 --lr-decay step --lr-decay-epochs 1.5)
training_runs_setup 4 0 "${1:?output folder}"
run_gradcomp auto-d05-c15 "auto, density 0.05, critical 0.15, single" --method auto --density 0.05 --auto-critical-density 0.15 --transport allgather --merge single
run_gradcomp auto-d05-c05 "auto, density 0.05, no critical change, single" --method auto --density 0.05 --auto-critical-density 0.05 --transport allgather --merge single
