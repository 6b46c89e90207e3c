#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# expect_exit.sh CODE REGEX -- COMMAND...: runs COMMAND and passes only if it exits with CODE and
# its combined output matches the extended regular expression REGEX (for exit-status tests of
# programs run under mpiexec, which ctest's WILL_FAIL cannot tell apart).
set -uo pipefail
code=$1
regex=$2
shift 3
output=$("$@" 2>&1)
rc=$?
printf '%s\n' "$output"
if [[ $rc != "$code" ]]; then
  echo "expect_exit: exit status $rc, expected $code" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" <<<"$output"; then
  echo "expect_exit: output does not match '$regex'" >&2
  exit 1
fi
exit 0
