#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reproduces docs/hybrid.md's communication figures (S2 Figs. 14-16): builds
# gradcomp_bench_hybrid_fc and runs it on the emulated cluster (scripts/emulated-cluster.sh;
# needs root) with 2 and 4 hosts at 1 Gbit/s, full-size VGG-16 FC layers, batches 1..128.
# Each run's Markdown goes to OUT/NAME.md, its progress to OUT/NAME.log, its JSON to
# OUT/NAME.json. About 4 minutes on a 2-core machine (run nothing else meanwhile: the timings
# are the point).
#
#   benchmark/run_hybrid_fc.sh [OUT_DIR] [CONFIG...]
#   CONFIG: emu2-1g emu4-1g local2 (default: emu2-1g emu4-1g), each run twice: VGG-16's FC1-FC3
#   (NAME.*) and the FC layers of gradcomp-train's CNN and VGG-style model (NAME-train.*),
#   whose data/model crossover falls inside batches 1..128
# Environment: BUILD_DIR (default: REPO/build), BIN (use this binary, do not build), SCALE
# (default 1: full VGG-16 sizes), REPS (default 3), EMU_PREFIX (gchy), EMU_SUBNET (10.78.0).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-hybrid-results}
shift || true
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=(emu2-1g emu4-1g)
build=${BUILD_DIR:-$repo/build}
prefix=${EMU_PREFIX:-gchy}
subnet=${EMU_SUBNET:-10.78.0}
scale=${SCALE:-1}
reps=${REPS:-3}

if [[ -n ${BIN:-} ]]; then
  bin=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
else
  [[ -f $build/CMakeCache.txt ]] || cmake --preset release >/dev/null || exit 1
  cmake --build "$build" --target gradcomp_bench_hybrid_fc || exit 1
  bin=$build/benchmark/gradcomp_bench_hybrid_fc
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# gradcomp-train's models: cnn fc1 3136 -> 512, fc2 512 -> 10; vgg fc1 1152 -> 256, fc2, fc3
train_layers=(--layer cnn.fc1:3136:512 --layer cnn.fc2:512:10 --layer vgg.fc1:1152:256
  --layer vgg.fc2:256:256 --layer vgg.fc3:256:10)

emu() { # emu NAME HOSTS RATE
  local name=$1 hosts=$2 rate=$3 set
  for set in vgg16 train; do
    local file=$name extra=()
    [[ $set == train ]] && file=$name-train extra=("${train_layers[@]}")
    "$repo/scripts/emulated-cluster.sh" run --prefix "$prefix" --subnet "$subnet" \
      --hosts "$hosts" --rate "$rate" --timeout 300 -- "$bin" --scale "$scale" --reps "$reps" \
      "${extra[@]}" --label "emulated cluster: $hosts hosts x 1 rank, $rate links ($set)" \
      --json "$out/$file.json" >"$out/$file.md" 2>"$out/$file.log"
    echo "$file: exit $?" >&2
  done
}

for c in "${configs[@]}"; do
  case $c in
    emu2-1g) emu "$c" 2 1gbit ;;
    emu4-1g) emu "$c" 4 1gbit ;;
    local2)
      timeout 900 mpiexec -n 2 "$bin" --scale "$scale" --reps "$reps" \
        --label "2 local ranks (shared memory)" --json "$out/$c.json" >"$out/$c.md" 2>"$out/$c.log"
      echo "$c: exit $?" >&2
      ;;
    *) echo "unknown configuration $c" >&2 ;;
  esac
done
