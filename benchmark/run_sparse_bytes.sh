#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reproduces docs/sparse-allreduce.md's bytes table: builds gradcomp_bench_sparse_bytes and
# runs it on 2..8 local ranks (bytes do not depend on the network, so no emulated cluster), one
# ResNet-50-sized-by-default message per iteration, then plots bytes per rank against P, the
# counted points beside the cost models extended to 1024 ranks. Each run's Markdown goes to
# OUT/pP.md, its JSON to OUT/pP.json; the plot to OUT/sparse-bytes.svg.
#
#   benchmark/run_sparse_bytes.sh [OUT_DIR] [RANKS...]   (default ranks: 2 3 4 5 6 7 8)
# Environment: BUILD_DIR (default: REPO/build), ELEMENTS (default 4000000), DENSITY (0.01),
# ITERATIONS (32), CORRELATION (0.5).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-sparse-bytes-results}
shift || true
ranks=("$@")
[[ ${#ranks[@]} -gt 0 ]] || ranks=(2 3 4 5 6 7 8)
build=${BUILD_DIR:-$repo/build}
[[ -f $build/CMakeCache.txt ]] || cmake --preset release >/dev/null || exit 1
cmake --build "$build" --target gradcomp_bench_sparse_bytes || exit 1
mkdir -p "$out"
for p in "${ranks[@]}"; do
  echo "== $p ranks"
  mpiexec -n "$p" "$build/benchmark/gradcomp_bench_sparse_bytes" --elements "${ELEMENTS:-4000000}" \
    --density "${DENSITY:-0.01}" --iterations "${ITERATIONS:-32}" \
    --correlation "${CORRELATION:-0.5}" --json "$out/p$p.json" | tee "$out/p$p.md" || exit 1
done
# Debian's matplotlib is installed for Debian's interpreter
/usr/bin/python3 "$repo/scripts/plot-sparse-bytes.py" "$out/sparse-bytes.svg" "$out"/p*.json
