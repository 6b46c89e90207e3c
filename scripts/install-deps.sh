#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package gradcomp's build, tests, benchmarks and examples need.
# Idempotent and non-interactive: packages already present are skipped, so a second run
# does not touch the network. Run as root (or with sudo available).
#
#   scripts/install-deps.sh          # everything (core, MPI, LibTorch examples, data)
#   scripts/install-deps.sh --core   # only what the core library's tests need
set -euo pipefail

core_packages=(
  build-essential cmake ninja-build pkg-config
  catch2 libbenchmark-dev
  libxtensor-dev libcli11-dev nlohmann-json3-dev
  clang clang-14 libclang-rt-14-dev clang-format
  zlib1g-dev python3
)
full_packages=(
  mpich libmpich-dev
  libtorch-dev libblas-dev libopenblas0-pthread
  dataset-fashion-mnist iproute2
  python3-numpy python3-torch python3-pytest python3-matplotlib
  python3-dev pybind11-dev python3-pybind11
  python3-venv python3-pip python3-setuptools python3-wheel
  doxygen
)

packages=("${core_packages[@]}")
if [[ "${1:-}" != "--core" ]]; then
  packages+=("${full_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
