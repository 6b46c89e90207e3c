#!/usr/bin/env bash
# The main job's --method auto run at densities 5 %, 3 % and 2 % (critical phases 15 %) beside
# PyTorch DDP dense, one invocation, to 90.5 % or 3 epochs; SEED (default 1); the emulated
# cluster. OUT: the output folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8)
runs_target 0.905 3 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--auto-critical-density 0.15 --precision fp16 --transport allgather --merge optimal)
for d in ${DENSITIES:-0.05 0.03 0.02}; do
  pct=$(awk -v d="$d" 'BEGIN { printf "%g", 100 * d }')
  run_gradcomp "auto-$pct" "auto $pct %, critical 15 %" --method auto --density "$d" "${auto[@]}"
done
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
"$runs_python" scripts/compare-runs.py --out "$runs_out" "${compare_target[@]}" "${runs_reports[@]}"
