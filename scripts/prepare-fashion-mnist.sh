#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Decompresses Fashion-MNIST's gzip-compressed IDX files (Debian package dataset-fashion-mnist)
# into a folder where LibTorch's MNIST reader (gradcomp-demo --data DIR) can read them.
# Idempotent: files already decompressed are kept.
#
#   scripts/prepare-fashion-mnist.sh [DEST]   # DEST defaults to build/data/fashion-mnist
#   FASHION_MNIST_SRC=DIR scripts/prepare-fashion-mnist.sh   # another folder of .gz files
set -euo pipefail
cd "$(dirname "$0")/.."

src="${FASHION_MNIST_SRC:-/usr/share/datasets/fashion-mnist}"
dest="${1:-build/data/fashion-mnist}"
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte
       t10k-labels-idx1-ubyte)

mkdir -p "$dest"
for f in "${files[@]}"; do
  if [[ -s "$dest/$f" ]]; then
    continue
  fi
  if [[ ! -f "$src/$f.gz" ]]; then
    echo "prepare-fashion-mnist: $src/$f.gz not found (install dataset-fashion-mnist:" \
         "scripts/install-deps.sh)" >&2
    exit 1
  fi
  gunzip -c "$src/$f.gz" >"$dest/$f.tmp"
  mv "$dest/$f.tmp" "$dest/$f"
done
echo "prepare-fashion-mnist: IDX files in $dest"
