#!/usr/bin/env python3
"""Prints one row per report in the folders given: ms per iteration, compression, wait after
backward, communication thread busy / CPU, bytes per rank."""
import json, re, sys, glob, os
for folder in sys.argv[1:]:
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        md = json.load(open(path))["markdown"]
        def get(label):
            m = re.search(r"\| " + re.escape(label) + r"[^|]*\| ([^|]+) \|", md)
            return m.group(1).strip() if m else "-"
        print(f"| {os.path.basename(path)[:-5]} | {get('iteration')} | {get('compression')} | "
              f"{get('communication not overlapped')} | {get('communication thread busy')} / "
              f"{get('communication thread CPU time')} |")
