#!/usr/bin/env bash
# One short run of the main job's compressed configuration (--method auto, 30,000 training
# samples, 1 epoch, seed 1) on the emulated cluster: OUT/auto.{json,md}. BIN: the
# gradcomp-train to run (default build/bin/gradcomp-train). RUN=dense-ring: the main job's
# dense ring instead (OUT/dense-ring.{json,md}). Arguments after OUT go to gradcomp-train.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/lib/training-runs.sh
runs_bin="${BIN:-build/bin/gradcomp-train}"
runs_common=(--epochs 1 --seed 1 --train-limit 30000 --evals-per-epoch 1)
runs_target none 1 none
training_runs_setup 4 0 "${1:?output folder}"
case ${RUN:-auto} in
  auto) args=(--method auto --density 0.05 --auto-critical-density 0.15 --precision fp16
              --transport allgather --merge optimal) ;;
  dense-ring) args=(--method dense --transport ring --merge optimal) ;;
  *) echo "run.sh: RUN is auto or dense-ring" >&2; exit 2 ;;
esac
run_gradcomp "${RUN:-auto}" "${RUN:-auto}" "${args[@]}" "${@:2}"
