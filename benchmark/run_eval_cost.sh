#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a test-set evaluation costs gradcomp-train against the forward passes it makes: P ranks
# on this machine (default 4) train the CNN for --train-limit samples (default 8000) with
# --evals-per-epoch E (default 4) and --transport none, then the report's numbers give, per
# evaluation, its wall time (rank 0's, forward passes + allreduce) and the forward time of the
# same images at training speed (the mean training forward per iteration / the batch per rank
# x the images each rank evaluates), their ratio, and the run's wall time against its
# training time. A benchmark, not a test: nothing fails on the numbers.
#
#   benchmark/run_eval_cost.sh [BUILD_DIR] [-- gradcomp-train options...]
#
# Needs gradcomp-train (BUILD_DIR/bin/gradcomp-train, default build/), mpiexec and the
# Fashion-MNIST data (Debian's dataset-fashion-mnist).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
if [[ $# -gt 0 && "$1" != "--" ]]; then
  build=$1
  shift
fi
[[ "${1:-}" == "--" ]] && shift
ranks=${GRADCOMP_EVAL_RANKS:-4}
train="$build/bin/gradcomp-train"
[[ -x "$train" ]] || { echo "run_eval_cost.sh: $train not built" >&2; exit 1; }
out=$(mktemp -d "${TMPDIR:-/tmp}/gradcomp-eval-cost.XXXXXX")
trap 'rm -rf "$out"' EXIT
start=$SECONDS
mpiexec -n "$ranks" "$train" --method dense --transport none --epochs 1 --train-limit 8000 \
  --evals-per-epoch 4 --report "$out/report.json" "$@" >"$out/log" 2>&1 ||
  { cat "$out/log" >&2; exit 1; }
process_seconds=$((SECONDS - start))
/usr/bin/env python3 - "$out/report.json" "$ranks" "$process_seconds" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
ranks, process_seconds = int(sys.argv[2]), int(sys.argv[3])
cfg = report["config"]
test_images = cfg["test_samples"]
per_rank = test_images / ranks
batch = cfg["batch_size_per_rank"]
forward_ms = report["per_iteration"]["forward_ms"]["mean_over_ranks"]
forward_at_training_speed = per_rank * forward_ms / 1000 / batch
evals = [p["eval_seconds"] for p in report["curve"]]
print(f"ranks {ranks}, {per_rank:.0f} test images per rank, training batch {batch} per rank")
print(f"training forward: {forward_ms:.2f} ms per iteration "
      f"-> {forward_at_training_speed:.2f} s for {per_rank:.0f} images")
for i, s in enumerate(evals):
    print(f"evaluation {i}: {s:.2f} s = {s / forward_at_training_speed:.2f}x the forward passes")
mean = sum(evals[1:]) / max(1, len(evals) - 1)  # the first also warms up
print(f"mean after the first: {mean:.2f} s = {mean / forward_at_training_speed:.2f}x")
print(f"training {report['train_seconds']:.1f} s, evaluations {sum(evals):.1f} s, "
      f"gradcomp-train's wall time {report['wall_seconds']:.1f} s "
      f"({report['wall_seconds'] / report['train_seconds']:.2f}x training), "
      f"the whole process with start-up {process_seconds} s")
PY
