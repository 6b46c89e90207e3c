#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gradcomp.torch's DDP communication hooks against PyTorch DDP's own exchanges
# (docs/python.md), side by side in one invocation on the emulated 4-host cluster at 1 Gbit/s
# (scripts/emulated-cluster.sh; needs root: without it, 4 plain local ranks, and it says so).
# Every run is scripts/ddp_train.py on the ddp-baseline CNN with the same seed, initial
# weights, data order, learning-rate schedule (0.04, x 0.1 from epoch 1.5 on, as the main job)
# and evaluation points (every 1/8 epoch), each until it reaches the target test accuracy
# (default 90.5 %) or the cap (default 3 epochs); only the gradient exchange differs:
#   DDP dense              DDP's default allreduce (25 MiB buckets, first 1 MiB)
#   DDP fp16 hook          DDP's fp16_compress_hook
#   DDP PowerSGD rank 2    DDP's PowerSGD hook (one bucket: its gloo collectives crash with two)
#   DDP + gradcomp hook, auto
#                          gradcomp.torch.sparse_allgather_hook with HookState(method="auto"):
#                          per bucket dense or the reused threshold at 5 % (15 % while
#                          Accordion's detector sees a critical regime), by gradcomp's rule on
#                          a cost model calibrated on the process group; optimizer momentum
#   DDP + gradcomp hook    reused_threshold at density 0.01 (momentum correction in the hook),
#                          DDP's default buckets
#   DDP + gradcomp hook, warm-up, velocity kept
#                          the same with DGC's density warm-up (25 % in epoch 1, then 1 %) and
#                          momentum correction keeping the velocity (HookState(factor_masking=
#                          False))
#   DDP + gradcomp hook, buckets merged
#                          the reused threshold run with HookState(merge_buckets=True): every
#                          bucket compressed as it arrives, one all_gather per iteration
#   DDP + gradcomp ring    gradcomp.torch.ring_allreduce_hook (fp32), DDP's default buckets
#   DDP + gradcomp fp16    gradcomp.torch.fp16_hook, DDP's default buckets
# then scripts/compare-runs.py: every run's training seconds to the target against every other
# run's, ms per iteration, bytes sent per rank, accuracy after each epoch, wall time beside
# training time, every ratio between runs of this invocation; plots of accuracy against seconds
# (with the target line) and epochs, ms per iteration and bytes.
#
#   scripts/python-hooks.sh [--quick] [--local] [--no-build] [--seed S] [--epochs E]
#                           [--target-accuracy A|none] [--lr-decay-epochs E1,...|none]
#                           [--hook-args "ARGS"] [--evals-per-epoch N] [--out DIR]
#
# --quick: 12,000 training samples, 1 epoch, 2 evaluations, no target (about 4 minutes on 2
# cores). Without it: all 60,000 samples, each run to the target or 3 epochs (about 40 minutes).
# --no-build: use build/python as it is (otherwise the gradcomp_python target is built first).
# --seed S: every run's seed (initial weights, data order, sampling; default 1).
# --epochs E: the cap (default 3). --target-accuracy A: a fraction (default 0.905); none: every
# run trains all E epochs. --lr-decay-epochs: the epochs the rate drops x 0.1 at, in every run
# (default 1.5); none: a constant rate.
# --hook-args "ARGS": more scripts/ddp_train.py options for the sparse gradcomp hook's reused
# threshold run (e.g. "--density-warmup-epochs 1 --warmup-stepped false").
# --evals-per-epoch N: evaluation points per epoch of every run (default 8; evaluation is not
# counted as training time).
# runs_only="NAME ..." in the environment runs only the named runs (e.g. "ddp-dense gradcomp-auto").
# Writes DIR (default results/python-hooks): every run's JSON and Markdown report,
# comparison.md, accuracy-vs-time.svg, accuracy-vs-epochs.svg, per-iteration.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

epochs=3
limit=0
evals=8
target=0.905
lr_decay_epochs=1.5
local_only=0
build=1
seed=1
hook_args=
out=results/python-hooks
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) epochs=1; limit=12000; evals=2; target=none; shift ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --target-accuracy) target=${2:?}; shift 2 ;;
    --lr-decay-epochs) lr_decay_epochs=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --no-build) build=0; shift ;;
    --seed) seed=${2:?}; shift 2 ;;
    --hook-args) hook_args=${2?}; shift 2 ;;
    --evals-per-epoch) evals=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "python-hooks: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $build == 1 ]]; then
  [[ -f build/CMakeCache.txt ]] || cmake --preset release >/dev/null
  cmake --build --preset release --target gradcomp_python
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) # the code these runs measure
export PYTHONPATH=$repo/build/python${PYTHONPATH:+:$PYTHONPATH}
source scripts/lib/training-runs.sh
runs_common=(--epochs "$epochs" --seed "$seed" --train-limit "$limit" --evals-per-epoch "$evals")
runs_target "$target" "$epochs" "$lr_decay_epochs"
training_runs_setup 4 "$local_only" "$out"
echo "python-hooks: $runs_mode; $target_text; results in $runs_out" >&2

read -ra hook_extra <<<"$hook_args"
run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
run_ddp ddp-fp16 "PyTorch DDP fp16 hook" --exchange fp16
run_ddp ddp-powersgd "PyTorch DDP PowerSGD rank 2" --exchange powersgd --powersgd-rank 2
run_ddp gradcomp-auto "DDP + gradcomp hook, auto" --exchange gradcomp --method auto \
  --density 0.05 --auto-critical-density 0.15
run_ddp gradcomp "DDP + gradcomp hook, reused_threshold 0.01" --exchange gradcomp \
  --method reused_threshold --density 0.01 ${hook_extra[@]+"${hook_extra[@]}"}
run_ddp gradcomp-kept "DDP + gradcomp hook, reused_threshold 0.01, warm-up, velocity kept" \
  --exchange gradcomp --method reused_threshold --density 0.01 \
  --density-warmup-epochs 1 --factor-masking false
run_ddp gradcomp-merged "DDP + gradcomp hook, reused_threshold 0.01, buckets merged" \
  --exchange gradcomp --method reused_threshold --density 0.01 \
  --merge-buckets true ${hook_extra[@]+"${hook_extra[@]}"}
run_ddp gradcomp-ring "DDP + gradcomp ring hook (fp32)" --exchange gradcomp-ring
run_ddp gradcomp-fp16 "DDP + gradcomp fp16 hook" --exchange gradcomp-fp16

title="### gradcomp.torch hooks against PyTorch DDP: $runs_mode; commit $commit; started \
$(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $target_text; seed $seed"
compare=("$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started"
  ${compare_target[@]+"${compare_target[@]}"})
"${compare[@]}" --x epochs "${runs_reports[@]}" >/dev/null
"${compare[@]}" --bars --title "$title" "${runs_reports[@]}"
