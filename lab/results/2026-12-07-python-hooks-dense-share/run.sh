#!/usr/bin/env bash
# The DDP hooks' method auto with DDP's small bucket (the CNN's convolutions, 3.1 % of the
# values) sent whole (HookState dense_share 0.05; it ran as the default of 07a8851) against none (0), beside PyTorch
# DDP dense, each to 90.5 % or 3 epochs, one invocation; SEED (default 1); the emulated cluster.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
export PYTHONPATH=$repo/build/python${PYTHONPATH:+:$PYTHONPATH}
source scripts/lib/training-runs.sh
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--exchange gradcomp --method auto --density 0.05 --auto-critical-density 0.15)
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
run_ddp auto-whole "DDP + gradcomp hook, auto, small buckets whole" "${auto[@]}" \
  --auto-dense-share 0.05
run_ddp auto-none "DDP + gradcomp hook, auto, no bucket whole" "${auto[@]}" \
  --auto-dense-share 0
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${compare_target[@]}" "${runs_reports[@]}"
