#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reproduces docs/transport-benchmarks.md: builds gradcomp_bench_transports and runs it as plain
# local ranks (mpiexec -n 2, -n 4) and on the emulated cluster (scripts/emulated-cluster.sh;
# needs root) at 1 Gbit/s with 2 and 4 hosts and at 10 Gbit/s with 2 hosts. Each run's Markdown
# goes to OUT/NAME.md (stdout), its progress and the script's messages to OUT/NAME.log, its JSON
# to OUT/NAME.json. Exit status 124 of an emulated run with 3+ hosts usually means that the job
# hung in MPI_Finalize after writing its results (docs/emulated-cluster.md, "Known problems"):
# the .md file is then complete and ends with "(results flushed before MPI_Finalize)".
# The two-tier configurations emu2x2-1g and emu2x3-1g (2 hosts x 2 or 3 ranks, --ppn, 1 Gbit/s
# between hosts, shared memory inside a host) run the program's --two-tier mode: flat ring vs
# hierarchical allreduce (one group per host) vs MPICH, 1 KiB .. 64 MiB, with separately
# calibrated intra- and inter-host networks (docs/transport-benchmarks.md, "Two-tier cluster").
# They are not in the default list (which is the page's main data set, run D); name them.
#
#   benchmark/run_transport_benchmarks.sh [OUT_DIR] [CONFIG...]
#   CONFIG: local2 local4 emu2-1g emu4-1g emu2-10g (the default: these five)
#           emu2x2-1g emu2x3-1g (two-tier; only when named)
# Environment: BUILD_DIR (default: REPO/build-mpibench), BIN (use this binary, do not build),
# EMU_PREFIX (gctb), EMU_SUBNET (10.79.0).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-transport-results}
shift || true
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=(local2 local4 emu2-1g emu4-1g emu2-10g)
build=${BUILD_DIR:-$repo/build-mpibench}
prefix=${EMU_PREFIX:-gctb}
subnet=${EMU_SUBNET:-10.79.0}

if [[ -n ${BIN:-} ]]; then # a binary built elsewhere (skips the build)
  bin=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
else
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADCOMP_BUILD_TESTS=OFF \
    -DGRADCOMP_BUILD_EXAMPLES=OFF -DGRADCOMP_BUILD_APPS=OFF >/dev/null || exit 1
  cmake --build "$build" --target gradcomp_bench_transports || exit 1
  bin=$build/benchmark/gradcomp_bench_transports
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

emu() { # emu NAME HOSTS RATE GBIT TIMEOUT
  local name=$1 hosts=$2 rate=$3 gbit=$4 timeout=$5
  "$repo/scripts/emulated-cluster.sh" run --prefix "$prefix" --subnet "$subnet" --hosts "$hosts" \
    --rate "$rate" --timeout "$timeout" -- "$bin" --link-gbit "$gbit" \
    --label "emulated cluster: $hosts hosts x 1 rank, $rate links" --json "$out/$name.json" \
    >"$out/$name.md" 2>"$out/$name.log"
  echo "$name: exit $?" >&2
}

two_tier() { # two_tier NAME HOSTS PPN RATE GBIT TIMEOUT (--two-tier, one group per host)
  local name=$1 hosts=$2 ppn=$3 rate=$4 gbit=$5 timeout=$6
  "$repo/scripts/emulated-cluster.sh" run --prefix "$prefix" --subnet "$subnet" --hosts "$hosts" \
    --ppn "$ppn" --rate "$rate" --timeout "$timeout" -- "$bin" --two-tier --group-size "$ppn" \
    --link-gbit "$gbit" --label "emulated cluster: $hosts hosts x $ppn ranks, $rate links" \
    --json "$out/$name.json" >"$out/$name.md" 2>"$out/$name.log"
  echo "$name: exit $?" >&2
}

for c in "${configs[@]}"; do
  case $c in
    local2 | local4)
      n=${c#local}
      timeout 300 mpiexec -n "$n" "$bin" --label "$n local ranks (shared memory)" \
        --json "$out/$c.json" >"$out/$c.md" 2>"$out/$c.log"
      echo "$c: exit $?" >&2
      ;;
    emu2-1g) emu "$c" 2 1gbit 1 300 ;;
    emu4-1g) emu "$c" 4 1gbit 1 300 ;;
    emu2-10g) emu "$c" 2 10gbit 10 300 ;;
    emu2x2-1g) two_tier "$c" 2 2 1gbit 1 300 ;;
    emu2x3-1g) two_tier "$c" 2 3 1gbit 1 300 ;;
    *) echo "unknown configuration $c" >&2 ;;
  esac
done
