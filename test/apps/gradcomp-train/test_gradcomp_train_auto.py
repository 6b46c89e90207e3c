# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --method auto (docs/train.md): per merge group and phase, dense through the
sparse allgather's ring or the reused threshold's pairs at a density, from the library's rule
(schedule::choose_exchange) on the calibrated alpha-beta model, and Accordion's critical regimes
(schedule::critical_regime) on the averaged gradient; end to end on 2 ranks.

The report's candidates are recomputed here from its own calibration with the alpha-beta
formulas of the ring allreduce and the sparse allgather (docs/choosing.md), the exposed times
from the overlaps, the choice by walking the candidates from the least lossy; the regimes start
critical, follow the interval grid, turn critical after a learning-rate drop; the layers under
--auto-dense-share go whole (their bound recomputed by sort and accumulate over the CNN's
tensors) and the sparse candidates are priced with them; a rule that must
choose dense (a saving of 99.9999 % required) sends every value; the replicas stay identical and
the model learns; bad combinations exit 2 naming the option.
"""
import math

import pytest

from train_runner import load, needs_train, run

pytestmark = needs_train

AUTO = ["--method", "auto", "--transport", "allgather", "--merge", "optimal", "--density",
        "0.01", "--profile-iterations", "2"]


def ring(bytes_, p, a):
    return 2 * (p - 1) * a["alpha_seconds"] + 2 * (p - 1) / p * a["beta_seconds_per_byte"] * bytes_


def allgather(bytes_, p, a):  # header allgather (32 bytes per rank), then the messages
    return (2 * (p - 1) * a["alpha_seconds"] +
            (p - 1) * a["beta_seconds_per_byte"] * (32 + bytes_))


def pair_bytes(density, value_bytes):
    """Bytes of a pair as the allgather encodes it: the value, and the expected delta + varint
    index of uniformly spread indices (a geometric gap; one more byte at 2^7, 2^14, ...)."""
    return value_bytes + 1 + sum((1 - density) ** (2 ** (7 * j)) for j in range(1, 5))


# The CNN's tensors (docs/train.md): 5x5 convolutions of 1 -> 32 and 32 -> 64 channels, then
# 3136 -> 512 -> 10 fully connected.
CNN_ELEMENTS = {"conv1.weight": 32 * 25, "conv1.bias": 32, "conv2.weight": 64 * 32 * 25,
                "conv2.bias": 64, "fc1.weight": 512 * 3136, "fc1.bias": 512,
                "fc2.weight": 10 * 512, "fc2.bias": 10}


def dense_below(share):
    """--auto-dense-share's bound, by sort and accumulate: every layer under it is among the
    smallest that together hold at most `share` of the parameters (equal sizes together)."""
    sizes = sorted(CNN_ELEMENTS.values())
    budget, held, below = share * sum(sizes), 0, 0
    for size in sorted(set(sizes)):
        held += size * sizes.count(size)
        if held > budget:
            return size if below else 0
        below = size + 1
    return below


def sent_share(group, a, density):
    """The share of a group's elements its sparse message carries: `density` of its sparse
    layers and every element of its layers under the dense bound."""
    dense = sum(CNN_ELEMENTS[l] for l in group["layers"]
                if CNN_ELEMENTS[l] < a["dense_below_elements"])
    n = group["elements"]
    return min(1.0, (density * (n - dense) + dense) / n)


def check_decision(d, group, a, regime_density, value_bytes=4):
    n, p, overlap = group["elements"], a["ranks"], group["overlap_seconds"]
    if regime_density < 1.0:
        regime_density = sent_share(group, a, regime_density)
    cands = d["candidates"]
    dense = cands[0]
    assert dense["method"] == "dense" and dense["density"] == 1.0 and dense["bytes"] == 4 * n
    assert dense["compress_seconds"] == 0.0
    assert dense["communication_seconds"] == pytest.approx(ring(4 * n, p, a), rel=1e-9, abs=1e-15)
    if regime_density < 1.0:
        assert [c["method"] for c in cands] == ["dense", "sparse"]  # fp16 is not a candidate
        sparse = cands[1]
        k = max(1, math.ceil(regime_density * n - 1e-9))
        assert sparse["density"] == pytest.approx(regime_density, rel=1e-12)
        assert abs(sparse["bytes"] - math.ceil(k * pair_bytes(regime_density, value_bytes))) <= 1
        assert sparse["compress_seconds"] == pytest.approx(a["select_seconds_per_element"] * n,
                                                           rel=1e-9)
        assert sparse["communication_seconds"] == pytest.approx(
            allgather(sparse["bytes"], p, a), rel=1e-9)
    else:
        assert [c["method"] for c in cands] == ["dense"]
    for c in cands:
        assert c["exposed_seconds"] == pytest.approx(
            c["compress_seconds"] + max(0.0, c["communication_seconds"] - overlap), rel=1e-9,
            abs=1e-15)
    chosen = cands[0]
    for c in cands:  # a lossier candidate must be faster and save min_saving
        if (c["exposed_seconds"] < chosen["exposed_seconds"] and
                c["exposed_seconds"] <= (1 - a["min_saving"]) * chosen["exposed_seconds"]):
            chosen = c
    assert d["chosen"] == chosen


def test_auto_prices_every_group_by_the_rule_and_keeps_the_replicas(tmp_path):
    p, report = run(tmp_path, "auto", 2, *AUTO, "--auto-interval-epochs", "0.2",
                    evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    a = r["auto"]
    assert r["replicas_identical"]
    assert r["curve"][-1]["test_accuracy"] > r["curve"][0]["test_accuracy"] + 0.1
    assert a["ranks"] == 2 and a["density"] == 0.01 and a["critical_density"] == 0.1
    assert r["config"]["factor_masking"] is False  # auto's default: dense groups keep momentum
    # a calibration is clamped at 0 (a loaded machine can fit a beta of 0)
    assert a["alpha_seconds"] >= 0 and a["beta_seconds_per_byte"] >= 0
    assert a["select_seconds_per_element"] > 0
    groups = a["groups"]
    assert sum(g["elements"] for g in groups) == r["config"]["parameters"]
    # the overlap: the backward still to run after a group (backward order): falls to 0
    overlaps = [g["overlap_seconds"] for g in groups]
    assert overlaps[-1] == 0.0 and overlaps == sorted(overlaps, reverse=True)
    for g in groups:
        check_decision(g["normal"], g, a, 0.01)
        check_decision(g["critical"], g, a, 0.1)
    # the intervals: 2 iterations each (0.2 of 10 per epoch), every group critical at first
    iterations = r["config"]["iterations_per_epoch"]
    assert a["interval_iterations"] == 2
    starts = [i["iteration"] for i in a["intervals"]]
    assert starts == list(range(0, iterations, 2))
    seconds = [i["train_seconds"] for i in a["intervals"]]  # the training time at each start
    assert seconds == sorted(seconds) and seconds[-1] < r["train_seconds"]
    # the start-up is training time: the merge plan's and auto's own calibration
    assert a["calibration_seconds"] > 0 and r["plan"]["seconds"] > 0
    assert seconds[0] == pytest.approx(r["plan"]["seconds"] + a["calibration_seconds"])
    assert all(a["intervals"][0]["critical"])
    for i in a["intervals"][1:]:
        for critical, change in zip(i["critical"], i["change"]):
            assert critical == (change is None or change >= a["eta"])
    for i in a["intervals"]:  # each group's density set: its decision in its regime
        assert i["density"] == [
            (0.1 if c else 0.01) if g["critical" if c else "normal"]["chosen"]["method"] ==
            "sparse" else 1.0 for g, c in zip(groups, i["critical"])]
    # --auto-dense-share 0.05 (the default): every tensor but fc1.weight (96.5 %) goes dense
    assert a["dense_share"] == 0.05 and a["dense_below_elements"] == dense_below(0.05) == 512 * 3136
    assert r["config"]["dense_below_elements"] == a["dense_below_elements"]
    for k, g in enumerate(groups):
        assert g["critical_iterations"] == sum(
            min(2, iterations - i["iteration"]) for i in a["intervals"] if i["critical"][k])


@pytest.mark.parametrize("share", [0.0, 0.001])
def test_the_dense_share_sets_the_layers_sent_whole(tmp_path, share):
    # 0: no layer dense, the sparse candidates at --density itself; 0.001 (1,663 elements): the
    # biases and conv1 (1,418) go dense, fc2.weight (5,120) would exceed it
    p, report = run(tmp_path, "share", 2, *AUTO, "--auto-dense-share", str(share),
                    evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    a = r["auto"]
    assert a["dense_below_elements"] == dense_below(share) == (0 if share == 0 else 5120)
    whole = sum(n for n in CNN_ELEMENTS.values() if n < a["dense_below_elements"])
    assert whole == (0 if share == 0 else 1418)
    for g in a["groups"]:
        check_decision(g["normal"], g, a, 0.01)
    if share == 0:
        assert all(g["normal"]["candidates"][-1]["density"] == 0.01 for g in a["groups"])
    # at least the dense layers' share of every value was sent
    assert r["achieved_density"] >= whole / sum(CNN_ELEMENTS.values())
    assert r["replicas_identical"]


def test_auto_goes_dense_when_compression_must_save_everything(tmp_path):
    p, report = run(tmp_path, "dense", 2, *AUTO, "--auto-min-saving", "0.999999",
                    "--auto-critical-density", "1", evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    for g in r["auto"]["groups"]:
        assert g["normal"]["chosen"]["method"] == "dense"
        assert g["critical"]["chosen"]["method"] == "dense"
    assert r["achieved_density"] == pytest.approx(1.0, abs=0.02)  # every value, all iterations
    assert r["replicas_identical"]


def test_auto_calibrates_itself_when_the_merge_plan_does_not(tmp_path):
    # per_layer plans without a network model: auto runs its own ring sweep (collective on
    # every rank) and prices every layer as a group of its own; fp16 values: 2-byte values in
    # the sparse candidate's pairs
    base = [a for a in AUTO if a not in ("--merge", "optimal")]
    p, report = run(tmp_path, "per-layer", 2, *base, "--merge", "per_layer", "--precision",
                    "fp16", evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    a = r["auto"]
    assert len(a["groups"]) == len(a["backward_seconds"]) == 8  # the CNN's 8 tensors
    assert a["alpha_seconds"] > 0 or a["beta_seconds_per_byte"] > 0
    for g in a["groups"]:
        check_decision(g["normal"], g, a, 0.01, value_bytes=2)
    assert r["replicas_identical"]


def test_a_learning_rate_drop_starts_a_critical_interval(tmp_path):
    # 10 iterations per epoch, intervals of 1 iteration, the rate x 0.1 from iteration 5 on;
    # eta 1e6: only the first two intervals (the detector has nothing to compare them with) and
    # the drop can be critical
    p, report = run(tmp_path, "drop", 2, *AUTO, "--auto-interval-epochs", "0.1", "--auto-eta",
                    "1e6", "--lr-decay", "step", "--lr-decay-epochs", "0.5", evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    intervals = load(report)["auto"]["intervals"]
    critical = [all(i["critical"]) for i in intervals]
    assert critical == [i["iteration"] in (0, 1, 5) for i in intervals]  # 1: nothing to compare
    assert [i["learning_rate"] < 0.04 for i in intervals] == [i["iteration"] >= 5
                                                              for i in intervals]


def test_drop_intervals_after_a_learning_rate_drop_are_critical(tmp_path):
    # as above, with --auto-drop-intervals 3: the intervals starting at iterations 5, 6 and 7
    p, report = run(tmp_path, "drop3", 2, *AUTO, "--auto-interval-epochs", "0.1", "--auto-eta",
                    "1e6", "--lr-decay", "step", "--lr-decay-epochs", "0.5",
                    "--auto-drop-intervals", "3", evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["config"]["auto_drop_intervals"] == 3
    critical = [all(i["critical"]) for i in r["auto"]["intervals"]]
    assert critical == [i["iteration"] in (0, 1, 5, 6, 7) for i in r["auto"]["intervals"]]


def test_a_skipped_step_leaves_the_regimes_finite(tmp_path):
    # an overflow at iteration 2 (dynamic loss scaling): the step is skipped on every rank and
    # its averages, which hold the infinity, stay out of the regimes' norms
    p, report = run(tmp_path, "skip", 2, *AUTO, "--auto-interval-epochs", "0.2", "--loss-scale",
                    "dynamic", "--inject-overflow-at", "2", evals_per_epoch=1)
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["skipped_steps"] == 1 and r["replicas_identical"]
    changes = [c for i in r["auto"]["intervals"][2:] for c in i["change"]]
    assert changes and all(c is not None and math.isfinite(c) for c in changes)


@pytest.mark.parametrize("args,named", [
    (["--transport", "ring"], "--transport allgather"),
    (["--compression-scope", "group"], "--compression-scope layer"),
    (["--density-warmup-epochs", "1"], "--density-warmup-epochs"),
    (["--auto-critical-density", "0.001"], "--auto-critical-density 0.001 is outside"),
    (["--auto-critical-density", "1.5"], "--auto-critical-density 1.5 is outside"),
    (["--auto-interval-epochs", "0"], "--auto-interval-epochs 0 is outside"),
    (["--auto-eta", "0"], "--auto-eta 0 is not"),
    (["--auto-min-saving", "1"], "--auto-min-saving 1 is outside"),
    (["--auto-drop-intervals", "0"], "--auto-drop-intervals 0 is outside"),
    (["--auto-dense-share", "1"], "--auto-dense-share 1 is outside"),
    (["--dense-below", "100"], "not with --dense-below"),
])
def test_bad_combinations_are_named(tmp_path, args, named):
    base = list(AUTO)
    if args[0] in base:  # an option of AUTO given another value
        i = base.index(args[0])
        del base[i:i + 2]
    p, _ = run(tmp_path, "bad", 2, *base, *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert named in p.stderr
