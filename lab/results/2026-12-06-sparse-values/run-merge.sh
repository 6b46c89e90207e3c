#!/usr/bin/env bash
# Time per iteration of the sparse allgather at 5 % (fp16 values) with one merge group, the
# two-segment plan and MG-WFBP's plan (the fc layers' exchange overlapping the conv layers'
# backward): 24,000 training samples (188 iterations), one epoch, seed 1, the emulated cluster.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 24000 --evals-per-epoch 1)
training_runs_setup 4 0 "${1:?output folder}"
sparse=(--method reused_threshold --density 0.05 --transport allgather --precision fp16)
run_gradcomp single "5 %, fp16, single" "${sparse[@]}" --merge single
run_gradcomp two-segment "5 %, fp16, two_segment" "${sparse[@]}" --merge two_segment
run_gradcomp mgwfbp "5 %, fp16, mgwfbp" "${sparse[@]}" --merge mgwfbp
run_gradcomp per-layer "5 %, fp16, per_layer" "${sparse[@]}" --merge per_layer
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${runs_reports[@]}"
