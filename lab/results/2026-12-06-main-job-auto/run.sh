#!/usr/bin/env bash
# the main job's compressed and auto runs beside DDP dense and PowerSGD, one invocation
set -euo pipefail
cd "$(dirname "$0")/../../.."; repo=$(pwd)
commit=$(git rev-parse --short HEAD)
source scripts/lib/training-runs.sh
runs_bin="$repo/build/bin/gradcomp-train"
runs_common=(--epochs 3 --seed "${SEED:-1}" --train-limit 0 --evals-per-epoch 8 --target-accuracy 0.905 --lr-decay step --lr-decay-epochs 1.5)
training_runs_setup 4 0 "${1:?output folder}"
echo "mode: $runs_mode" >&2
run_gradcomp auto "gradcomp --method auto, allgather, optimal merge" --method auto --density 0.01 --transport allgather --merge optimal
run_gradcomp compressed "gradcomp reused_threshold 1% (warm-up, velocity kept), allgather, optimal merge" \
  --method reused_threshold --density 0.01 --transport allgather --merge optimal --density-warmup-epochs 1 --factor-masking false
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
run_ddp ddp-powersgd "PyTorch DDP PowerSGD rank 2" --exchange powersgd --powersgd-rank 2
"$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" --target-accuracy 0.905 \
  --title "### auto vs warm-up vs DDP: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC')" \
  "${runs_reports[@]}"
