#!/usr/bin/env bash
# --method auto (small layers whole, the default) with one group (--merge single, the main job's
# compressed run) and with the optimal merge plan (--merge optimal: the fully connected layers'
# group goes while the convolutions' backward runs; the convolutions' group, all of it whole, is
# priced dense and goes through the allgather's ring), to 90.5 % or 3 epochs, one invocation;
# SEED (default 1); the emulated cluster.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather)
run_gradcomp single "auto, one group" "${auto[@]}" --merge single
run_gradcomp optimal "auto, optimal merge" "${auto[@]}" --merge optimal
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${compare_target[@]}" "${runs_reports[@]}"
