#!/usr/bin/env bash
# --method auto (the main job's compressed run) with the 4 intervals (0.5 epoch) after the
# learning-rate drop critical (--auto-drop-intervals 4) beside PyTorch DDP dense, to 90.5 % or
# 3 epochs; SEED (default 1); the emulated cluster. The main job's own auto run (1 interval)
# trains the same curve up to the drop (the runs are deterministic per seed).
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather --merge single)
run_gradcomp auto-drop4 "auto 5 %, critical 15 %, fp16, 4 intervals after the drop" "${auto[@]}" \
  --auto-drop-intervals 4
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${compare_target[@]}" "${runs_reports[@]}"
