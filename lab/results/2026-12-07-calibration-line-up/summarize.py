#!/usr/bin/env python3
"""Per run of ab.sh (any run's report: auto.json, dense-ring.json): the start-up (plan.seconds,
auto.calibration_seconds), the calibrated networks and the plan; then the medians per build."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
rows = {"before": [], "after": []}
for path in sorted(glob.glob(os.path.join(out, "*-*", "*.json"))):
    which = os.path.basename(os.path.dirname(path)).split("-")[0]
    r = json.load(open(path))
    p = r["plan"]
    groups = " | ".join("+".join(g["layers"]) for g in p.get("groups", []))
    row = (p["seconds"], r.get("auto", {}).get("calibration_seconds", 0.0), p["alpha_seconds"],
           p["beta_seconds_per_byte"], p.get("after_backward_alpha_seconds", 0.0),
           p.get("after_backward_beta_seconds_per_byte", 0.0), groups)
    rows[which].append(row)
    print(f"{os.path.dirname(path)}: plan {row[0]:.3f} s, auto {row[1]:.3f} s, alpha "
          f"{1e3 * row[2]:.2f} ms, beta {1e9 * row[3]:.2f} ns/B, after backward "
          f"{1e3 * row[4]:.2f} ms / {1e9 * row[5]:.2f} ns/B; {row[6]}")
for which, rs in rows.items():
    if rs:
        med = [statistics.median(x[i] for x in rs) for i in range(6)]
        plans = sorted({x[6] for x in rs})
        print(f"{which}: {len(rs)} runs, median plan {med[0]:.3f} s, auto {med[1]:.3f} s, alpha "
              f"{1e3 * med[2]:.2f} ms, beta {1e9 * med[3]:.2f} ns/B, after backward "
              f"{1e3 * med[4]:.2f} ms / {1e9 * med[5]:.2f} ns/B; plans: {plans}")
