#!/usr/bin/env python3
"""Reads phase-trace/tr.R (one line per sparse_allgather operation of rank R: start, headers
done, messages done; steady-clock seconds, shared by the ranks of the emulated cluster, -1 where
the operation switched to the dense ring) and prints, over the iterations after the 15th, the
medians of: the ranks' start skew, the header round's completion after the last rank started,
and the messages' phase, separately for the fully connected group (sparse) and the
convolutions' group (sent whole: the dense switch)."""
import os, statistics as st
here = os.path.dirname(os.path.abspath(__file__))
R = [[list(map(float, l.split())) for l in open(os.path.join(here, "phase-trace", f"tr.{r}"))]
     for r in range(4)]
n = min(len(x) for x in R)
for parity, name in ((0, "fully connected group"), (1, "convolutions' group")):
    rows = []
    for i in range(30 + parity, n, 2):
        starts = [R[r][i][0] for r in range(4)]
        headers = [R[r][i][1] for r in range(4)]
        last = max(starts)
        ends = [R[r][i][2] for r in range(4)]
        payload = st.mean(e - h for e, h in zip(ends, headers)) if min(ends) > 0 else float("nan")
        rows.append((last - min(starts), st.mean(h - last for h in headers), payload))
    print(name)
    for k, label in enumerate(["start skew (last - first rank)",
                               "headers done after the last start (mean over ranks)",
                               "messages phase (mean over ranks)"]):
        v = sorted(1e3 * r[k] for r in rows)
        print(f"  {label:52s} median {v[len(v) // 2]:6.2f}  p10 {v[len(v) // 10]:6.2f}  "
              f"p90 {v[9 * len(v) // 10]:6.2f} ms")
