#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The large-batch experiment of docs/large-batch.md (S4 / You et al. 2017's claim): at equal
# epochs, momentum SGD with the linear learning-rate scaling rule and a warm-up against LARS
# with the same warm-up, at global batches of 128, 1024 and 4096 (per-rank batch x ranks), dense
# exchange over gradcomp's ring. Every run is one gradcomp-train report in OUT; the table and
# the accuracy curves against epochs come from them (scripts/large-batch-table.py,
# scripts/compare-runs.py --x epochs).
#
#   scripts/large-batch.sh [OUT=results/large-batch] [EPOCHS=2] [RANKS=2] [LARS_LR=2]
#                          [SGD_SCALING=linear|sqrt] [OPTIMIZERS="sgd lars"] [BATCHES="128 1024 4096"]
#
# SGD's learning rate is 0.04 at global batch 128, scaled linearly (Goyal et al. 2017) or by the
# square root of the batch ratio; runs with sqrt scaling are named sgd-sqrt-B.
#
# Needs the release build (build/bin/gradcomp-train) and the Fashion-MNIST files. Takes
# 2-5 minutes per run on 2 cores (6 runs: about 25 minutes). Timing is not the point here: do
# not compare its iteration times with other runs.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-results/large-batch}"
epochs="${2:-2}"
ranks="${3:-2}"
lars_lr="${4:-2}"
sgd_scaling="${5:-linear}"
optimizers="${6:-sgd lars}"
batches="${7:-128 1024 4096}"
train=build/bin/gradcomp-train
warmup=0.25
mkdir -p "$out"
for global in $batches; do
  per_rank=$((global / ranks))
  if [[ "$sgd_scaling" == sqrt ]]; then
    sgd_lr=$(python3 -c "print(round(0.04 * ($global / 128) ** 0.5, 4))")
  else
    sgd_lr=$(python3 -c "print(0.04 * $global / 128)")
  fi
  for optimizer in $optimizers; do
    lr="$sgd_lr"
    name="$optimizer"
    [[ "$optimizer" == sgd && "$sgd_scaling" == sqrt ]] && name=sgd-sqrt
    [[ "$optimizer" == lars ]] && lr="$lars_lr"
    echo "== $name, global batch $global ($ranks x $per_rank), lr $lr"
    OMP_NUM_THREADS=1 mpiexec -n "$ranks" "$train" --epochs "$epochs" --batch-size "$per_rank" \
      --method dense --transport ring --merge single --optimizer "$optimizer" --lr "$lr" \
      --warmup-epochs "$warmup" --evals-per-epoch 4 --label "$name B=$global" \
      --report "$out/$name-$global.json" > "$out/$name-$global.log" 2>&1
  done
done
python3 scripts/large-batch-table.py "$out"/*.json | tee "$out/table.md"
/usr/bin/python3 scripts/compare-runs.py --x epochs --out "$out" "$out"/*.json > /dev/null
echo "table: $out/table.md, curves: $out/accuracy-vs-epochs.svg"
