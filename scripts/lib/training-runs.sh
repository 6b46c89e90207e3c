# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/main-job.sh, scripts/reproduce.sh and scripts/coded-benchmark.sh (source it;
# bash): one training run after
# the other on the emulated cluster (scripts/emulated-cluster.sh, 1 Gbit/s links; needs root and
# network namespaces) or, where that is impossible or --local was asked for, on plain local ranks.
#
#   training_runs_setup RANKS LOCAL OUT   probe the cluster; sets runs_mode, runs_local, runs_out,
#                                         runs_started (seconds since the epoch), runs_reports=()
#   run_gradcomp NAME LABEL ARGS...       gradcomp-train ARGS on every rank -> OUT/NAME.{json,md}
#   run_ddp NAME LABEL ARGS...            scripts/ddp_train.py ARGS (PyTorch DDP) -> the same
#   runs_epochs E run_gradcomp|run_ddp .. the run with --epochs E instead of runs_common's
#   runs_target TARGET EPOCHS DECAY       the target (a fraction or none) and the step decay's
#                                         epochs (or none) for every run: appends to
#                                         runs_common, sets compare_target=() and target_text
# Both append the report to runs_reports; a run that exits with an error after writing its
# report is kept (with a note), one without a report makes them return 1. Set runs_bin
# (gradcomp-train) and runs_common (options for every run of either program, e.g. --epochs 2
# --seed 1) before calling them; runs_only (space-separated run names, empty: every run) makes
# them skip the runs it does not name; runs_ppn (default 1) puts that many ranks on each
# emulated host (RANKS / runs_ppn hosts).

runs_subnet=10.78.0
runs_only=${runs_only:-}
runs_ppn=${runs_ppn:-1} # ranks per emulated host (2: a two-tier cluster, fast links inside a host)

# runs_wanted NAME: whether runs_only (empty: every run) names the run
runs_wanted() { [[ -z $runs_only || " $runs_only " == *" $1 "* ]]; }

# emulated_cluster_usable PREFIX SUBNET: whether an emulated cluster can be made here (root and
# network namespaces): creates a one-host cluster and removes it again
emulated_cluster_usable() {
  local ok=0
  if [[ $(id -u) != 0 ]] || ! scripts/emulated-cluster.sh up --hosts 1 --prefix "$1" \
    --subnet "$2" >/dev/null 2>&1; then
    ok=1
  fi
  scripts/emulated-cluster.sh down --prefix "$1" >/dev/null 2>&1 || true
  return $ok
}
runs_python=/usr/bin/python3 # Debian's PyTorch is installed for Debian's interpreter only

# runs_target TARGET EPOCHS DECAY: every run (both programs take the same options and stop at
# the first evaluation that reaches TARGET) trains to TARGET (none: all EPOCHS) with the rate
# x 0.1 from each epoch of DECAY (a comma list; none: constant)
runs_target() {
  local target=$1 epochs=$2 decay=$3
  target_text="every run trains $epochs epochs"
  compare_target=()
  if [[ $target != none ]]; then
    runs_common+=(--target-accuracy "$target")
    compare_target=(--target-accuracy "$target")
    target_text="each run until $(awk -v t="$target" 'BEGIN { printf "%.2f", 100 * t }') % test accuracy or $epochs epochs"
  fi
  if [[ $decay != none ]]; then
    runs_common+=(--lr-decay step --lr-decay-epochs "$decay")
  fi
}

training_runs_setup() {
  local ranks=$1 local_only=$2
  runs_ranks=$ranks
  runs_out=$3
  mkdir -p "$runs_out"
  runs_out=$(cd "$runs_out" && pwd)
  runs_started=$(date +%s)
  runs_reports=()
  runs_local=$local_only
  runs_mode="emulated cluster: $((ranks / runs_ppn)) hosts x $runs_ppn rank(s), 1 Gbit/s links between hosts (network namespaces + tc tbf)"
  if [[ $runs_local == 0 ]]; then
    if ! emulated_cluster_usable gcrunp "$runs_subnet"; then
      runs_local=1
      runs_mode="$ranks plain local ranks: NO emulated cluster (needs root and network namespaces)"
      echo "runs: cannot create network namespaces here; falling back to $ranks plain local" \
        "ranks (no 1 Gbit/s links: communication is cheaper than on the emulated cluster)" >&2
    fi
  else
    runs_mode="$ranks plain local ranks (--local)"
  fi
}

# runs_launch OUTPUT PROGRAM ARGS...: one process per rank (mpiexec: hydra starts the processes
# and sets PMI_RANK / PMI_SIZE, which ddp_train.py reads; it does not use MPI itself)
runs_launch() {
  local output=$1
  shift
  if [[ $runs_local == 1 ]]; then
    OMP_NUM_THREADS=1 mpiexec -n "$runs_ranks" "$@" >"$output"
  else
    OMP_NUM_THREADS=1 scripts/emulated-cluster.sh run --hosts $((runs_ranks / runs_ppn)) \
      --ppn "$runs_ppn" --rate 1gbit --prefix gcrun --subnet "$runs_subnet" --timeout 3600 \
      -- "$@" >"$output"
  fi
}

# runs_checked NAME LABEL COMMAND...: runs_launch COMMAND, tolerating a failed exit after the
# run wrote its report (MPICH's hydra can fail in MPI_Finalize on the emulated cluster after the
# program flushed everything: docs/transport-benchmarks.md, Caveats); fails if no report came.
runs_checked() {
  local name=$1 label=$2
  shift 2
  rm -f "$runs_out/$name.json"
  if ! runs_launch "$runs_out/$name.md" "$@"; then
    if [[ ! -s $runs_out/$name.json ]]; then
      echo "runs: $label failed without a report (see $runs_out/$name.md)" >&2
      return 1
    fi
    echo "runs: $label exited with an error after writing its report (kept)" >&2
  fi
  runs_reports+=("$runs_out/$name.json")
}

# runs_epochs EPOCHS COMMAND ARGS...: COMMAND ARGS (run_gradcomp or run_ddp) with --epochs EPOCHS
# in runs_common instead of its value there (runs_common must hold --epochs)
runs_epochs() {
  local epochs=$1 saved=("${runs_common[@]}") i rc=0
  shift
  for i in "${!runs_common[@]}"; do
    if [[ ${runs_common[i]} == --epochs ]]; then runs_common[i + 1]=$epochs; fi
  done
  "$@" || rc=$?
  runs_common=("${saved[@]}")
  return $rc
}

run_gradcomp() {
  local name=$1 label=$2
  shift 2
  runs_wanted "$name" || return 0
  echo "runs: $label" >&2
  runs_checked "$name" "$label" "$runs_bin" "${runs_common[@]}" --label "$label" \
    --report "$runs_out/$name.json" "$@"
}

run_ddp() {
  local name=$1 label=$2
  shift 2
  runs_wanted "$name" || return 0
  echo "runs: $label" >&2
  local where=(--master-addr 127.0.0.1 --iface lo)
  if [[ $runs_local == 0 ]]; then
    where=(--master-addr "$runs_subnet.1" --iface eth0) # rank 0 runs on host 1
  fi
  runs_checked "$name" "$label" "$runs_python" scripts/ddp_train.py "${runs_common[@]}" \
    --label "$label" --report "$runs_out/$name.json" "${where[@]}" "$@"
}
