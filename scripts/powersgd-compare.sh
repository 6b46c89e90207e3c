#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PowerSGD side by side (docs/compressors.md): gradcomp-train --method powersgd --rank R and
# PyTorch DDP's PowerSGD hook of the same rank (scripts/ddp_train.py, as in scripts/main-job.sh),
# with gradcomp's dense ring as the dense baseline, one after the other in one invocation on the
# emulated cluster (4 hosts x 1 rank, 1 Gbit/s; plain local ranks with --local), then the
# comparison table and plots of scripts/compare-runs.py. Builds gradcomp-train first.
#
#   scripts/powersgd-compare.sh [--rank R (2)] [--epochs E (1)] [--train-limit N (20000)]
#                               [--ranks P (4)] [--local] [--out DIR (results/powersgd)]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

rank=2
epochs=1
train_limit=20000
ranks=4
local_only=0
out=results/powersgd
while [[ $# -gt 0 ]]; do
  case $1 in
    --rank) rank=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --train-limit) train_limit=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "powersgd-compare: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
source scripts/lib/training-runs.sh
runs_bin=$repo/build/examples/gradcomp-train
runs_common=(--epochs "$epochs" --seed 1 --train-limit "$train_limit" --evals-per-epoch 2)
training_runs_setup "$ranks" "$local_only" "$out"
echo "powersgd-compare: $runs_mode; results in $runs_out" >&2

run_gradcomp powersgd "gradcomp PowerSGD rank $rank, ring" --method powersgd --rank "$rank" \
  --transport ring --merge single
run_ddp ddp-powersgd "PyTorch DDP PowerSGD rank $rank" --exchange powersgd \
  --powersgd-rank "$rank"
run_gradcomp dense-ring "gradcomp dense, ring, optimal merge" --method dense --transport ring \
  --merge optimal
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
"$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
  --title "### PowerSGD side by side: $runs_mode; commit $commit; $epochs epochs" \
  "${runs_reports[@]}"
