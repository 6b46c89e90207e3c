#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CSSGD's coded exchange in training (docs/coded.md, "Training with coded exchange"):
# runs gradcomp-train on the emulated cluster (scripts/emulated-cluster.sh; n hosts x 1 rank,
# 1 Gbit/s links; needs root: without it, n plain local ranks, and it says so) for every n and,
# per n, --transport coded with every redundancy r = 1..n-1, plus the uncoded baselines, all
# with the same --method on the same short configuration: --transport ring and --transport
# allreduce for a dense method, --transport allgather (the sparse allgather) and --transport
# ring for a top-k method. Writes each run's JSON report (and its markdown table) to the output
# folder and prints a table of per-iteration time, compute, communication and bytes per rank
# (table.md there).
#
#   scripts/coded-benchmark.sh [--ranks "3 4 5"] [--redundancy "R..."] [--no-baselines]
#                              [--method M] [--density D] [--merge S] [--with-uncoded]
#                              [--train-limit N] [--epochs E] [--coding fixed_point|xor]
#                              [--coded-schedule concurrent|serialized] [--local] [--no-build]
#                              [--out DIR] [-- EXTRA gradcomp-train OPTIONS for every run]
#
# Defaults: --ranks "3 4 5", every r = 1..n-1 (--redundancy restricts it to the listed values
# below n), --method dense, --density 0.01 (top-k methods), --merge size_threshold,
# --train-limit 6000, --epochs 1, one evaluation per epoch, fixed_point, concurrent, out
# results/coded-benchmark. --with-uncoded adds, for every r, the uncoded baseline of the same
# placement (--uncoded). --no-build skips building gradcomp-train (build/ must hold it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

ranks_list="3 4 5"
redundancy_list=""
method=dense
density=0.01
merge=size_threshold
with_uncoded=0
baselines=1
train_limit=6000
epochs=1
coding=fixed_point
schedule=concurrent
local_only=0
build=1
out=results/coded-benchmark
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --ranks) ranks_list=${2:?}; shift 2 ;;
    --redundancy) redundancy_list=${2:?}; shift 2 ;;
    --no-baselines) baselines=0; shift ;;
    --method) method=${2:?}; shift 2 ;;
    --density) density=${2:?}; shift 2 ;;
    --merge) merge=${2:?}; shift 2 ;;
    --train-limit) train_limit=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --coding) coding=${2:?}; shift 2 ;;
    --coded-schedule) schedule=${2:?}; shift 2 ;;
    --local) local_only=1; shift ;;
    --no-build) build=0; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    --with-uncoded) with_uncoded=1; shift ;;
    -h | --help) sed -n '3,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "coded-benchmark: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in $ranks_list; do
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2)); then
    echo "coded-benchmark: --ranks: '$n' is not a rank count >= 2" >&2
    exit 2
  fi
done
for r in $redundancy_list; do
  if ! [[ $r =~ ^[0-9]+$ ]] || ((r < 1)); then
    echo "coded-benchmark: --redundancy: '$r' is not a redundancy >= 1" >&2
    exit 2
  fi
done

if [[ $build == 1 ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target gradcomp-train -j "$(nproc)"
fi
bin=$repo/build/bin/gradcomp-train
[[ -x $bin ]] || { echo "coded-benchmark: $bin missing (build it or drop --no-build)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The emulated cluster needs root and network namespaces; try to create (and remove) one.
source scripts/lib/training-runs.sh
mode="emulated cluster: n hosts x 1 rank, 1 Gbit/s links (network namespaces + tc tbf)"
if [[ $local_only == 0 ]]; then
  if ! emulated_cluster_usable gccbp 10.79.0; then
    local_only=1
    mode="n plain local ranks: NO emulated cluster (needs root and network namespaces)"
    echo "coded-benchmark: cannot create network namespaces here; falling back to plain local" \
      "ranks (no 1 Gbit/s links: communication is cheaper than on the emulated cluster)" >&2
  fi
else
  mode="n plain local ranks (--local)"
fi
echo "coded-benchmark: $mode; ranks $ranks_list; --train-limit $train_limit, $epochs epoch(s);" \
  "results in $out" >&2

reports=()
run() { # run RANKS NAME LABEL ARGS...
  local n=$1 name=$2 label=$3
  shift 3
  local args=(--method "$method" --density "$density" --merge "$merge" --epochs "$epochs"
    --train-limit "$train_limit" --evals-per-epoch 1 --seed 1 --label "$label"
    --report "$out/$name.json" "$@" "${extra[@]}")
  echo "coded-benchmark: n = $n: $label" >&2
  if [[ $local_only == 1 ]]; then
    OMP_NUM_THREADS=1 mpiexec -n "$n" "$bin" "${args[@]}" >"$out/$name.md"
  else
    OMP_NUM_THREADS=1 scripts/emulated-cluster.sh run --hosts "$n" --rate 1gbit \
      --prefix gccb --subnet 10.79.0 --timeout 1800 -- "$bin" "${args[@]}" >"$out/$name.md"
  fi
  reports+=("$out/$name.json")
}

for n in $ranks_list; do
  if [[ $baselines == 1 ]]; then
    if [[ $method == dense || $method == fp16 ]]; then
      run "$n" "n$n-ring" "ring allreduce" --transport ring
      run "$n" "n$n-allreduce" "MPI allreduce" --transport allreduce
    else
      run "$n" "n$n-allgather" "sparse allgather" --transport allgather
      run "$n" "n$n-ring" "ring allreduce" --transport ring
    fi
  fi
  for ((r = 1; r < n; ++r)); do
    if [[ -n $redundancy_list && " $redundancy_list " != *" $r "* ]]; then
      continue
    fi
    run "$n" "n$n-coded-r$r" "coded r = $r" --transport coded --redundancy "$r" \
      --coding "$coding" --coded-schedule "$schedule"
    if [[ $with_uncoded == 1 ]]; then
      run "$n" "n$n-uncoded-r$r" "uncoded r = $r" --transport coded --redundancy "$r" \
        --coding "$coding" --coded-schedule "$schedule" --uncoded
    fi
  done
done
((${#reports[@]} > 0)) || { echo "coded-benchmark: no run selected" >&2; exit 2; }

# The table: one row per run, means over ranks and iterations (gradcomp-train's report).
python3 - "$out/table.md" "$mode" "${reports[@]}" <<'EOF'
import json
import sys

table_path, mode, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for path in paths:
    with open(path) as f:
        r = json.load(f)
    c = r["config"]
    it = r["per_iteration"]

    def mean(key):
        return it[key]["mean_over_ranks"]

    coded = c["transport"] == "coded"
    rows.append((
        c["ranks"],
        ("uncoded" if c.get("uncoded") else "coded") if coded else c["transport"],
        str(c["redundancy"]) if coded else "-",
        c.get("coding", "-") if coded else "-",
        f'{mean("iteration_ms"):.1f}',
        f'{mean("forward_ms") + mean("backward_ms"):.1f}',
        f'{mean("communication_thread_busy_ms"):.1f}',
        f'{mean("exchange_wait_ms"):.1f}',
        f'{mean("bytes_sent"):.0f}',
        f'{mean("bytes_received"):.0f}',
        f'{100 * r["final_test_accuracy"]:.2f} %',
        "yes" if r["replicas_identical"] else "NO",
    ))
first = json.load(open(paths[0]))["config"]
header = ("| n | transport | r | coding | iteration (ms) | compute (ms) | communication (ms) "
          "| not overlapped (ms) | bytes sent / rank | bytes received / rank | test accuracy "
          "| replicas identical |\n" + "|---" * 12 + "|\n")
text = (f"### coded exchange in training: {mode}\n\n"
        f"gradcomp-train --method {first['method']}"
        + (f" (density {first['density']})" if first['method'] not in ('dense', 'fp16') else "")
        + f", --merge {first['merge']}, model {first['model']}, batch {first['batch_size_per_rank']}"
        f" per rank, {first['train_samples']} training samples, {first['epochs']} epoch(s), "
        f"{first['parameters']} parameters; per-iteration means over ranks. compute = forward + "
        "backward (coded: over the rank's C(n-1, r-1) parts); communication = the pipeline's "
        "communication thread busy; not overlapped = the part backward did not hide (coded: the "
        "last part's backward overlaps the exchange).\n\n")
text += header + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in rows)
with open(table_path, "w") as f:
    f.write(text)
print(text, end="")
EOF
