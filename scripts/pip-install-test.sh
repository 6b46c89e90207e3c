#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package as pip installs it (pyproject.toml, setup.py): a fresh virtual environment
# of Debian's interpreter that sees Debian's numpy, torch and pytest (--system-site-packages),
# `pip install --no-build-isolation --no-index .` of this repository (nothing downloaded;
# gradcomp._core compiled for the venv's interpreter), `python -m gradcomp.info`, then
# test/python under pytest with GRADCOMP_TEST_INSTALLED=1: the tests import the installed
# gradcomp (never the repository's python/ nor a build tree: they check) and run from a
# temporary directory. Prints each step's wall time; exits non-zero when a step fails.
#
#   scripts/pip-install-test.sh [--keep] [PYTEST_ARGS...]
#
# --keep: leave the temporary directory (the venv in DIR/venv) and say where it is.
# PYTEST_ARGS: more pytest arguments, e.g. -k info (the whole directory takes a few minutes).
# Needs python3-venv, python3-pip, python3-setuptools, python3-wheel, python3-pybind11,
# pybind11-dev, python3-dev, python3-numpy, python3-torch, python3-pytest
# (scripts/install-deps.sh). setuptools' temporaries go to the temporary directory too
# (GRADCOMP_SETUPTOOLS_BUILD_BASE): nothing is written into the repository.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=/usr/bin/python3
keep=0
pytest_args=()
while (($#)); do
  case $1 in
    --keep) keep=1; shift ;;
    -h|--help) sed -n '3,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pytest_args+=("$1"); shift ;;
  esac
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/gradcomp-pip-test.XXXXXX")
cleanup() {
  if ((keep)); then
    echo "pip-install-test: kept $dir (venv: $dir/venv)"
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT

# nothing from the environment may point the tests at another gradcomp
unset PYTHONPATH GRADCOMP_PYTHON_PACKAGE_DIR
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

timings=()
step() { # step NAME COMMAND...: runs COMMAND, records its wall time, stops the script on failure
  local name=$1; shift
  echo "== pip-install-test: $name"
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$@" || rc=$?
  t1=$(date +%s.%N)
  local took
  took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  timings+=("$(printf '%-28s %8s s' "$name" "$took")")
  echo "== pip-install-test: $name: ${took} s (exit $rc)"
  if ((rc != 0)); then
    echo "pip-install-test: FAILED: $name (exit $rc)" >&2
    exit "$rc"
  fi
}

venv="$dir/venv"
work="$dir/run" # the tests' working directory: nothing in it is importable
mkdir -p "$work"

step "venv" "$python" -m venv --system-site-packages "$venv"
step "pip install" env -C "$root" GRADCOMP_SETUPTOOLS_BUILD_BASE="$dir/setuptools-build" \
  "$venv/bin/pip" install --quiet --no-build-isolation --no-index .
step "python -m gradcomp.info" env -C "$work" "$venv/bin/python" -m gradcomp.info
step "pytest test/python" env -C "$work" GRADCOMP_TEST_INSTALLED=1 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$root/test/python" \
  "$root/test/python" "${pytest_args[@]}"

echo "== pip-install-test: passed; wall times:"
printf '  %s\n' "${timings[@]}"
