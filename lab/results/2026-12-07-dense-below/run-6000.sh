#!/usr/bin/env bash
# The main job's compressed run (--method auto) with every layer under 6,000 elements sent dense
# (--dense-below 6000: conv1, fc2 and the biases; conv2 and fc1 stay sparse), to 90.5 % or 3
# epochs; SEED (default 1); the emulated cluster. Run after run.sh, alone in its invocation.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather --merge single)
run_gradcomp dense-below-6000 "auto, layers under 6,000 elements dense" "${auto[@]}" \
  --dense-below 6000
