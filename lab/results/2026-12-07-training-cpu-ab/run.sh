#!/usr/bin/env bash
# One short run of the main job's compressed configuration (--method auto, 30,000 training
# samples, 1 epoch, seed 1) on the emulated cluster: OUT/auto.{json,md}. BIN: the
# gradcomp-train to run (default build/bin/gradcomp-train).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 30000 --evals-per-epoch 1)
runs_target none 1 none
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather --merge optimal)
run_gradcomp auto "auto" "${auto[@]}" "${@:2}"
