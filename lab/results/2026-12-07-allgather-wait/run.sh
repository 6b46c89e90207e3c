#!/usr/bin/env bash
# The main job's compressed run (--method auto, sparse allgather) for 1 epoch with the
# communication thread's waits yielding (the allgather's default before --wait applied to every
# transport) and sleeping (--wait sleep, 50 us cap), alternated twice; seed 1; the emulated
# cluster. The runs are deterministic per seed, so only the time differs.
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 1)
runs_target none 1 1.5
training_runs_setup 4 0 "${1:?output folder}"
auto=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
      --transport allgather --merge single)
for round in 1 2; do
  run_gradcomp "yield-$round" "auto, allgather waits yield" "${auto[@]}" --wait yield
  run_gradcomp "sleep-$round" "auto, allgather waits sleep (50 us cap)" "${auto[@]}" --wait sleep
done
