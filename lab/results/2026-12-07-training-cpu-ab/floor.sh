#!/usr/bin/env bash
# The same short run without communication (--transport none): OUT/floor.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 30000 --evals-per-epoch 1)
runs_target none 1 none
training_runs_setup 4 0 "${1:?output folder}"
run_gradcomp floor "floor" --transport none
