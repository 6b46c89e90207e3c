#!/usr/bin/env bash
# The main job's --method auto run on the emulated cluster, as
# ../2026-12-07-training-cpu-ab/run.sh, with TRAIN_LIMIT samples (default 30000): OUT/auto.json.
# TRAIN_LIMIT=3000 stops soon after the merge plan (what the plan-stability runs need).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit "${TRAIN_LIMIT:-30000}" --evals-per-epoch 1)
runs_target none 1 none
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather --merge optimal)
run_gradcomp auto "auto" "${auto[@]}" "${@:2}"
