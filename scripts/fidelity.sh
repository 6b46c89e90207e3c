#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The accuracy-remedies study of docs/fidelity.md: how much of the accuracy that
# sparse gradients lose each remedy of the literature wins back, on the emulated cluster
# (scripts/emulated-cluster.sh, 1 Gbit/s links; without root, plain local ranks, and it says
# so), one run after the other in this invocation, every report in OUT:
#   per model (cnn, vgg):
#     dense ring (the accuracy to reach)
#     no communication (the floor: every rank trains alone; the fastest an iteration can be,
#       so the most any compression can win per iteration)
#     per density (0.01, 0.001):
#       exact top-k, reused threshold, sampled threshold: no remedy
#       reused threshold with each remedy alone:
#         density warm-up   --density-warmup-epochs E      (DGC sec. 3.4)
#         density warm-up with the velocity kept: the same and --factor-masking false
#         local clipping    --clip-norm C                  (DGC sec. 3.3, C / sqrt(P) per rank)
#         small layers dense --dense-below N               (DGC; biases and small tensors)
#         learning-rate warm-up --warmup-epochs W          (Goyal et al. 2017)
#         adaptive density  --adaptive-density true        (docs/fidelity.md)
#         global momentum   --momentum-correction false    (no DGC momentum correction: plain
#                           error feedback, the optimizer's momentum on the averaged update)
#       each compressor with every remedy together (the combination; --combo changes it; DGC's
#       momentum correction on)
# Every run uses DGC's momentum correction (gradcomp-train's default) and the same seed, data
# order and epochs. Then, per model, scripts/compare-runs.py --x epochs (accuracy against epochs,
# OUT/<model>/comparison.md) and one table of every run (OUT/table.md).
#
#   scripts/fidelity.sh [--quick] [--epochs E] [--ranks P] [--train-limit N] [--models "cnn vgg"]
#                       [--densities "0.01 0.001"] [--warmup-epochs E] [--clip-norm C]
#                       [--dense-below N] [--lr-warmup-epochs W] [--combo "OPTIONS"]
#                       [--merge single|optimal] [--extra "OPTIONS"]
#                       [--bin PATH] [--local] [--out DIR] [--only "RUN NAMES"]
#
# Defaults: 6 epochs, 4 ranks, every training sample, density warm-up over 4 epochs (DGC's
# 0.25 -> target), clip norm 5, dense below 1024 elements, learning-rate warm-up 1 epoch. 56
# runs: several hours on 2 cores. --quick: 2 epochs of 256 samples, cnn at density 0.01 only
# (15 runs, a few minutes): it checks that the grid runs, not what it measures. --only runs just
# the named runs of the grid (names as the reports', e.g. "vgg-dense vgg-0.01-reused-clip").
# --merge: every run's merge plan (default single: one message after backward, the accuracy
# comparison; optimal: the overlapped exchange, for time to accuracy). --extra: options added
# to every sparse run (e.g. "--residual-stats true").
# Needs a release build of gradcomp-train (--bin, default build/bin/gradcomp-train) and the
# Fashion-MNIST files.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

epochs=6
ranks=4
train_limit=0
models="cnn vgg"
densities="0.01 0.001"
warmup=4
clip=5
dense_below=1024
lr_warmup=1
combo=""
bin=$repo/build/bin/gradcomp-train
local_only=0
out=results/fidelity
quick=0
only=""
merge=single
extra=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; shift ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --train-limit) train_limit=${2:?}; shift 2 ;;
    --models) models=${2:?}; shift 2 ;;
    --densities) densities=${2:?}; shift 2 ;;
    --warmup-epochs) warmup=${2:?}; shift 2 ;;
    --clip-norm) clip=${2:?}; shift 2 ;;
    --dense-below) dense_below=${2:?}; shift 2 ;;
    --lr-warmup-epochs) lr_warmup=${2:?}; shift 2 ;;
    --combo) combo=${2:?}; shift 2 ;;
    --bin) bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --local) local_only=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --only) only=" ${2:?} "; shift 2 ;;
    --merge) merge=${2:?}; shift 2 ;;
    --extra) extra=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fidelity: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $quick == 1 ]]; then
  epochs=2
  train_limit=256
  models=cnn
  densities=0.01
  warmup=1
fi
if [[ ! -x $bin ]]; then
  echo "fidelity: no gradcomp-train at $bin (build it: cmake --preset release &&" \
    "cmake --build build --target gradcomp-train; or pass --bin)" >&2
  exit 2
fi
if [[ -z $combo ]]; then
  combo="--density-warmup-epochs $warmup --clip-norm $clip --dense-below $dense_below"
  combo+=" --warmup-epochs $lr_warmup --adaptive-density true"
fi
read -r -a combo_args <<<"$combo"
read -r -a extra_args <<<"$extra"

source scripts/lib/training-runs.sh
runs_bin=$bin
runs_common=(--epochs "$epochs" --seed 1 --train-limit "$train_limit" --evals-per-epoch 2)
training_runs_setup "$ranks" "$local_only" "$out"
echo "fidelity: $runs_mode; $epochs epochs per run; results in $runs_out" >&2

# one run; a run that wrote no report (a failed launch, or MPICH's process manager failing at
# the end, docs/emulated-cluster.md "Known problems") is named and left out, and the grid goes on
failed=()
run_one() {
  local name=$1
  if [[ -n $only && $only != *" $name "* ]]; then
    return
  fi
  if ! run_gradcomp "$@"; then # a run without a report is left out of runs_reports
    echo "fidelity: run $name wrote no report (see $runs_out/$name.md); left out" >&2
    failed+=("$name")
  fi
}

declare -A model_reports
for model in $models; do
  first=${#runs_reports[@]}
  run_one "$model-dense" "$model dense ring" --model "$model" --method dense \
    --transport ring --merge "$merge"
  run_one "$model-floor" "$model, no communication (floor)" --model "$model" --method dense \
    --transport none --merge single
  for density in $densities; do
    sparse=(--model "$model" --density "$density" --transport allgather --merge "$merge"
      "${extra_args[@]}")
    for method in exact_topk reused_threshold sampled_topk; do
      run_one "$model-$density-$method" "$model $method $density" --method "$method" \
        "${sparse[@]}"
    done
    reused=(--method reused_threshold "${sparse[@]}")
    run_one "$model-$density-reused-warmup" "$model reused $density + density warm-up" \
      "${reused[@]}" --density-warmup-epochs "$warmup"
    run_one "$model-$density-reused-warmup-kept" \
      "$model reused $density + density warm-up, velocity kept" "${reused[@]}" \
      --density-warmup-epochs "$warmup" --factor-masking false
    run_one "$model-$density-reused-clip" "$model reused $density + local clipping" \
      "${reused[@]}" --clip-norm "$clip"
    run_one "$model-$density-reused-dense-small" \
      "$model reused $density + small layers dense" "${reused[@]}" --dense-below "$dense_below"
    run_one "$model-$density-reused-lr-warmup" "$model reused $density + lr warm-up" \
      "${reused[@]}" --warmup-epochs "$lr_warmup"
    run_one "$model-$density-reused-adaptive" "$model reused $density + adaptive density" \
      "${reused[@]}" --adaptive-density true
    run_one "$model-$density-reused-global-momentum" \
      "$model reused $density + global momentum (no momentum correction)" "${reused[@]}" \
      --momentum-correction false
    for method in exact_topk reused_threshold sampled_topk; do
      run_one "$model-$density-$method-combo" "$model $method $density + all remedies" \
        --method "$method" "${sparse[@]}" "${combo_args[@]}"
    done
  done
  model_reports[$model]="${runs_reports[*]:$first}"
done

for model in $models; do
  read -r -a reports <<<"${model_reports[$model]}"
  mkdir -p "$runs_out/$model"
  "$runs_python" scripts/compare-runs.py --x epochs --out "$runs_out/$model" --since "$runs_started" \
    --target-label "$model dense ring" \
    --title "### fidelity, $model: $runs_mode; $epochs epochs per run" "${reports[@]}" \
    >/dev/null
done
python3 - "$runs_out/table.md" "${runs_reports[@]}" <<'EOF'
import json
import sys

rows = ["| run | model | method | density | final test accuracy | achieved density "
        "| bytes sent per iteration | replicas identical |", "|---|---|---|---|---|---|---|---|"]
for path in sys.argv[2:]:
    with open(path) as f:
        r = json.load(f)
    c = r["config"]
    sent = r["per_iteration"]["bytes_sent"]["mean_over_ranks"]
    same = ("independent (no exchange)" if c["transport"] == "none"
            else "yes" if r["replicas_identical"] else "NO")
    rows.append(f"| {r['label']} | {c['model']} | {c['method']} | {c['density']} | "
                f"{100 * r['final_test_accuracy']:.2f} % | {r['achieved_density']:.5f} | "
                f"{sent:.0f} | {same} |")
with open(sys.argv[1], "w") as f:
    f.write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fidelity: ${#failed[@]} run(s) wrote no report: ${failed[*]}" >&2
fi
echo "fidelity: table $runs_out/table.md; per model $runs_out/<model>/comparison.md and the" \
  "accuracy-vs-epochs curves" >&2
