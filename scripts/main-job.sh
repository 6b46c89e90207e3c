#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's main job (docs/results.md): installs what is missing, builds gradcomp-train,
# creates the emulated 4-host cluster at 1 Gbit/s (scripts/emulated-cluster.sh; needs root: without
# it, 4 plain local ranks, and it says so) and trains ddp-baseline.md's CNN on Fashion-MNIST with
# the same seed, data order and learning-rate schedule (0.04, x 0.1 from epoch 1.5 on:
# --lr-decay step --lr-decay-epochs 1.5 in every run, gradcomp's and PyTorch's; docs/fidelity.md),
# each run until it reaches the target test accuracy (default 90.5 %, --target-accuracy) or the
# cap (default 3 epochs, --epochs), evaluating every 1/8 epoch (evaluation time excluded from the
# training time), one run after the other in this invocation:
#   gradcomp, dense ring:  --method dense --transport ring --merge optimal (our best dense exchange)
#   gradcomp, dense MPICH: --method dense --transport allreduce (MPI_Iallreduce, 25 MiB buckets)
#   gradcomp, compressed:  --method auto --density 0.05 --auto-critical-density 0.15
#                          --precision fp16 --transport allgather --merge optimal (dense or 5 %,
#                          15 % while Accordion's detector sees a critical regime, from the cost
#                          model calibrated at start-up; docs/train.md; values sent as fp16, the
#                          rounding kept in the residual: 40 % fewer bytes than fp32 values;
#                          the layers under 5 % of the parameters, every one but fc1, sent
#                          whole: --auto-dense-share's default; two groups, the fully connected
#                          layers' exchange beside the convolutions' backward, the
#                          convolutions' group dense. On this CNN 5 % reached 90.5 % at DDP
#                          dense's epoch where 1 % needed 0.5-1 epoch more, at a similar cost
#                          per iteration, and without the critical regimes neither reached it;
#                          sending the convolutions whole saved 0.4-0.5 epoch, the optimal merge
#                          14 % of the time per iteration against one group: docs/benchmarks.md)
#   gradcomp, floor:       --transport none (every rank trains alone: no communication at all;
#                          one epoch: the floors measure the time per iteration only)
#   PyTorch DDP over gloo (scripts/ddp_train.py, the same model, init, data order and
#   evaluation points): dense (25 MiB buckets), fp16 hook, PowerSGD hook rank 2 (one bucket),
#   and its own no-communication floor
# then prints them side by side (scripts/compare-runs.py: every run's time to the target against
# every other run's, speedups per iteration against every dense run, accuracy at equal epochs,
# wall time beside training time, all between runs of this invocation) and writes
# results/main-job/{comparison.md,accuracy-vs-time.svg (with the target line),*.json,*.md}.
#
#   scripts/main-job.sh [--target-accuracy A|none] [--epochs E] [--ranks P] [--train-limit N]
#                       [--local] [--no-floor] [--no-ddp] [--lr-decay-epochs E1,E2,...|none]
#                       [--seed S] [--out DIR]
#                       [-- EXTRA gradcomp-train OPTIONS for every gradcomp run]
# (--train-limit N: the first N training samples only, in every run: a quick check. --seed S:
# every run's seed (initial weights, data order, sampling; default 1).
# --lr-decay-epochs: the epochs the rate drops x 0.1 at, in every run; default 1.5; none: a
# constant rate, as the main job ran until 2026-12-02. --target-accuracy: a fraction, default
# 0.905; none: every run trains all --epochs. The floors train one epoch.)
# runs_only="NAME ..." in the environment runs only the named runs (dense-ring dense compressed
# floor ddp-dense ddp-fp16 ddp-powersgd ddp-floor).
# Takes about 25-30 minutes on a 2-core machine (build and apt excluded); --no-ddp leaves the
# four PyTorch runs out (about half of it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

epochs=3
target=0.905
ranks=4
train_limit=0
local_only=0
floor=1
ddp=1
out=results/main-job
lr_decay_epochs=1.5
seed=1
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --epochs) epochs=${2:?}; shift 2 ;;
    --target-accuracy) target=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --train-limit) train_limit=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --no-floor) floor=0; shift ;;
    --no-ddp) ddp=0; shift ;;
    --lr-decay-epochs) lr_decay_epochs=${2:?}; shift 2 ;;
    --seed) seed=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "main-job: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) # the code these runs measure
source scripts/lib/training-runs.sh
runs_bin=$repo/build/bin/gradcomp-train
runs_common=(--epochs "$epochs" --seed "$seed" --train-limit "$train_limit" --evals-per-epoch 8)
runs_target "$target" "$epochs" "$lr_decay_epochs"
training_runs_setup "$ranks" "$local_only" "$out"
schedule="learning rate 0.04"
[[ $lr_decay_epochs == none ]] || schedule+=", x 0.1 from epoch $lr_decay_epochs on"
echo "main-job: $runs_mode; $target_text; $schedule; results in $runs_out" >&2

run_gradcomp dense-ring "gradcomp dense, ring, optimal merge" --method dense --transport ring \
  --merge optimal "${extra[@]}"
run_gradcomp dense "gradcomp dense, MPICH allreduce" --method dense --transport allreduce \
  --merge size_threshold "${extra[@]}"
run_gradcomp compressed "gradcomp --method auto (dense or 5 %, 15 % when critical, small layers whole), fp16 values, allgather, optimal merge" \
  --method auto --density 0.05 --auto-critical-density 0.15 --precision fp16 --transport allgather \
  --merge optimal "${extra[@]}"
if [[ $floor == 1 ]]; then
  # the floors measure the time per iteration only (alone, a rank never reaches the target)
  runs_epochs 1 run_gradcomp floor "gradcomp, no communication (floor)" --method dense \
    --transport none --merge single "${extra[@]}"
fi
if [[ $ddp == 1 ]]; then
  run_ddp ddp-dense "PyTorch DDP dense" --exchange dense
  run_ddp ddp-fp16 "PyTorch DDP fp16 hook" --exchange fp16
  run_ddp ddp-powersgd "PyTorch DDP PowerSGD rank 2" --exchange powersgd --powersgd-rank 2
  if [[ $floor == 1 ]]; then
    runs_epochs 1 run_ddp ddp-floor "PyTorch, no communication (floor)" --exchange none
  fi
fi
"$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" "${compare_target[@]}" \
  --title "### gradcomp main job: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $target_text; $schedule; seed $seed" \
  "${runs_reports[@]}"
