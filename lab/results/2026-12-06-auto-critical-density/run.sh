#!/usr/bin/env bash
# --method auto with fp16 values: critical density 0.15 (the main job's) against 0.25 (now
# priced sparse: pairs as the allgather encodes them), beside PyTorch DDP dense, to 90.5 % or
# 3 epochs; SEED (default 1); the emulated cluster.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --precision fp16 --transport allgather --merge single)
run_gradcomp auto-c15 "auto 5 %, critical 15 %, fp16" "${auto[@]}" --auto-critical-density 0.15
run_gradcomp auto-c25 "auto 5 %, critical 25 %, fp16" "${auto[@]}" --auto-critical-density 0.25
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${compare_target[@]}" "${runs_reports[@]}"
