#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scaling by simulation (S4): the predicted iteration time and weak-scaling
efficiency of data-parallel training on 8..2048 ranks, 8 per node, for the flat ring and the
hierarchical allreduce (S4: groups = nodes, leader and reduce-scatter variants) under each merge
strategy (per layer, S4's fusion by size, S4's two-segment fusion, one group after backward,
and the exact optimum), from a layer profile (ResNet-50 by default).

    scripts/scaling.py [--profile CSV] [--forward-seconds F] [--compute-scale S ...]
                       [--out DIR] [--bin DIR]

No formula is written here: every cost comes from the library. gradcomp-cost prices one
allreduce of M bytes (cost::ring_allreduce_seconds, cost::hierarchical_allreduce_seconds);
both are affine in M for fixed ranks, so two sizes give the per-message alpha' and per-byte
beta' of the whole collective, and gradcomp-plan then simulates WFBP for each strategy with
them (S1 eqs. 2-7: gradcomp::schedule::simulate and plan). Efficiency = compute / iteration
(weak scaling: the per-rank batch stays; 1.0 = communication fully hidden).

Network assumptions (S4's kind of cluster; change them with the options): between nodes
100 Gbit/s RDMA, alpha 10 us per message; inside a node 10 GB/s (PCIe 3 x16), alpha 2 us;
reduction free (gamma = 0, GPU); fp32 gradients (4 bytes a value; --value-bytes 2 for fp16).
Writes OUT/scaling.md (tables) and OUT/scaling.svg. Needs a build (build/bin/).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATEGIES = ["per_layer", "size_threshold", "two_segment", "single", "optimal"]


def run_json(cmd, stdin=None):
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"scaling: {' '.join(cmd)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def collective(bin_dir, transport, ranks, a):
    """(alpha', beta') of one allreduce over `ranks` by the library's cost model, or None where
    the transport does not apply (hierarchical with a single node)."""
    inter = {"alpha_seconds": a.inter_alpha, "beta_seconds_per_byte": 8 / (a.inter_gbit * 1e9)}
    intra = {"alpha_seconds": a.intra_alpha, "beta_seconds_per_byte": 1 / (a.intra_gbyte * 1e9)}
    if transport == "ring":
        base = {"model": "ring_allreduce", "ranks": ranks, **inter}
    else:
        if ranks <= a.per_node:
            return None
        base = {"model": "hierarchical_allreduce", "ranks": ranks, "group": a.per_node,
                "variant": transport.split(":")[1], "intra": intra, **inter}
    sizes = [0.0, 1 << 24, 1 << 25]
    costs = [q["seconds"] for q in run_json(
        [os.path.join(bin_dir, "gradcomp-cost")],
        json.dumps([dict(base, bytes=s) for s in sizes]))]
    alpha, beta = costs[0], (costs[1] - costs[0]) / sizes[1]
    if abs(costs[0] + beta * sizes[2] - costs[2]) > 1e-9 * costs[2]:
        sys.exit(f"scaling: {transport} on {ranks} ranks is not affine in the bytes")
    return alpha, beta


def plan(bin_dir, profile, forward, alpha, beta):
    r = run_json([os.path.join(bin_dir, "gradcomp-plan"), "--profile", profile,
                  "--forward-seconds", str(forward), "--alpha", repr(alpha), "--beta",
                  repr(beta), "--json"])
    return {s: (r["strategies"][s]["t_iter"], len(r["strategies"][s]["groups"]))
            for s in STRATEGIES}


def scaled_profile(profile, scale, scratch):
    """The profile with every backward time multiplied by `scale` (a faster or slower GPU),
    written into the folder `scratch`."""
    if scale == 1.0:
        return profile
    path = os.path.join(scratch, f"profile-x{scale:g}.csv")
    with open(profile) as f, open(path, "w") as g:
        header_seen = False
        for line in f:
            if line.startswith("#") or not header_seen:
                header_seen = header_seen or not line.startswith("#")
                g.write(line)
                continue
            name, numel, seconds = line.strip().split(",")
            g.write(f"{name},{numel},{float(seconds) * scale!r}\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default=os.path.join(ROOT, "apps/gradcomp-plan/profiles/resnet50.csv"))
    ap.add_argument("--forward-seconds", type=float, default=0.2015)
    ap.add_argument("--compute-scale", type=float, nargs="+", default=[1.0, 0.25],
                    help="multiply the compute times (0.25: a GPU 4x faster than the profile's)")
    ap.add_argument("--ranks", type=int, nargs="+",
                    default=[8, 16, 32, 64, 128, 256, 512, 1024, 2048])
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--breakdown-ranks", type=int, default=1024,
                    help="the rank count whose time is broken down into alpha and beta terms")
    ap.add_argument("--inter-gbit", type=float, default=100.0)
    ap.add_argument("--inter-alpha", type=float, default=10e-6)
    ap.add_argument("--intra-gbyte", type=float, default=10.0)
    ap.add_argument("--intra-alpha", type=float, default=2e-6)
    ap.add_argument("--value-bytes", type=int, choices=[2, 4], default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    ap.add_argument("--out", default=os.path.join(ROOT, "results/scaling"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    transports = ["ring", "hierarchical:leader", "hierarchical:reduce_scatter"]
    rows, curves = [], {}
    with open(a.profile) as f:
        backward = sum(float(l.split(",")[2]) for l in f
                       if not l.startswith("#") and not l.startswith("name"))
    scratch = tempfile.mkdtemp(prefix="gradcomp-scaling-")
    for scale in a.compute_scale:
        profile = scaled_profile(a.profile, scale, scratch)
        compute = (a.forward_seconds + backward) * scale
        for transport in transports:
            for p in a.ranks:
                ab = collective(a.bin, transport, p, a)
                if ab is None:
                    continue
                # gradcomp-plan prices 4 bytes a value: fp16 halves beta'
                alpha, beta = ab[0], ab[1] * a.value_bytes / 4
                for s, (t, groups) in plan(a.bin, profile, a.forward_seconds * scale, alpha,
                                           beta).items():
                    rows.append({"compute_scale": scale, "transport": transport, "ranks": p,
                                 "strategy": s, "groups": groups, "t_iter": t,
                                 "efficiency": compute / t, "alpha": alpha, "beta": beta})
                    curves.setdefault((scale, transport, s), []).append((p, compute / t))
    shutil.rmtree(scratch)
    write_tables(a, rows, backward)
    plot(a, curves)


def write_tables(a, rows, backward):
    numel = 0
    with open(a.profile) as f:
        numel = sum(int(l.split(",")[1]) for l in f
                    if not l.startswith("#") and not l.startswith("name"))
    lines = [f"Profile {os.path.relpath(a.profile, ROOT)} ({numel:,} values, forward "
             f"{a.forward_seconds * 1e3:.1f} ms, backward {backward * 1e3:.1f} ms at scale 1); "
             f"{a.per_node} ranks per node; between nodes {a.inter_gbit:g} Gbit/s, alpha "
             f"{a.inter_alpha * 1e6:g} us; inside {a.intra_gbyte:g} GB/s, alpha "
             f"{a.intra_alpha * 1e6:g} us; {a.value_bytes} bytes a value.", ""]
    for scale in a.compute_scale:
        lines += [f"### Efficiency (compute / iteration), compute scale {scale:g}", "",
                  "| transport | strategy | " + " | ".join(str(p) for p in a.ranks) + " |",
                  "|---|---|" + "---|" * len(a.ranks)]
        for transport in ["ring", "hierarchical:leader", "hierarchical:reduce_scatter"]:
            for s in STRATEGIES:
                cells = []
                for p in a.ranks:
                    m = [r for r in rows if r["compute_scale"] == scale and
                         r["transport"] == transport and r["strategy"] == s and r["ranks"] == p]
                    cells.append(f"{100 * m[0]['efficiency']:.1f} %" if m else "-")
                lines.append(f"| {transport} | {s} | " + " | ".join(cells) + " |")
        lines.append("")
        p = a.breakdown_ranks
        lines += [f"### Where the time goes on {p} ranks, compute scale {scale:g}",
                  "", "| transport | strategy | groups | alpha' x groups (ms) | beta' x bytes (ms) "
                  "| iteration (ms) | exposed communication (ms) |", "|---|---|---|---|---|---|---|"]
        compute = (a.forward_seconds + backward) * scale
        for r in rows:
            if r["compute_scale"] == scale and r["ranks"] == p:
                lines.append(
                    f"| {r['transport']} | {r['strategy']} | {r['groups']} | "
                    f"{r['alpha'] * r['groups'] * 1e3:.1f} | {r['beta'] * numel * 4 * 1e3:.1f} | "
                    f"{r['t_iter'] * 1e3:.1f} | {(r['t_iter'] - compute) * 1e3:.1f} |")
        lines.append("")
    with open(os.path.join(a.out, "scaling.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def plot(a, curves):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(a.compute_scale), figsize=(6 * len(a.compute_scale), 4.5),
                             squeeze=False)
    styles = {"ring": "-", "hierarchical:leader": "--", "hierarchical:reduce_scatter": ":"}
    for ax, scale in zip(axes[0], a.compute_scale):
        for (sc, transport, s), pts in sorted(curves.items()):
            if sc != scale or s not in ("per_layer", "two_segment", "optimal"):
                continue
            ax.plot([p for p, _ in pts], [100 * e for _, e in pts], styles[transport],
                    marker="o", markersize=3, label=f"{transport}, {s}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks (8 per node)")
        ax.set_ylabel("weak-scaling efficiency (%)")
        ax.set_title(f"ResNet-50 profile, compute x{scale:g}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "scaling.svg"))


if __name__ == "__main__":
    main()
