#!/usr/bin/env bash
# Time per iteration of the sparse allgather at 5 % with fp32, fp16 and bf16 values, beside the
# floor: 24,000 training samples (188 iterations), one epoch, seed 1, the emulated cluster.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 24000 --evals-per-epoch 1)
training_runs_setup 4 0 "${1:?output folder}"
sparse=(--method reused_threshold --density 0.05 --transport allgather --merge single)
run_gradcomp rt05-fp32 "reused threshold 5 %, fp32 values" "${sparse[@]}"
run_gradcomp rt05-fp16 "reused threshold 5 %, fp16 values" "${sparse[@]}" --precision fp16
run_gradcomp rt05-bf16 "reused threshold 5 %, bf16 values" "${sparse[@]}" --precision bf16
run_gradcomp floor "no communication (floor)" --method dense --transport none --merge single
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${runs_reports[@]}"
