#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")/../../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8 --target-accuracy 0.905 --lr-decay step --lr-decay-epochs 1.5)
training_runs_setup 4 0 "${1:?output folder}"
run_gradcomp auto-single "auto, single group" --method auto --density 0.01 --transport allgather --merge single
run_gradcomp auto-single-nocrit "auto, single group, critical density 0.01" --method auto --density 0.01 --auto-critical-density 0.01 --transport allgather --merge single
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
"$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" --target-accuracy 0.905 \
  --title "### auto variants: $runs_mode" "${runs_reports[@]}"
