#!/usr/bin/env bash
# One short run of the main job's --method auto run (RUN=auto, default) or its dense ring
# (RUN=dense-ring) on the emulated cluster, seed 1, 3,000 samples: it stops soon after the merge
# plan. BIN picks the binary. OUT/RUN.json.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 3000 --evals-per-epoch 1)
runs_target none 1 none
training_runs_setup 4 0 "${1:?output folder}"
case ${RUN:-auto} in
  auto) run_gradcomp auto "auto" --method auto --density 0.05 --auto-critical-density 0.15 \
          --precision fp16 --transport allgather --merge optimal ;;
  dense-ring) run_gradcomp dense-ring "dense ring" --method dense --transport ring --merge optimal ;;
  *) echo "RUN is auto or dense-ring" >&2; exit 2 ;;
esac
