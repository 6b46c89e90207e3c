#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the code shown in the docs is the code that compiles and runs in the tests.

    scripts/check-doc-snippets.py [ROOT]

A fenced code block in README.md or docs/*.md that follows a line

    <!-- snippet: examples/03_mpi_vector/main.cpp -->

(a path relative to the repository root) must appear in that file: its lines, each compared
without leading and trailing blanks, form a contiguous run of the file's lines, except that a
block line `// ...` (`# ...` in Python) stands for any number of skipped lines. Exits 1 naming the doc, the block's
line and the first line not found; 0 when every marked block matches (and prints the count).
Blocks without a marker are not checked: mark every block that shows library code in use.
Standard library only.
"""
import glob
import os
import re
import sys

MARKER = re.compile(r"^<!--\s*snippet:\s*(\S+)\s*-->\s*$")
ELISION = ("// ...", "# ...")  # C++ and Python blocks


def blocks(doc_path):
    """(marker line number, source path, block line number, block lines) per marked block."""
    with open(doc_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j == len(lines) or not lines[j].startswith("```"):
            yield i + 1, m.group(1), None, None
            i = j
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        yield i + 1, m.group(1), j + 1, lines[j + 1:k]
        i = k + 1


def find(block, source):
    """None if the block matches the source, else the first block line not found in order."""
    want = [line.strip() for line in block]
    have = [line.strip() for line in source]
    # split at the elisions: each piece must be a contiguous run, pieces in order
    pieces, piece = [], []
    for line in want:
        if line in ELISION:
            pieces.append(piece)
            piece = []
        else:
            piece.append(line)
    pieces.append(piece)
    pieces = [p for p in pieces if p]
    start = 0
    first = True
    for piece in pieces:
        found = -1
        for s in range(start, len(have) - len(piece) + 1):
            if have[s:s + len(piece)] == piece:
                found = s
                break
        if found < 0:
            # report the longest prefix of the piece that does exist, to name the culprit
            for n in range(len(piece), 0, -1):
                if any(have[s:s + n] == piece[:n] for s in range(start, len(have) - n + 1)):
                    return piece[n] if n < len(piece) else piece[0]
            return piece[0]
        start = found + len(piece)
        first = False
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    docs = [d for d in [os.path.join(root, "README.md")] if os.path.isfile(d)]
    docs += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    checked, failures = 0, []
    for doc in docs:
        name = os.path.relpath(doc, root)
        for marker_line, path, block_line, block in blocks(doc):
            if block is None:
                failures.append(f"{name}:{marker_line}: snippet marker for {path} is not followed "
                                "by a fenced code block")
                continue
            source_path = os.path.join(root, path)
            if not os.path.isfile(source_path):
                failures.append(f"{name}:{marker_line}: snippet source {path} does not exist")
                continue
            with open(source_path, encoding="utf-8") as f:
                source = f.read().split("\n")
            missing = find(block, source)
            checked += 1
            if missing is not None:
                failures.append(f"{name}:{block_line}: the block differs from {path}: "
                                f"'{missing}' is not where the block has it")
    if checked == 0:
        failures.append("no snippet found: the markers (<!-- snippet: PATH -->) are missing")
    for f in failures:
        print(f, file=sys.stderr)
    if failures:
        return 1
    print(f"check-doc-snippets: {checked} snippets match their sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
