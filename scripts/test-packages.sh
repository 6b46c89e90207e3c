#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages as a user installs them: `cpack -G DEB` and `cpack -G TGZ` in a configured,
# built tree, then `apt-get install ./gradcomp-dev_<version>_all.deb ./gradcomp-tools_...deb`,
# a consumer (test/package/consumer) built against the installed package with CMake
# (find_package(gradcomp), no prefix given) and main.cpp compiled with
# `pkg-config --cflags --libs gradcomp`; the installed tools answer --help; the packages are
# purged at the end (also on failure). Installing needs root (or sudo): without either the
# install steps are skipped with a message and only the packages are built and listed.
#
#   scripts/test-packages.sh [BUILD_DIR]     # default: build (the release preset's tree)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")

cd "$build"
rm -f gradcomp-*.deb gradcomp-*.tar.gz
cpack -G DEB >/dev/null
cpack -G TGZ >/dev/null
dev_deb="gradcomp-dev_${version}_all.deb"
test -f "$dev_deb" || { echo "test-packages: $dev_deb was not made" >&2; exit 1; }
tools_deb=$(ls gradcomp-tools_"${version}"_*.deb 2>/dev/null || true)
echo "test-packages: made $dev_deb ${tools_deb} gradcomp-${version}-Linux.tar.gz"
dev_files=$(dpkg-deb --contents "$dev_deb")
for f in usr/share/cmake/gradcomp/gradcompConfig.cmake usr/share/pkgconfig/gradcomp.pc \
         usr/include/gradcomp/gradcomp.hpp usr/share/doc/gradcomp/LICENSE; do
  grep -q "\./$f\$" <<<"$dev_files" || { echo "test-packages: $dev_deb lacks /$f" >&2; exit 1; }
done
tgz_files=$(tar -tzf "gradcomp-${version}-Linux.tar.gz")
grep -q "share/cmake/gradcomp/gradcompConfig.cmake$" <<<"$tgz_files" ||
  { echo "test-packages: the tarball lacks the CMake package" >&2; exit 1; }

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if ! sudo -n true 2>/dev/null; then
    echo "test-packages: not root and no sudo: the packages are not installed here"
    exit 0
  fi
  sudo_cmd=(sudo -n)
fi
if dpkg-query -W -f='${Status}' gradcomp-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "test-packages: gradcomp-dev is already installed on this machine: not touching it" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gradcomp-deb-test.XXXXXX")
cleanup() {
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq gradcomp-dev \
    gradcomp-tools >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
debs=("./$dev_deb")
if [[ -n "$tools_deb" ]]; then
  debs+=("./$tools_deb")
fi
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${debs[@]}" >/dev/null
echo "test-packages: installed ${debs[*]}"

# CMake: the consumer finds the package in /usr with no hint
cmake -S "$root/test/package/consumer" -B "$work/cmake" -DCONSUMER_MODE=find_package \
  >"$work/configure.log"
grep -q "consumer: gradcomp ${version}: core TRUE" "$work/configure.log"
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer"
if [[ -x "$work/cmake/consumer_blas" ]]; then
  "$work/cmake/consumer_blas"
fi
if [[ -x "$work/cmake/consumer_mpi" ]] && command -v mpiexec >/dev/null; then
  mpiexec -n 2 "$work/cmake/consumer_mpi"
fi
# pkg-config: a Makefile user's compile line
flags=$(pkg-config --cflags --libs gradcomp)
test "$(pkg-config --modversion gradcomp)" = "$version"
# shellcheck disable=SC2086 # the flags are words
c++ "$root/test/package/consumer/main.cpp" -o "$work/consumer_pc" $flags
"$work/consumer_pc"
# the tools, from the PATH
if [[ -n "$tools_deb" ]]; then
  tools_files=$(dpkg-deb --contents "$tools_deb")
  for tool in $(sed -n 's|.*\./usr/bin/\(gradcomp-[a-z-]*\)$|\1|p' <<<"$tools_files"); do
    "$tool" --help >/dev/null
    echo "test-packages: $tool --help ok"
  done
fi
echo "test-packages: ok"
