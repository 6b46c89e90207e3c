#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The peers' compressors and sparse allreduces side by side (docs/compressors.md,
# docs/sparse-allreduce.md), one run after the other in one invocation on the emulated cluster
# (4 hosts x 1 rank, 1 Gbit/s; plain local ranks with --local), then the comparison table and
# plots of scripts/compare-runs.py. Builds gradcomp-train first. The runs (names for --only):
#   powersgd      gradcomp-train --method powersgd --rank R --transport ring
#   ddp-powersgd  PyTorch DDP's PowerSGD hook of the same rank (scripts/ddp_train.py, as in
#                 scripts/main-job.sh: one bucket, dense for its first 10 iterations)
#   dense-ring    gradcomp's dense ring with the optimal merge (the dense baseline)
#   topk          exact top-k at --density over the sparse allgather, optimal merge
#   oktopk, gtopk exact top-k at --density over Ok-Topk / gTop-k, optimal merge
#   random-k      random-k at --density over the allgather
#   signsgd, terngrad, qsgd   the quantizers over the allgather, per-layer scales (QSGD at 15
#                 levels, buckets of 512 values)
#   qsgd-one-scale  QSGD at 15 levels with one scale per layer (--quantization-bucket 0)
#   signsgd-buckets signSGD with a scale per bucket of 512 values (--quantization-bucket 512)
#   signsgd-sgd, random-k-sgd   signSGD and random-k without momentum (--momentum 0, no
#                 momentum correction) at lr 0.4 = 0.04 / (1 - 0.9), momentum SGD's step size:
#                 EF-signSGD's and random-k's algorithms as their papers run them
#
#   scripts/peer-compressors.sh [--rank R (2)] [--density D (0.01)] [--epochs E (1)]
#                               [--train-limit N (20000; 0: every sample)] [--ranks P (4)]
#                               [--model cnn|vgg|mlp (cnn)] [--local] [--only "NAMES"]
#                               [--out DIR (results/peer-compressors)]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

rank=2
density=0.01
model=cnn
only=""
epochs=1
train_limit=20000
ranks=4
local_only=0
out=results/peer-compressors
while [[ $# -gt 0 ]]; do
  case $1 in
    --rank) rank=${2:?}; shift 2 ;;
    --density) density=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --train-limit) train_limit=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peer-compressors: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
source scripts/lib/training-runs.sh
runs_bin=$repo/build/bin/gradcomp-train
runs_common=(--epochs "$epochs" --seed 1 --train-limit "$train_limit" --evals-per-epoch 2
  --model "$model")
training_runs_setup "$ranks" "$local_only" "$out"
echo "peer-compressors: $runs_mode; results in $runs_out" >&2

# wanted NAME: whether --only (empty: everything) names the run
wanted() { [[ -z $only || " $only " == *" $1 "* ]]; }
names="powersgd ddp-powersgd dense-ring topk oktopk gtopk random-k random-k-sgd signsgd"
names+=" signsgd-buckets signsgd-sgd terngrad qsgd qsgd-one-scale"
for name in $only; do
  if [[ " $names " != *" $name "* ]]; then
    echo "peer-compressors: unknown run '$name' in --only (runs: $names)" >&2
    exit 2
  fi
done
sparse=(--density "$density" --merge optimal)
wanted powersgd && run_gradcomp powersgd "gradcomp PowerSGD rank $rank, ring" \
  --method powersgd --rank "$rank" --transport ring --merge single
wanted ddp-powersgd && run_ddp ddp-powersgd "PyTorch DDP PowerSGD rank $rank" \
  --exchange powersgd --powersgd-rank "$rank"
wanted dense-ring && run_gradcomp dense-ring "gradcomp dense, ring, optimal merge" \
  --method dense --transport ring --merge optimal
wanted topk && run_gradcomp topk "gradcomp exact top-k $density, allgather" \
  --method exact_topk --transport allgather "${sparse[@]}"
wanted oktopk && run_gradcomp oktopk "gradcomp exact top-k $density, Ok-Topk" \
  --method exact_topk --transport oktopk "${sparse[@]}"
wanted gtopk && run_gradcomp gtopk "gradcomp exact top-k $density, gTop-k" \
  --method exact_topk --transport gtopk "${sparse[@]}"
wanted random-k && run_gradcomp random-k "gradcomp random-k $density, allgather" \
  --method random_k --transport allgather "${sparse[@]}"
plain_sgd=(--momentum 0 --lr 0.4)
wanted random-k-sgd && run_gradcomp random-k-sgd "gradcomp random-k $density, no momentum, lr 0.4" \
  --method random_k --transport allgather "${sparse[@]}" --momentum-correction false "${plain_sgd[@]}"
wanted signsgd && run_gradcomp signsgd "gradcomp signSGD (scaled sign), allgather" \
  --method signsgd --transport allgather --merge optimal
wanted signsgd-buckets && run_gradcomp signsgd-buckets \
  "gradcomp signSGD, a scale per 512 values, allgather" --method signsgd --quantization-bucket 512 \
  --transport allgather --merge optimal
wanted signsgd-sgd && run_gradcomp signsgd-sgd "gradcomp signSGD, no momentum, lr 0.4, allgather" \
  --method signsgd --transport allgather --merge optimal "${plain_sgd[@]}"
wanted terngrad && run_gradcomp terngrad "gradcomp TernGrad, allgather" \
  --method terngrad --transport allgather --merge optimal
wanted qsgd && run_gradcomp qsgd "gradcomp QSGD 15 levels, buckets of 512, allgather" \
  --method qsgd --levels 15 --quantization-bucket 512 --transport allgather --merge optimal
wanted qsgd-one-scale && run_gradcomp qsgd-one-scale \
  "gradcomp QSGD 15 levels, a scale per layer, allgather" --method qsgd --levels 15 --quantization-bucket 0 --transport allgather --merge optimal
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
"$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
  --title "### The peers' compressors side by side: $runs_mode; model $model; commit $commit; $epochs epochs" \
  "${runs_reports[@]}"
