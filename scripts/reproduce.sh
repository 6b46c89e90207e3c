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
#   all    every experiment above
#
#   scripts/reproduce.sh [peers|s1|all] [--quick] [--local] [--out DIR]
#
# --quick: 12,000 training samples and 1 epoch per run (s1: about 9 minutes on 2 cores, peers
# about 6). Without it: all 60,000 samples, 2 epochs (s1: about 45 minutes, peers about 20).
# Writes DIR/<experiment>/ (default results/reproduce): every run's JSON and Markdown report and
# the experiment's table and plot.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

what=all
quick=0
local_only=0
out=results/reproduce
while [[ $# -gt 0 ]]; do
  case $1 in
    peers | s1 | all) what=$1; shift ;;
    --quick) quick=1; shift ;;
    --local) local_only=1; shift ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
epochs=2
limit=0
if [[ $quick == 1 ]]; then
  epochs=1
  limit=12000
fi

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
source scripts/lib/training-runs.sh
runs_bin=$repo/build/examples/gradcomp-train
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

peers() {
  local flags=(--epochs "$epochs" --train-limit "$limit" --out "$out/peers")
  [[ $local_only == 1 ]] && flags+=(--local)
  scripts/main-job.sh "${flags[@]}"
}

s1() {
  runs_common=(--epochs "$epochs" --seed 1 --train-limit "$limit" --evals-per-epoch 2)
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

case $what in
  peers) peers ;;
  s1) s1 ;;
  all) s1; peers ;;
esac
