#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the code shown in the docs is the code that compiles and runs in the tests.

    scripts/check-doc-snippets.py [ROOT]

Every fenced C++ or Python block (```cpp, ```c++, ```cxx, ```cuda, ```python, ```py) in
README.md and docs/*.md must follow a line

    <!-- snippet: examples/03_mpi_vector/main.cpp -->

(a path relative to the repository root; blank lines may stand between the marker and the
block, and both may be indented, as inside a list item), and the block must appear in that
file, an example or test that ctest compiles or runs: its lines, each compared without leading
and trailing blanks, form a contiguous run of the file's lines, except that a block line
`// ...` (`# ...` in Python) stands for any number of skipped lines. A block of another
language may carry a marker too and is then checked the same way. Code that is not meant to
run (a signature listing, pseudo-code, program output) goes in a ```text block or in prose.
Exits 1 naming the doc and line of each unmarked C++ / Python block, and of each marked block
with the first line not found in its source; 0 when every block passes (and prints the count).
Standard library only.
"""
import glob
import os
import re
import sys

MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(\S+)\s*-->\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")
ELISION = ("// ...", "# ...")  # C++ and Python blocks
# the info strings of the blocks that must be marked (compared in lower case)
CODE_LANGUAGES = {"cpp", "c++", "cxx", "cuda", "python", "py", "python3"}


def blocks(doc_path):
    """(block line number, language, marker line number or None, source path or None, block
    lines) per fenced block of the doc; a marker that no block follows gives (None, None,
    marker line, path, None)."""
    with open(doc_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    marker = None  # (line number, path) of a marker waiting for its block
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            if marker is not None:
                yield None, None, marker[0], marker[1], None
            marker = (i + 1, m.group(1))
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if lines[i].strip() and marker is not None:  # text between marker and block
                yield None, None, marker[0], marker[1], None
                marker = None
            i += 1
            continue
        # the block runs to the next fence of the same character, at least as long
        ticks = fence.group(1)
        k = i + 1
        while k < len(lines):
            close = re.match(r"^\s*(`{3,}|~{3,})\s*$", lines[k])
            if close and close.group(1)[0] == ticks[0] and len(close.group(1)) >= len(ticks):
                break
            k += 1
        language = fence.group(2).lower()
        if marker is not None:
            yield i + 1, language, marker[0], marker[1], lines[i + 1:k]
        else:
            yield i + 1, language, None, None, lines[i + 1:k]
        marker = None
        i = k + 1
    if marker is not None:
        yield None, None, marker[0], marker[1], None


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
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    docs = [d for d in [os.path.join(root, "README.md")] if os.path.isfile(d)]
    docs += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    checked, failures = 0, []
    for doc in docs:
        name = os.path.relpath(doc, root)
        for block_line, language, marker_line, path, block in blocks(doc):
            if block is None:
                failures.append(f"{name}:{marker_line}: snippet marker for {path} is not followed "
                                "by a fenced code block")
                continue
            if path is None:
                if language in CODE_LANGUAGES:
                    failures.append(
                        f"{name}:{block_line}: a ```{language} block without a snippet marker: "
                        "put `<!-- snippet: PATH -->` before it (PATH: an example or test that "
                        "contains the code), or make it a ```text block if it is not code to run")
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
    print(f"check-doc-snippets: {checked} snippets match their sources; every C++ and Python "
          "block is one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
