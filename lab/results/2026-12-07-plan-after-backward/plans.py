#!/usr/bin/env python3
"""Prints each report's merge plan and calibration (one line per JSON report given), and with
--count only how many reports of --method auto with the optimal merge chose each plan."""
import json
import sys
from collections import Counter

count = "--count" in sys.argv
counts = Counter()
for path in [a for a in sys.argv[1:] if a != "--count"]:
    try:
        d = json.load(open(path))
        p, c = d["plan"], d["config"]
    except (OSError, ValueError, KeyError):
        continue
    if c.get("method") != "auto" or p.get("strategy") != "optimal":
        continue
    plan = " | ".join("+".join(g["layers"]) for g in p["groups"])
    counts[plan] += 1
    if count:
        continue
    after = (" after backward alpha %.2f ms beta %.1f ns/B" %
             (p["after_backward_alpha_seconds"] * 1e3,
              p["after_backward_beta_seconds_per_byte"] * 1e9)
             if "after_backward_alpha_seconds" in p else "")
    print("%s: alpha %.2f ms beta %.1f ns/B%s; predicted %.1f ms, measured %.1f ms; %s" %
          (path, p["alpha_seconds"] * 1e3, p["beta_seconds_per_byte"] * 1e9, after,
           p["predicted_iteration_seconds"] * 1e3,
           d["per_iteration"]["iteration_ms"]["mean_over_ranks"], plan))
if count:
    for plan, n in counts.most_common():
        print(n, plan)
