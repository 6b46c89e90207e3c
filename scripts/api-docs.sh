#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The API reference (Doxygen, docs/api/Doxyfile) of the public headers under include/gradcomp/
# (detail/ excluded), HTML into build/api-docs/html/. Fails on any Doxygen warning, so CI can
# run it as the check that every public entity is documented and every reference resolves; the
# warnings are printed (and left in build/api-docs/warnings.log).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v doxygen >/dev/null || { echo "api-docs.sh: doxygen not found (apt-get install doxygen)" >&2; exit 1; }
mkdir -p build/api-docs
rm -f build/api-docs/warnings.log
if ! doxygen docs/api/Doxyfile; then
  echo "api-docs.sh: Doxygen failed ($(doxygen --version)); warnings (build/api-docs/warnings.log):" >&2
  cat build/api-docs/warnings.log >&2 || true
  exit 1
fi
if [[ -s build/api-docs/warnings.log ]]; then
  echo "api-docs.sh: Doxygen warned (build/api-docs/warnings.log):" >&2
  cat build/api-docs/warnings.log >&2
  exit 1
fi
echo "API reference: $PWD/build/api-docs/html/index.html"
