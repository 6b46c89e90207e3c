#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that test/ mirrors include/: every public header has a test file named after it.

    scripts/check-test-mirror.py [--root DIR] [--report]

A public header is a .hpp or .cuh file under DIR/include/gradcomp/ outside any detail/ folder.
The header include/gradcomp/<folder>/<name>.hpp is tested by test/<folder>/<name>_test.cpp (or
_test.cu, or _test.py); a header directly in include/gradcomp/, <name>.hpp, by test/<name>_test.cpp
(or .cu, .py). Prints `include/gradcomp/...: no test named test/..._test.cpp` for each header
without one, then `test mirror: N of M public headers have a test named after them`. Exits 1 if a
header has no test, unless --report is given (then 0). DIR: the repository (this script's parent
folder's parent) unless --root. Standard library only. ctest runs it on the repository, and on
test/layering/bad (two headers, no test: it must fail), as the `test mirror: ...` tests.
"""
import argparse
import os
import sys

HEADER_SUFFIXES = (".hpp", ".cuh")
TEST_SUFFIXES = (".cpp", ".cu", ".py")


def public_headers(root):
    """Paths of the public headers, relative to root/include/gradcomp/, sorted."""
    base = os.path.join(root, "include", "gradcomp")
    found = []
    for folder, subfolders, files in os.walk(base):
        subfolders[:] = sorted(d for d in subfolders if d != "detail")
        rel_folder = os.path.relpath(folder, base)
        for name in files:
            if name.endswith(HEADER_SUFFIXES):
                rel = name if rel_folder == "." else os.path.join(rel_folder, name)
                found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def expected_tests(rel_header):
    """The test paths (relative to the root) that count for a header, the .cpp one first."""
    stem = os.path.splitext(rel_header)[0]
    return ["test/" + stem + "_test" + suffix for suffix in TEST_SUFFIXES]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here),
                        help="the repository to check (default: this script's repository)")
    parser.add_argument("--report", action="store_true",
                        help="print the missing tests and the summary, but always exit 0")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.root, "include", "gradcomp")):
        print(f"{args.root}: no include/gradcomp/ folder", file=sys.stderr)
        return 2
    headers = public_headers(args.root)
    missing = 0
    for rel in headers:
        candidates = expected_tests(rel)
        if not any(os.path.isfile(os.path.join(args.root, c)) for c in candidates):
            missing += 1
            print(f"include/gradcomp/{rel}: no test named {candidates[0]}")
    print(f"test mirror: {len(headers) - missing} of {len(headers)} public headers have a test "
          "named after them")
    return 0 if args.report or missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
