#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's main job (docs/results.md): installs what is missing, builds gradcomp-train,
# creates the emulated 4-host cluster at 1 Gbit/s (scripts/emulated-cluster.sh; needs root: without
# it, 4 plain local ranks, and it says so) and trains ddp-baseline.md's CNN on Fashion-MNIST
# three times with the same seed and epochs:
#   dense:      --method dense --transport allreduce (MPI_Iallreduce, 25 MiB buckets, as DDP)
#   compressed: --method reused_threshold --density 0.01 --transport allgather --merge optimal
#   floor:      --transport none (every rank trains alone: no communication at all)
# then prints them side by side with PyTorch DDP's figures (speedup, accuracy difference, time to
# DDP's accuracy) and writes results/main-job/{comparison.md,accuracy-vs-time.svg,*.json}.
#
#   scripts/main-job.sh [--epochs E] [--ranks P] [--local] [--no-floor] [--out DIR]
#                       [-- EXTRA gradcomp-train OPTIONS for every run]
# Takes about 8 minutes on a 2-core machine with the default 3 epochs (build excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

epochs=3
ranks=4
local_only=0
floor=1
out=results/main-job
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --epochs) epochs=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --no-floor) floor=0; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "main-job: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gradcomp-train -j "$(nproc)"
bin=$repo/build/examples/gradcomp-train
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The emulated cluster needs root and network namespaces; try to create (and remove) one.
mode="emulated cluster: $ranks hosts x 1 rank, 1 Gbit/s links (network namespaces + tc tbf)"
if [[ $local_only == 0 ]]; then
  if [[ $(id -u) != 0 ]] || ! scripts/emulated-cluster.sh up --hosts 1 --prefix gcmjp \
    --subnet 10.78.0 >/dev/null 2>&1; then
    local_only=1
    mode="$ranks plain local ranks: NO emulated cluster (needs root and network namespaces)"
    echo "main-job: cannot create network namespaces here; falling back to $ranks plain local" \
      "ranks (no 1 Gbit/s links: communication is cheaper than on the emulated cluster)" >&2
  fi
  scripts/emulated-cluster.sh down --prefix gcmjp >/dev/null 2>&1 || true
else
  mode="$ranks plain local ranks (--local)"
fi
echo "main-job: $mode; $epochs epochs per run; results in $out" >&2

run() { # run NAME LABEL ARGS...
  local name=$1 label=$2
  shift 2
  local args=(--epochs "$epochs" --seed 1 --label "$label" --report "$out/$name.json" "$@"
    "${extra[@]}")
  echo "main-job: $label" >&2
  if [[ $local_only == 1 ]]; then
    OMP_NUM_THREADS=1 mpiexec -n "$ranks" "$bin" "${args[@]}" >"$out/$name.md"
  else
    OMP_NUM_THREADS=1 scripts/emulated-cluster.sh run --hosts "$ranks" --rate 1gbit \
      --prefix gcmj --subnet 10.78.0 --timeout 1800 -- "$bin" "${args[@]}" >"$out/$name.md"
  fi
}

run dense "dense, MPI allreduce" --method dense --transport allreduce --merge size_threshold
run compressed "reused_threshold 1%, allgather, optimal merge" --method reused_threshold \
  --density 0.01 --transport allgather --merge optimal
reports=("$out/dense.json" "$out/compressed.json")
if [[ $floor == 1 ]]; then
  run floor "no communication (floor)" --method dense --transport none --merge single
  reports+=("$out/floor.json")
fi
python3 scripts/compare-runs.py --out "$out" --title "### gradcomp main job: $mode" "${reports[@]}"
