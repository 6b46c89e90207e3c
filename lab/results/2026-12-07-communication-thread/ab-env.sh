#!/usr/bin/env bash
# Alternated short runs of the main job's --method auto (../2026-12-07-training-cpu-ab/run.sh):
# A as is, B with the environment assignments given (VAR=VALUE ...). OUT/{A,B}{1..N}.{json,md}.
#   ab-env.sh OUT N VAR=VALUE...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output folder}; n=${2:?pairs}; shift 2
mkdir -p "$out"; out=$(cd "$out" && pwd)
for i in $(seq 1 "$n"); do
  for v in A B; do
    if [[ $v == A ]]; then env=(); else env=("$@"); fi
    env "${env[@]}" "$here/../2026-12-07-training-cpu-ab/run.sh" "$out/tmp" >/dev/null 2>"$out/$v$i.log"
    mv "$out/tmp/auto.json" "$out/$v$i.json"; mv "$out/tmp/auto.md" "$out/$v$i.md" 2>/dev/null || true
  done
done
rm -rf "$out/tmp"
