#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that no public header includes against the layer order of include/gradcomp/.

    scripts/check-layering.py [REPO] [--root DIR] [--order FILE] [--graph]

The order is the fenced block marked ```layering in docs/architecture.md (REPO/docs/architecture.md,
or FILE): one layer per line, lowest first; `#` starts a comment. A line lists units: `name/` is
a folder of include/gradcomp/, `name.hpp` a header directly in include/gradcomp/. A line that
starts with `label:` makes all its entries one unit named `label` (they may include each other);
otherwise each folder is a unit of its own, named after it.

Every header under DIR/include/gradcomp/ (DIR: REPO unless --root), in every subfolder, may
include (#include <gradcomp/...>) only headers of its own unit or of a lower layer. Exits 1
listing each `file:line: includes <x> (layer A: unit) from layer B: unit`, each header in a
folder the order does not list, and each include of a header that does not exist; exits 0
printing the count of headers and includes. When DIR is REPO, an entry of the order that
include/gradcomp/ does not have is an error too (the order must describe the tree; a test tree
given with --root may hold only a few folders). --graph prints the folder-level include graph
(for placing a new folder) and exits 0. Standard library only.
"""
import argparse
import os
import re
import sys

FENCE_OPEN = re.compile(r"^```layering\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
HEADER_SUFFIXES = (".hpp", ".cuh", ".h", ".inl", ".ipp")


def read_order(path):
    """The layers of the ```layering block of `path`, lowest first: [[(unit, [entries])]]."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, line in enumerate(lines) if FENCE_OPEN.match(line)), None)
    if start is None:
        raise ValueError(f"{path}: no ```layering block")
    layers, seen = [], set()
    for i in range(start + 1, len(lines)):
        line = lines[i].split("#", 1)[0].strip()
        if lines[i].startswith("```"):
            break
        if not line:
            continue
        label = None
        if ":" in line:
            label, line = (part.strip() for part in line.split(":", 1))
        entries = line.split()
        for entry in entries:
            if not (entry.endswith("/") or entry.endswith(HEADER_SUFFIXES)) or "/" in entry[:-1]:
                raise ValueError(f"{path}:{i + 1}: '{entry}' is neither a folder (name/) nor a "
                                 "header directly in include/gradcomp/ (name.hpp)")
            if entry in seen:
                raise ValueError(f"{path}:{i + 1}: '{entry}' is listed twice")
            seen.add(entry)
        if label:
            layers.append([(label, entries)])
        else:
            units = []
            for entry in entries:
                if not entry.endswith("/"):
                    raise ValueError(f"{path}:{i + 1}: header '{entry}' on a line without a "
                                     f"label: write 'label: {entry} ...'")
                units.append((entry[:-1], [entry]))
            layers.append(units)
    else:
        raise ValueError(f"{path}:{start + 1}: the ```layering block is not closed")
    return layers


def entry_of(rel):
    """The order entry of a path relative to include/gradcomp/: 'folder/' or 'file.hpp'."""
    parts = rel.split("/")
    return parts[0] + "/" if len(parts) > 1 else parts[0]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", nargs="?", default=os.path.join(here, ".."),
                        help="repository root (default: this script's repository)")
    parser.add_argument("--root", help="scan DIR/include/gradcomp instead of REPO's")
    parser.add_argument("--order", help="read the order from FILE instead of "
                        "REPO/docs/architecture.md")
    parser.add_argument("--graph", action="store_true", help="print the folder include graph")
    args = parser.parse_args()
    repo = os.path.abspath(args.repo)
    root = os.path.abspath(args.root) if args.root else repo
    order_path = os.path.abspath(args.order or os.path.join(repo, "docs", "architecture.md"))
    order_name = os.path.relpath(order_path, repo)
    if order_name.startswith(".."):
        order_name = order_path
    try:
        layers = read_order(order_path)
    except (OSError, ValueError) as e:
        print(f"layering: {e}", file=sys.stderr)
        return 1
    where = {}  # entry -> (layer index, unit name)
    for index, units in enumerate(layers):
        for name, entries in units:
            for entry in entries:
                where[entry] = (index, name)

    base = os.path.join(root, "include", "gradcomp")
    if not os.path.isdir(base):
        print(f"layering: {base} is not a folder", file=sys.stderr)
        return 1
    headers = []
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(HEADER_SUFFIXES):
                path = os.path.relpath(os.path.join(folder, name), base)
                headers.append(path.replace(os.sep, "/"))

    failures, includes, graph = [], 0, {}
    unlisted = set()
    for rel in headers:
        shown = f"include/gradcomp/{rel}"
        entry = entry_of(rel)
        if entry not in where:
            if entry not in unlisted:
                unlisted.add(entry)
                failures.append(f"{shown}: {entry} is in no layer of the order "
                                f"({order_name}): place it there")
            continue
        layer, unit = where[entry]
        with open(os.path.join(base, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(2)
            if m.group(1) == '"' and not target.startswith("gradcomp/"):
                # a relative include: resolve it against the including header's folder
                resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                if resolved.startswith(".."):
                    continue
                target = "gradcomp/" + resolved.replace(os.sep, "/")
            if not target.startswith("gradcomp/"):
                continue
            includes += 1
            target_rel = target[len("gradcomp/"):]
            if not os.path.isfile(os.path.join(base, target_rel)):
                failures.append(f"{shown}:{number}: includes <{target}>, which does not exist")
                continue
            target_entry = entry_of(target_rel)
            if target_entry not in where:
                continue  # reported once as a header in no layer
            target_layer, target_unit = where[target_entry]
            if target_unit != unit:
                graph.setdefault(unit, set()).add(target_unit)
            if target_unit != unit and target_layer >= layer:
                failures.append(f"{shown}:{number}: includes <{target}> (layer {target_layer}: "
                                f"{target_unit}) from layer {layer}: {unit}")

    if args.graph:
        for unit in sorted(graph):
            print(f"{unit} -> {' '.join(sorted(graph[unit]))}")
        return 0
    if root == repo:
        present = {entry_of(rel) for rel in headers}
        for entry in sorted(set(where) - present):
            failures.append(f"{order_name}: the order lists {entry}, "
                            "which include/gradcomp/ does not have")
    for failure in failures:
        print(failure, file=sys.stderr)
    if failures:
        print(f"layering: {len(failures)} problem(s); the order is the ```layering block of "
              f"{order_name}", file=sys.stderr)
        return 1
    print(f"layering: {len(headers)} headers, {includes} includes, no include against the order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
