#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sources' experiments and the peers, each measured side by side in one invocation on the
# emulated 4-host 1 Gbit/s cluster (docs/reproduction.md; plain local ranks without root):
#
#   peers  gradcomp against PyTorch DDP (dense, fp16 hook, PowerSGD) and both floors: the main
#          job (scripts/main-job.sh), same model, init, data order and evaluation points
#   s1     S1's Tables 1-2 / Figs 11-13 on the CNN: dense, global top-k (one selection over the
#          model), LAGS (layer-wise exact top-k), DLGS (reused threshold + greedy merge) and DLGS
#          with the optimal merge, at density 0.1 and 0.01, over the parameter server (S1's
#          setting: one server) and the sparse allgather; accuracy after equal epochs, time per
#          iteration split into compute / sparsification / non-overlapped communication,
#          speedup over dense (scripts/s1-table.py)
#   s2     S2's hybrid parallelism on the CNN and the VGG-style model: data parallel against
#          hybrid (FC layers model parallel: the planner's auto choice, and fc1 forced), dense over
#          the ring and compressed (reused threshold, density 0.01, allgather); time per
#          iteration, bytes and accuracy after equal epochs (scripts/compare-runs.py). The
#          communication figures (S2 Figs. 14-16) come from benchmark/run_hybrid_fc.sh
#   s3     S3 (CSSGD) against its baselines on S3's MLP and on the CNN: synchronous SGD with
#          every worker's gradient unicast to every other (S3's "SSGD unicast": the coded exchange
#          at redundancy 1), gradcomp's dense ring (the best synchronous baseline) and the coded
#          exchange at r = 2 and 3 (dense gradients, exact fixed point), and S3's third
#          baseline, asynchronous SGD with a parameter server (gradcomp-train --sync async: the
#          same 4 workers plus one dedicated server rank on a fifth emulated host); time and
#          bytes to the highest accuracy every run reaches (scripts/compare-runs.py
#          --target-common)
#   dense  the dense exchange against PyTorch DDP on the CNN and the VGG-style model:
#          gradcomp's ring with the optimal merge (WFBP overlap), the same ring as one group
#          after backward (no overlap, as DDP's 25 MiB bucket), MPICH's MPI_Iallreduce in 25 MiB
#          buckets, and DDP dense over gloo; time per iteration and to DDP's final accuracy
#   fusion S4's fusion before/after on a two-tier cluster (2 hosts x 2 ranks: shared memory
#          inside a host, 1 Gbit/s between hosts), VGG-style model, dense: the ring with one
#          message per tensor (per_layer), fusion by size (25 MiB), two-segment fusion and the
#          optimal merge, and the hierarchical ring with the optimal merge; time per iteration
#          measured and predicted by the merge model (scripts/compare-runs.py)
#   all    every experiment above
#
#   scripts/reproduce.sh [peers|s1|s2|s3|dense|fusion|all] [--quick] [--local] [--out DIR]
#                        [--models "cnn vgg"] [--only "RUN NAMES"]
#
# --quick: 12,000 training samples and 1 epoch per run (s1: about 8 minutes on 2 cores, peers
# about 5, s3 about 8). Without it: all 60,000 samples, 2 epochs (s1: 73 minutes, peers about
# 20, s3 53: about 2.5 hours for all).
# --models: the models of the s2 and dense experiments (default "cnn vgg").
# --only: just the runs of these names (the reports' file names without .json, e.g. "dense
# dense-hybrid-auto" for s2); the tables then compare those.
# Writes DIR/<experiment>/ (default results/reproduce): every run's JSON and Markdown report and
# the experiment's table and plot.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

what=all
quick=0
local_only=0
out=results/reproduce
models="cnn vgg"
while [[ $# -gt 0 ]]; do
  case $1 in
    peers | s1 | s2 | s3 | dense | fusion | all) what=$1; shift ;;
    --quick) quick=1; shift ;;
    --local) local_only=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --models) models=${2:?}; shift 2 ;;
    --only) runs_only=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
epochs=2
limit=0
evals=4
if [[ $quick == 1 ]]; then
  epochs=1
  limit=12000
  evals=1 # a test-set evaluation costs about 3 s of 2 cores: the quick runs evaluate at the end
fi

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
source scripts/lib/training-runs.sh
runs_bin=$repo/build/bin/gradcomp-train
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

peers() {
  local flags=(--epochs "$epochs" --train-limit "$limit" --out "$out/peers")
  [[ $local_only == 1 ]] && flags+=(--local)
  scripts/main-job.sh "${flags[@]}"
}

s1() {
  runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch "$evals")
  training_runs_setup 4 "$local_only" "$out/s1"
  echo "reproduce s1: $runs_mode; $epochs epoch(s), train limit $limit; in $runs_out" >&2
  run_gradcomp dense-ps "dense / ps" --method dense --transport ps --servers 1 \
    --merge size_threshold
  run_gradcomp dense-ring "dense / ring" --method dense --transport ring --merge optimal
  local d t name
  for t in ps allgather; do
    local where=(--transport "$t")
    [[ $t == ps ]] && where+=(--servers 1)
    for d in 0.1 0.01; do
      name="$t-$d"
      run_gradcomp "topk-$name" "global top-k / $t / $d" --method exact_topk --density "$d" \
        --merge single --compression-scope group "${where[@]}"
      run_gradcomp "lags-$name" "LAGS / $t / $d" --method exact_topk --density "$d" \
        --merge per_layer "${where[@]}"
      run_gradcomp "dlgs-$name" "DLGS / $t / $d" --method reused_threshold --density "$d" \
        --merge dlgs_greedy "${where[@]}"
      run_gradcomp "dlgs-opt-$name" "DLGS optimal merge / $t / $d" --method reused_threshold \
        --density "$d" --merge optimal "${where[@]}"
    done
  done
  "$runs_python" scripts/s1-table.py --out "$runs_out" --since "$runs_started" \
    --title "S1 on the CNN: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $epochs epoch(s), train limit $limit" \
    "${runs_reports[@]}"
}

s2() {
  local model
  for model in $models; do
    runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch "$evals"
      --model "$model" --merge optimal)
    training_runs_setup 4 "$local_only" "$out/s2-$model"
    echo "reproduce s2 ($model): $runs_mode; $epochs epoch(s), train limit $limit" >&2
    local dense=(--method dense --transport ring)
    local sparse=(--method reused_threshold --density 0.01 --transport allgather)
    run_gradcomp dense "dense ring, data parallel ($model)" "${dense[@]}"
    run_gradcomp dense-hybrid-auto "dense ring, hybrid auto ($model)" "${dense[@]}" \
      --parallel hybrid --mp-layers auto
    run_gradcomp dense-hybrid-fc1 "dense ring, hybrid fc1 ($model)" "${dense[@]}" \
      --parallel hybrid --mp-layers fc1
    run_gradcomp sparse "reused threshold 0.01, data parallel ($model)" "${sparse[@]}"
    run_gradcomp sparse-hybrid-fc1 "reused threshold 0.01, hybrid fc1 ($model)" "${sparse[@]}" \
      --parallel hybrid --mp-layers fc1
    "$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
      --title "### S2 on the $model: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $epochs epoch(s), train limit $limit" \
      "${runs_reports[@]}" >/dev/null
    cat "$runs_out/comparison.md"
  done
}

s3() {
  local model
  for model in mlp cnn; do
    runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch "$evals"
      --model "$model" --method dense)
    training_runs_setup 4 "$local_only" "$out/s3-$model"
    echo "reproduce s3 ($model): $runs_mode; $epochs epoch(s), train limit $limit" >&2
    run_gradcomp ring "SSGD, dense ring ($model)" --transport ring --merge optimal
    local r
    for r in 1 2 3; do
      local label="coded r = $r ($model)"
      [[ $r == 1 ]] && label="SSGD unicast = coded r = 1 ($model)"
      run_gradcomp "coded-r$r" "$label" --transport coded --redundancy "$r" --merge optimal
    done
    # ASGD: 4 workers (the same shards and batches per worker) and 1 dedicated server rank
    runs_ranks=5 run_gradcomp asgd "ASGD, 4 workers + 1 server ($model)" --sync async \
      --transport ps --servers 1
    "$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
      --target-common \
      --title "### S3 on the $model: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $epochs epoch(s), train limit $limit" \
      "${runs_reports[@]}" >/dev/null
    cat "$runs_out/comparison.md"
  done
}

dense() {
  local model
  for model in $models; do
    runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch "$evals"
      --model "$model")
    training_runs_setup 4 "$local_only" "$out/dense-$model"
    echo "reproduce dense ($model): $runs_mode; $epochs epoch(s), train limit $limit" >&2
    # --replan-mode keep: the plan stays the profile's; the report adds the model's prediction
    # from the times measured in training's first 20 iterations (the check of the iteration model)
    run_gradcomp ring-optimal "gradcomp ring, optimal merge ($model)" --method dense \
      --transport ring --merge optimal --replan-after 20 --replan-mode keep
    run_gradcomp ring-single "gradcomp ring, one group after backward ($model)" --method dense \
      --transport ring --merge single --replan-after 20 --replan-mode keep
    run_gradcomp mpich "gradcomp MPICH allreduce, 25 MiB buckets ($model)" --method dense \
      --transport allreduce --merge size_threshold
    run_ddp ddp-dense "PyTorch DDP dense, gloo ($model)" --exchange dense
    "$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
      --title "### Dense exchange on the $model: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $epochs epoch(s), train limit $limit" \
      "${runs_reports[@]}" >/dev/null
    cat "$runs_out/comparison.md"
  done
}

fusion() {
  runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch "$evals"
    --model vgg --method dense)
  runs_ppn=2
  training_runs_setup 4 "$local_only" "$out/fusion"
  echo "reproduce fusion: $runs_mode; $epochs epoch(s), train limit $limit" >&2
  local merge
  for merge in per_layer size_threshold two_segment optimal; do
    run_gradcomp "ring-$merge" "ring, $merge (vgg)" --transport ring --merge "$merge"
  done
  for merge in two_segment optimal; do
    run_gradcomp "hierarchical-$merge" "hierarchical (2 per host), $merge (vgg)" \
      --transport hierarchical --group-size 2 --merge "$merge"
  done
  runs_ppn=1
  "$runs_python" scripts/compare-runs.py --out "$runs_out" --since "$runs_started" \
    --title "### S4's fusion on a two-tier cluster: $runs_mode; commit $commit; started $(date -u -d "@$runs_started" '+%Y-%m-%d %H:%M UTC'); $epochs epoch(s), train limit $limit" \
    "${runs_reports[@]}" >/dev/null
  cat "$runs_out/comparison.md"
  "$runs_python" - "${runs_reports[@]}" <<'PY'
import json, sys
print("\n| run | groups | predicted ms | measured ms | measured / predicted |\n|---|---|---|---|---|")
for path in sys.argv[1:]:
    r = json.load(open(path))
    p, m = r["plan"], r["per_iteration"]["iteration_ms"]["mean_over_ranks"]
    pred = p.get("predicted_iteration_seconds")
    print(f"| {r['label']} | {len(p['groups'])} | {pred * 1e3:.1f} | {m:.1f} | {m / (pred * 1e3):.2f} |"
          if pred else f"| {r['label']} | {len(p['groups'])} | - | {m:.1f} | - |")
PY
}

case $what in
  peers) peers ;;
  fusion) fusion ;;
  dense) dense ;;
  s1) s1 ;;
  s2) s2 ;;
  s3) s3 ;;
  all) s1; s2; s3; dense; fusion; peers ;;
esac
