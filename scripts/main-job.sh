#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's main job: installs the dependencies, builds gradcomp-demo, prepares
# Fashion-MNIST and runs the compressor demo on real CNN gradients (docs/demo.md). Prints the
# results table on stdout and writes build/demo-report.json. Extra arguments go to the demo
# (e.g. --iterations 100).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --target gradcomp-demo -j "$(nproc)"
scripts/prepare-fashion-mnist.sh build/data/fashion-mnist
build/examples/gradcomp-demo --data build/data/fashion-mnist --report build/demo-report.json "$@"
