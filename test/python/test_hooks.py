# SPDX-License-Identifier: Apache-2.0
"""Tests of gradcomp.torch's DDP communication hooks against independent references: a
pure-PyTorch top-k with per-parameter residuals (bit for bit), conservation of every value by
error feedback for every compressor, the ring against the plain average, a resumed state against
an uninterrupted one, DDP itself with several buckets over gloo, and bad arguments.

Needs the built package: ctest sets GRADCOMP_PYTHON_PACKAGE_DIR (<build>/python); with
GRADCOMP_TEST_INSTALLED=1 the installed one (package_under_test.py)."""
import importlib
import math
import os
import pathlib
import subprocess
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import package_under_test  # noqa: E402  (which gradcomp: the build tree's or the installed)

sys.path[:0] = package_under_test.search_path()
if package_under_test.INSTALLED:
    gc = importlib.import_module("gradcomp.torch")
    package_under_test.check_installed(gc)
else:
    gc = pytest.importorskip("gradcomp.torch")
import hooks_worker as worker  # noqa: E402  (the scenarios' inputs, shared with the ranks)


def run(scenario, size, tmp_path):
    env = package_under_test.subprocess_env(
        dict(os.environ, WORLD_SIZE=str(size), INIT_FILE=str(tmp_path / "init"),
             OMP_NUM_THREADS="1"))
    procs = [subprocess.Popen([sys.executable, worker.__file__, scenario, str(tmp_path)],
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(size)]
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=180)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario}: a rank did not finish within 180 s (hang)")
    for r, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"{scenario} rank {r} failed:\n{out}"
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(size)]


@pytest.mark.parametrize("hook,method", [("sparse_allgather_hook", "exact_topk"),
                                         ("ring_allreduce_hook", "fp32")])
def test_nonfinite_raise_names_the_element_on_every_rank(tmp_path, hook, method):
    # iteration 0: two buckets, clean; iteration 1: three buckets, the last holds the NaN on
    # every rank, so every rank refuses it before its collectives and the others complete
    ranks = run(f"nonfinite:{hook}:{method}", 2, tmp_path)
    for r in ranks:
        assert r["outcomes"][:4] == ["ok"] * 4, r["outcomes"]
        assert r["outcomes"][4].startswith("NonfiniteError: gradcomp: non-finite value nan at "
                                           "index 5 of 64 (1 non-finite values"), r["outcomes"]
        assert [h["iteration"] for h in r["history"]] == [0]  # iteration 1 did not complete


def test_merged_buckets_fail_every_held_bucket_with_the_last(tmp_path):
    """merge_buckets=True: the NaN in iteration 1's last bucket fails that bucket and the two
    held before it (none was sent: the merged all_gather never starts), on every rank."""
    ranks = run("nonfinite:sparse_allgather_hook:exact_topk:merged", 2, tmp_path)
    for r in ranks:
        assert r["outcomes"][:2] == ["ok"] * 2, r["outcomes"]
        assert all(o.startswith("NonfiniteError: gradcomp: non-finite value nan at index 5 of "
                                "64") for o in r["outcomes"][2:]) and len(r["outcomes"]) == 5
        assert [h["iteration"] for h in r["history"]] == [0]


def k_for_density(n, density):
    """gradcomp::k_for_density: ceil(density x n) in [1, n], near-integers taken as integers."""
    exact = density * n
    nearest = round(exact)
    k = nearest if abs(exact - nearest) <= 1e-9 * max(1.0, exact) else math.ceil(exact)
    return min(max(int(k), 1), n)


def reference_topk(size, iterations, density, momentum, factor_masking=True):
    """Pure PyTorch: per rank and parameter a residual (and velocity); per bucket the top-k of
    residual + (momentum x velocity + grad) over the whole bucket, the sent elements' velocity
    zeroed with factor masking; the bucket's average is the rank-ordered sum of the ranks'
    selections divided by the number of ranks. `density` is a number or a function of the
    iteration."""
    density_of = density if callable(density) else (lambda _: density)
    residual = [[torch.zeros(n) for n in worker.SIZES] for _ in range(size)]
    velocity = [[torch.zeros(n) for n in worker.SIZES] for _ in range(size)]
    outputs = []
    for it in range(iterations):
        grads = [worker.gradients(r, it) for r in range(size)]
        per_bucket = []
        for members in worker.layout(it):
            n = sum(worker.SIZES[i] for i in members)
            out = torch.zeros(n)
            for r in range(size):
                v = torch.cat([velocity[r][i] for i in members]) * momentum + \
                    torch.cat([grads[r][i] for i in members])
                acc = torch.cat([residual[r][i] for i in members]) + v
                idx = torch.topk(acc.abs(), k_for_density(n, density_of(it))).indices
                out[idx] += acc[idx]
                acc[idx] = 0.0
                if factor_masking:
                    v[idx] = 0.0
                offset = 0
                for i in members:
                    residual[r][i] = acc[offset:offset + worker.SIZES[i]].clone()
                    velocity[r][i] = v[offset:offset + worker.SIZES[i]].clone()
                    offset += worker.SIZES[i]
            per_bucket.append(out / size)
        outputs.append(per_bucket)
    return outputs, residual


def assert_rank_matches(r, got, expected, residual):
    """Rank r's averaged buckets, iteration by iteration, and its residuals (per parameter, in
    the order the hooks first saw them: layout(0) flattened) equal the reference bit for bit."""
    for it, (want_it, got_it) in enumerate(zip(expected, got["outputs"])):
        for b, (want, have) in enumerate(zip(want_it, got_it)):
            assert torch.equal(want, have), f"rank {r} iteration {it} bucket {b}"
    order = [i for members in worker.layout(0) for i in members]
    for slot, i in enumerate(order):
        assert torch.equal(got["residuals"][slot], residual[r][i]), f"rank {r} param {i}"


@pytest.mark.parametrize("momentum", ["0", "0.9", "0.9-kept"])
def test_exact_topk_matches_pure_pytorch_bit_for_bit(tmp_path, momentum):
    # "0.9-kept": momentum correction with factor_masking=False (sent velocities kept)
    ranks = run(f"buckets:sparse_allgather_hook:exact_topk:{momentum}", 2, tmp_path)
    expected, residual = reference_topk(2, 3, 0.05, float(momentum.split("-")[0]),
                                        factor_masking=not momentum.endswith("-kept"))
    for r, got in enumerate(ranks):
        assert_rank_matches(r, got, expected, residual)
    hist = ranks[0]["history"]
    assert [h["buckets"] for h in hist] == [2, 3, 3]
    assert hist[0]["k_selected"] == k_for_density(2115, 0.05) + k_for_density(1520, 0.05)


def dgc_warmup_density(iteration):
    """DGC's stepped warm-up, written out: 2 iterations per epoch, d0 = 0.5 falling to 0.05 over
    2 epochs, d(e) = d0 (dT / d0)^(e / 2) for whole epochs e < 2, then dT."""
    epoch = iteration // 2
    return 0.05 if epoch >= 2 else 0.5 * (0.05 / 0.5) ** (epoch / 2)


def test_density_warmup_selects_the_schedules_top_k_and_resumes_where_it_was(tmp_path):
    ranks = run("warmup", 2, tmp_path)
    expected, residual = reference_topk(2, 5, dgc_warmup_density, 0.0)
    for r, got in enumerate(ranks):
        assert_rank_matches(r, got, expected, residual)
        targets = [h["target_density"] for h in got["history"]]
        assert targets == pytest.approx([0.5, 0.5, 0.5 * 0.1 ** 0.5, 0.5 * 0.1 ** 0.5, 0.05],
                                        rel=1e-12)
        assert got["history"][0]["k_selected"] == k_for_density(2115, 0.5) + \
            k_for_density(1520, 0.5)
        # the saved iteration count: the resumed run is at iteration 3's density, bit for bit
        # the uninterrupted run
        assert [h["iteration"] for h in got["resumed_history"]] == [3, 4]
        assert [h["target_density"] for h in got["resumed_history"]] == targets[3:]
        for a, b in zip(got["resumed"], got["whole"]):
            assert all(torch.equal(x, y) for x, y in zip(a, b))


def assert_conserved(ranks, runs, iterations, what, rebuilds=True, params=None):
    """Every value sent or kept: P x (sum of the averages over `runs`, each a list of iterations
    whose buckets are laid out as worker.layout(0, rebuilds), layout(1, rebuilds), ...) equals
    the sum over ranks of (the gradients of `iterations` iterations - the final residual), per
    parameter (those of `params`, indices into worker.SIZES; None: every one)."""
    sent = [torch.zeros(n, dtype=torch.float64) for n in worker.SIZES]
    for outputs in runs:
        for it, per_bucket in enumerate(outputs):
            for members, out in zip(worker.layout(it, rebuilds), per_bucket):
                offset = 0
                for i in members:
                    sent[i] += len(ranks) * out[offset:offset + worker.SIZES[i]].double()
                    offset += worker.SIZES[i]
    order = [i for members in worker.layout(0) for i in members]
    for i, n in enumerate(worker.SIZES):
        if params is not None and i not in params:
            continue
        kept = torch.zeros(n, dtype=torch.float64)
        for r, res in enumerate(ranks):
            kept += sum(worker.gradients(r, it)[i].double() for it in range(iterations))
            kept -= res["residuals"][order.index(i)].double()
        assert torch.allclose(sent[i], kept, atol=1e-5), f"{what}: parameter {i}"


@pytest.mark.parametrize("method", gc.SPARSE_METHODS + gc.QUANTIZER_METHODS + ("fp16", "bf16"))
def test_every_value_is_sent_or_kept_across_a_bucket_rebuild(tmp_path, method):
    """size x (sum of the averages) == sum over ranks of (sum of the gradients - residual),
    per parameter, through DDP's bucket rebuild; every rank gets the same bits."""
    ranks = run(f"buckets:sparse_allgather_hook:{method}:0", 2, tmp_path)
    for a, b in zip(ranks[0]["outputs"], ranks[1]["outputs"]):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert_conserved(ranks, [ranks[0]["outputs"]], 3, method)
    assert 0 < ranks[0]["history"][-1]["k_selected"] <= sum(worker.SIZES)


def test_ring_fp32_equals_the_plain_average(tmp_path):
    ranks = run("buckets:ring_allreduce_hook:fp32:0", 2, tmp_path)
    for it, per_bucket in enumerate(ranks[0]["outputs"]):
        grads = [worker.gradients(r, it) for r in range(2)]
        for members, out in zip(worker.layout(it), per_bucket):
            want = (torch.cat([grads[0][i] for i in members]) +
                    torch.cat([grads[1][i] for i in members])) / 2
            assert torch.equal(out, want)
    # on 2 ranks each rank sends one chunk per phase: the whole bucket once, 4 bytes a value
    assert ranks[0]["history"][0]["sent_bytes"] == 4 * (2115 + 1520)


def test_fp16_ring_is_identical_on_every_rank_and_close_to_the_average(tmp_path):
    ranks = run("buckets:fp16_hook:fp16:0", 3, tmp_path)
    for it, per_bucket in enumerate(ranks[0]["outputs"]):
        grads = [worker.gradients(r, it) for r in range(3)]
        for b, (members, out) in enumerate(zip(worker.layout(it), per_bucket)):
            for other in ranks[1:]:
                assert torch.equal(out, other["outputs"][it][b])
            want = sum(torch.cat([g[i] for i in members]) for g in grads) / 3
            assert torch.allclose(out, want, atol=2e-2, rtol=2e-3)


def test_resumed_state_continues_bit_for_bit(tmp_path):
    """Buckets laid out alike before and after the restart: the resumed iterations equal the
    uninterrupted run's, bit for bit (residuals and velocities restored)."""
    ranks = run("resume:static", 2, tmp_path)
    for r, res in enumerate(ranks):
        for it, (a, b) in enumerate(zip(res["resumed"], res["whole"])):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), f"rank {r} iteration {it}"


def test_resume_across_a_bucket_rebuild_loses_nothing(tmp_path):
    """A new DDP object starts with its first bucket layout again, so the selections differ
    from an uninterrupted run's, but every value is still sent or kept (no residual dropped)."""
    ranks = run("resume:rebuilds", 2, tmp_path)
    assert_conserved(ranks, [ranks[0]["first"], ranks[0]["resumed"]], 4, "resume")


@pytest.mark.parametrize("scenario", ["ddp:sparse_allgather_hook:reused_threshold",
                                      "ddp:sparse_allgather_hook:sampled_topk",
                                      "ddp:sparse_allgather_hook:qsgd",
                                      "ddp:ring_allreduce_hook:fp32",
                                      "ddp:fp16_hook:fp16"])
def test_ddp_with_several_buckets_keeps_replicas_identical(tmp_path, scenario):
    ranks = run(scenario, 3, tmp_path)
    for other in ranks[1:]:
        assert all(torch.equal(a, b) for a, b in zip(ranks[0]["params"], other["params"]))
    hist = ranks[0]["history"]
    assert len(hist) == 6
    # DDP's first iteration has one bucket; then it rebuilds them (1 MiB, then bucket_cap_mb)
    # and every parameter's residual moves to its new bucket
    assert hist[0]["buckets"] == 1 and min(h["buckets"] for h in hist[1:]) >= 3
    assert all(h["numel"] == sum(p.numel() for p in ranks[0]["params"]) for h in hist)


@pytest.mark.parametrize("method", ["exact_topk", "reused_threshold", "qsgd"])
def test_merged_buckets_average_bit_for_bit_as_per_bucket_in_one_collective(tmp_path, method):
    """merge_buckets=True: the same averages and residuals as one all_gather per bucket, bit for
    bit, through the bucket rebuild, with one collective per iteration once its capacity is
    known (the first iteration: sizes first, then the messages) instead of one per bucket."""
    ranks = run(f"merged:{method}", 3, tmp_path)
    for r, res in enumerate(ranks):
        for it, (a, b) in enumerate(zip(res["plain"], res["merged"])):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), f"rank {r} iteration {it}"
        assert all(torch.equal(x, y) for x, y in zip(res["plain_residuals"],
                                                     res["merged_residuals"]))
        merged, plain = res["merged_history"], res["plain_history"]
        assert [h["collectives"] for h in merged] == [2, 1, 1]
        assert [h["buckets"] for h in merged] == [h["buckets"] for h in plain] == [2, 3, 3]
        assert min(h["collectives"] for h in plain[1:]) >= 3  # one per bucket at least
        for h, g in zip(merged, plain):
            assert h["k_selected"] == g["k_selected"] and h["wire_bytes"] == g["wire_bytes"]
        assert res["ring"] == ("ValueError: merge_buckets is for sparse_allgather_hook (the ring "
                               "hooks run one allreduce per bucket)")


def test_merged_buckets_under_ddp_train_as_per_bucket(tmp_path):
    """DDP with several buckets over gloo: merge_buckets=True trains to the same parameters, bit
    for bit, as the default, identical on every rank, in fewer collectives."""
    (tmp_path / "m").mkdir()
    (tmp_path / "p").mkdir()
    merged = run("ddp:sparse_allgather_hook:reused_threshold:merged", 3, tmp_path / "m")
    plain = run("ddp:sparse_allgather_hook:reused_threshold", 3, tmp_path / "p")
    for r in range(3):
        assert all(torch.equal(a, b) for a, b in zip(merged[r]["params"], plain[0]["params"]))
    # one all_gather per iteration, two where the messages outgrew the capacity (sizes first);
    # per bucket at least one per bucket
    m = [h["collectives"] for h in merged[0]["history"]]
    p = [h["collectives"] for h in plain[0]["history"]]
    assert all(c <= 2 for c in m) and all(a < b for a, b in zip(m[1:], p[1:])), (m, p)


def test_decode_rejects_a_corrupted_message():
    import numpy as np
    c = gc._core.Compressor("exact_topk", 0.1)
    residual, grad = np.zeros(100, np.float32), np.arange(100, dtype=np.float32)
    wire, stats = c.compress(residual, grad)
    assert stats["k_selected"] == 10 and stats["wire_bytes"] == wire.size
    gathered = np.concatenate([wire, wire])
    gathered[wire.size + 1] ^= 0xFF  # rank 1's magic
    out = np.zeros(100, np.float32)
    with pytest.raises(ValueError, match="rank 1's message"):
        gc._core.decode_average(gathered, np.array([wire.size] * 2, np.int64), out, 2.0)
    with pytest.raises(ValueError, match="outside"):
        gc._core.decode_average(gathered, np.array([wire.size + 1, 0], np.int64), out, 2.0)
    with pytest.raises(ValueError, match="out has|elements"):
        gc._core.decode_average(np.concatenate([wire, wire]), np.array([wire.size] * 2, np.int64),
                                np.zeros(99, np.float32), 2.0)


@pytest.fixture
def single_rank(tmp_path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "one"), rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("kwargs,message", [
    ({"method": "top_k"}, "method 'top_k' is not one of"),
    ({"density": 0.0}, "density 0.0 is outside"),
    ({"density": 1.5}, "density 1.5 is outside"),
    ({"interval": 0}, "interval 0 is not"),
    ({"momentum": 1.0}, "momentum 1.0 is outside"),
    ({"threads": 2000}, "threads 2000 is above"),
    ({"seed": -1}, "seed -1 is not"),
    ({"method": "fp16", "momentum": 0.9}, "momentum correction 0.9 is for the sparse methods"),
    ({"nonfinite": "skip_step"}, "nonfinite 'skip_step' is not one of propagate, raise"),
    ({"history_limit": 0}, "history_limit 0 is not"),
    ({"levels": 0}, "levels 0 is not"),
    ({"levels": 40000}, "levels 40000 is above the limit 32768"),
    ({"method": "qsgd", "momentum": 0.9}, "momentum correction 0.9 is for the sparse methods"),
    ({"density_warmup": 4}, "density_warmup 4 is not None nor a gradcomp.torch.DensityWarmup"),
    ({"factor_masking": 1}, "factor_masking 1 is not True or False"),
    ({"merge_buckets": "yes"}, "merge_buckets 'yes' is not True or False"),
])
def test_bad_arguments_raise_value_error_naming_the_value(single_rank, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gc.HookState(**kwargs)


@pytest.mark.parametrize("kwargs,message", [
    ({"iterations_per_epoch": 0}, "iterations_per_epoch 0 is not an integer >= 1"),
    ({"iterations_per_epoch": 2.5}, "iterations_per_epoch 2.5 is not an integer >= 1"),
    ({"iterations_per_epoch": 10, "epochs": -1}, "epochs -1 is not finite and >= 0"),
    ({"iterations_per_epoch": 10, "epochs": float("nan")}, "epochs nan is not finite"),
    ({"iterations_per_epoch": 10, "initial_density": 0.0}, "initial_density 0.0 is outside"),
    ({"iterations_per_epoch": 10, "initial_density": 1.5}, "initial_density 1.5 is outside"),
])
def test_bad_density_warmup_raises_value_error_naming_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gc.DensityWarmup(**kwargs)


def test_density_warmup_only_for_sparse_methods(single_rank):
    warmup = gc.DensityWarmup(10)
    for method in ("fp16", "qsgd"):
        with pytest.raises(ValueError, match=f"density_warmup is for the sparse methods, not "
                                             f"'{method}'"):
            gc.HookState(method=method, density_warmup=warmup)
    # the schedule: a continuous decay, and a target above the initial density (no warm-up)
    smooth = gc.DensityWarmup(10, epochs=2, initial_density=0.25, stepped=False)
    assert smooth.density(5, 0.01) == pytest.approx(0.25 * 0.04 ** 0.25, rel=1e-12)
    assert smooth.density(20, 0.01) == 0.01
    assert warmup.density(0, 0.5) == 0.5


def test_history_keeps_the_last_history_limit_iterations(single_rank):
    state = gc.HookState(history_limit=2)
    for _ in range(3):
        state._iteration = {"numel": 10, "k_selected": 1}
        state._end_iteration()
    assert [h["iteration"] for h in state.history] == [1, 2]
    assert state.statistics()["iteration"] == 2


def test_a_state_dict_of_other_options_is_refused(single_rank):
    a = gc.HookState(method="exact_topk", density=0.01)
    b = gc.HookState(method="exact_topk", density=0.02)
    with pytest.raises(ValueError, match="option density is 0.01 in the state dict, 0.02 here"):
        b.load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="not a gradcomp.torch.HookState"):
        b.load_state_dict({"residuals": []})
    kept = gc.HookState(method="exact_topk", momentum=0.9, factor_masking=False)
    masked = gc.HookState(method="exact_topk", momentum=0.9)
    with pytest.raises(ValueError, match="option factor_masking is False in the state dict, "
                                         "None here"):
        masked.load_state_dict(kept.state_dict())


def test_ring_hook_refuses_a_sparse_method(single_rank):
    state = gc.HookState(method="exact_topk")
    p = torch.nn.Parameter(torch.zeros(10))
    fut = gc.ring_allreduce_hook(state, worker.Bucket(0, [p], [torch.ones(10)], True))
    with pytest.raises(Exception, match="method 'exact_topk' is sparse"):
        fut.wait()
    with pytest.raises(ValueError, match="fp16_hook needs"):
        gc.fp16_hook(state, worker.Bucket(0, [p], [torch.ones(10)], True))


# ---- method="auto" -------------------------------------------------------------------------

def ring_seconds(n_bytes, p, alpha, beta):
    """cost::ring_allreduce_seconds without gamma: 2 (P-1) alpha + 2 (P-1) / P beta M."""
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * beta * n_bytes


def allgather_seconds(n_bytes, p, alpha, beta):
    """cost::sparse_allgather_seconds for one message of M bytes per rank: the 32-byte header
    round plus the message round, each (P-1) (alpha + beta M)."""
    return (p - 1) * (alpha + beta * 32) + (p - 1) * (alpha + beta * n_bytes)


def delta_varint_index_bytes(d):
    """gradcomp::expected_index_bytes(delta_varint, d) written out: a gap g costs 1 + j bytes
    when g - 1 >= 2^(7j), which for uniformly spread indices happens with probability
    (1 - d)^(2^(7j))."""
    return 1.0 + sum((1.0 - d) ** (2 ** (7 * j)) for j in range(1, 5))


def hook_message_bytes(n, d):
    """The hooks' sparse message as priced: k fp32 values and their delta + varint indices."""
    return math.ceil(k_for_density(n, d) * (4 + delta_varint_index_bytes(d)))


def hook_rows_seconds(message_bytes, p, alpha, beta):
    """The hooks' one all_gather of rows: an 8-byte size and the message padded to 5/4 of it
    plus 64 bytes, (P-1) (alpha + beta row)."""
    return (p - 1) * (alpha + beta * (8 + message_bytes * 5 // 4 + 64))


def reference_choice(n, alpha, beta, p, select, density, critical_density, min_saving, critical,
                     hook=False):
    """choose_exchange's rule written out: dense (4n bytes through the ring) first, then sparse
    (8k bytes through gradcomp's allgather, k = k_for_density(n, d), or with `hook` the hooks'
    message in their padded rows; plus select x n) replaces it if its exposed seconds are below
    dense's and at most (1 - min_saving) times them; overlap 0."""
    dense = {"method": "dense", "density": 1.0, "bytes": 4 * n, "compress_seconds": 0.0,
             "communication_seconds": ring_seconds(4 * n, p, alpha, beta)}
    dense["exposed_seconds"] = dense["communication_seconds"]
    candidates = [dense]
    d = critical_density if critical else density
    if d < 1:
        message = hook_message_bytes(n, d) if hook else 8 * k_for_density(n, d)
        comm = hook_rows_seconds(message, p, alpha, beta) if hook else \
            allgather_seconds(message, p, alpha, beta)
        candidates.append({"method": "sparse", "density": d, "bytes": message,
                           "compress_seconds": select * n, "communication_seconds": comm,
                           "exposed_seconds": select * n + comm})
    chosen = dense
    for c in candidates:
        if c["exposed_seconds"] < chosen["exposed_seconds"] and \
                c["exposed_seconds"] <= (1 - min_saving) * chosen["exposed_seconds"]:
            chosen = c
    return chosen, candidates


@pytest.mark.parametrize("case,n,alpha,beta,select,critical,min_saving,want", [
    ("fast link, small tensor", 1000, 1e-6, 1e-10, 1e-9, False, 0.1, ("dense", 1.0)),
    ("slow link, big tensor", 10**6, 1e-3, 1e-8, 1e-9, False, 0.1, ("sparse", 0.01)),
    ("slow link, big tensor, critical", 10**6, 1e-3, 1e-8, 1e-9, True, 0.1, ("sparse", 0.1)),
    ("slow link, small tensor (latency-bound)", 544, 1e-3, 1e-8, 1e-9, False, 0.1,
     ("dense", 1.0)),
    ("compression must save 99.9999 %", 10**6, 1e-3, 1e-8, 1e-9, False, 0.999999,
     ("dense", 1.0)),
    ("a slow selection", 10**6, 1e-3, 1e-8, 1e-7, False, 0.1, ("dense", 1.0)),
])
def test_choose_exchange_binding_decides_and_prices_as_the_formulas(case, n, alpha, beta, select,
                                                                    critical, min_saving, want):
    for p in (2, 4):
        got = gc._core.choose_exchange(n, alpha, beta, p, select, 0.01, 0.1, min_saving,
                                       critical, 0.0)
        chosen, candidates = reference_choice(n, alpha, beta, p, select, 0.01, 0.1, min_saving,
                                              critical)
        assert (got["method"], got["density"]) == want == (chosen["method"], chosen["density"])
        assert got["chosen"]["method"] == got["method"]
        assert len(got["candidates"]) == len(candidates) == 2, case
        for have, ref in zip(got["candidates"], candidates):
            assert have["method"] == ref["method"] and have["bytes"] == ref["bytes"]
            for key in ("density", "compress_seconds", "communication_seconds",
                        "exposed_seconds"):
                assert have[key] == pytest.approx(ref[key], rel=1e-12, abs=1e-18), (case, key)


@pytest.mark.parametrize("n,density,critical", [(10**6, 0.05, False), (10**6, 0.01, False),
                                                 (10**6, 0.05, True), (3 * 10**5, 0.2, True)])
def test_choose_exchange_binding_prices_the_hooks_padded_rows(n, density, critical):
    """With value_bytes 4, delta + varint indices and hook_rows, the sparse candidate is the
    hooks' one all_gather of rows (an 8-byte size, then the message padded to 5/4 of it plus
    64 bytes), priced as written out here; dense is priced as before."""
    alpha, beta, select, p = 1e-4, 8e-9, 2e-9, 4
    got = gc._core.choose_exchange(n, alpha, beta, p, select, density, 0.15, 0.1, critical, 0.0,
                                   value_bytes=4, indices="delta_varint", hook_rows=True)
    d = 0.15 if critical else density
    k, message = k_for_density(n, d), hook_message_bytes(n, d)
    rows = hook_rows_seconds(message, p, alpha, beta)
    dense, sparse = got["candidates"]
    assert dense["bytes"] == 4 * n
    assert dense["communication_seconds"] == pytest.approx(ring_seconds(4 * n, p, alpha, beta))
    assert sparse["density"] == d and sparse["bytes"] == message
    assert sparse["communication_seconds"] == pytest.approx(rows, rel=1e-12)
    assert sparse["exposed_seconds"] == pytest.approx(select * n + rows)
    if d == 0.05:  # 5 bytes a pair, where 8-byte pairs priced it 60 % higher
        assert 4.99 * k <= message <= 5.01 * k
    assert gc._core.hook_row_capacity(message) == message * 5 // 4 + 64
    assert gc._core.hook_row_size_bytes == 8


def test_choose_exchange_binding_pricing_the_pairs_as_sent_can_change_the_decision():
    """A bucket where 8-byte pairs through gradcomp's allgather price sparse out at a 25 %
    critical density, and the hook's rows of fp32 values with delta + varint indices (about
    5 bytes a pair, padded 5/4) do not: the decision follows the bytes the hook sends."""
    args = (10**6, 1e-4, 8e-9, 4, 1e-9, 0.05, 0.25, 0.1, True, 0.0)
    assert gc._core.choose_exchange(*args)["method"] == "dense"
    sent = gc._core.choose_exchange(*args, value_bytes=4, indices="delta_varint", hook_rows=True)
    assert (sent["method"], sent["density"]) == ("sparse", 0.25)


def test_choose_exchange_binding_overlap_and_critical_density_one():
    # overlap hides communication: dense's exposed seconds shrink, sparse keeps its selection
    hidden = gc._core.choose_exchange(10**6, 1e-3, 1e-8, 2, 1e-9, 0.01, 0.1, 0.1, False, 1.0)
    assert hidden["method"] == "dense" and hidden["chosen"]["exposed_seconds"] == 0.0
    # a critical density of 1 leaves sparse out: dense is the only candidate
    only = gc._core.choose_exchange(10**6, 1e-3, 1e-8, 2, 1e-9, 0.01, 1.0, 0.1, True, 0.0)
    assert [c["method"] for c in only["candidates"]] == ["dense"]
    # one rank: every exchange costs 0, so dense (nothing to select) wins
    alone = gc._core.choose_exchange(10**6, 1e-3, 1e-8, 1, 1e-9, 0.01, 0.1, 0.1, False, 0.0)
    assert alone["method"] == "dense" and alone["chosen"]["exposed_seconds"] == 0.0


def test_critical_regime_binding_follows_accordion_and_checkpoints():
    r = gc._core.CriticalRegime(0.5)
    assert r.critical and r.last_change == math.inf  # nothing observed yet
    assert r.observe(10.0) and r.last_change == math.inf  # the first interval: critical
    assert not r.observe(12.0) and r.last_change == pytest.approx(0.2)  # |12 - 10| / 10 < 0.5
    assert r.observe(20.0) and r.last_change == pytest.approx(2 / 3)  # >= 0.5
    r.learning_rate_dropped(2)
    saved = r.state()
    assert r.observe(20.0) and r.last_change == 0.0  # announced by the drop
    restored = gc._core.CriticalRegime(0.5)
    restored.load_state(saved)
    assert restored.critical and restored.last_change == pytest.approx(2 / 3)
    assert restored.observe(20.0) and restored.observe(20.0)  # the drop's two intervals
    assert not restored.observe(20.0)
    assert restored.state()["dropped_intervals"] == 0
    assert gc._core.sum_of_squares(torch.tensor([3.0, 4.0]).numpy()) == 25.0


def test_fit_ring_allreduce_recovers_alpha_and_beta():
    alpha, beta, p = 2e-5, 3e-9, 4
    sizes = [4096.0 * 4**i for i in range(6)]
    seconds = [ring_seconds(b, p, alpha, beta) for b in sizes]
    fit = gc._core.fit_ring_allreduce(sizes, seconds, p)
    assert fit["alpha_seconds"] == pytest.approx(alpha, rel=1e-9)
    assert fit["beta_seconds_per_byte"] == pytest.approx(beta, rel=1e-9)
    assert fit["r_squared"] == pytest.approx(1.0)
    assert gc._core.fit_ring_allreduce(sizes, seconds, 1)["alpha_seconds"] == 0.0


@pytest.mark.parametrize("call,message", [
    (lambda c: c.choose_exchange(0, 0.0, 0.0, 2, 0.0, 0.01), "elements 0 is below 1"),
    (lambda c: c.choose_exchange(10, -1.0, 0.0, 2, 0.0, 0.01),
     "alpha_seconds -1 is not a finite value >= 0"),
    (lambda c: c.choose_exchange(10, 0.0, float("nan"), 2, 0.0, 0.01),
     "beta_seconds_per_byte nan is not a finite value >= 0"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 0, 0.0, 0.01), "ranks 0 is below 1"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, -1e-9, 0.01),
     "select_seconds_per_element -1e-09 is not a finite value >= 0"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 1.5), r"density 1.5 is outside \(0, 1\]"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 0.01, 0.0),
     r"critical_density 0 is outside \(0, 1\]"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 0.01, 0.1, 1.0),
     r"min_saving 1 is outside \[0, 1\)"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 0.01, 0.1, 0.1, False, float("inf")),
     "overlap_seconds inf is not a finite value >= 0"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 0.01, value_bytes=3),
     "value_bytes 3 is not 1, 2 or 4"),
    (lambda c: c.choose_exchange(10, 0.0, 0.0, 2, 0.0, 0.01, indices="varint"),
     "indices 'varint' is not u32 or delta_varint"),
    (lambda c: c.CriticalRegime(0.0), "eta 0 is not a finite value above 0"),
    (lambda c: c.CriticalRegime().observe(-1.0), "gradient norm -1 is not a finite value >= 0"),
    (lambda c: c.CriticalRegime().learning_rate_dropped(0),
     "0 intervals after a learning-rate drop is below 1"),
    (lambda c: c.CriticalRegime().load_state(dict(c.CriticalRegime().state(), previous=-1.0)),
     "saved norm -1 is not a finite value >= 0"),
    (lambda c: c.CriticalRegime().load_state({"eta": 0.5}), "'has_previous' is missing"),
    (lambda c: c.fit_ring_allreduce([4096.0], [1e-3], 2), "count 1 is below 2"),
    (lambda c: c.dense_below_elements([10, 20], 1.0), r"dense share 1 is outside \[0, 1\)"),
    (lambda c: c.fit_ring_allreduce([4096.0, 0.0], [1e-3, 1e-3], 2),
     "bytes 0 is not a finite value > 0"),
])
def test_auto_bindings_raise_value_error_naming_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call(gc._core)


def auto_critical(history):
    """Per iteration, per bucket index: (method, density, critical)."""
    return [{b["bucket"]: (b["method"], b["density"], b["critical"]) for b in h["auto"]}
            for h in history]


@pytest.mark.parametrize("drop_at", [7, 8])
def test_auto_under_ddp_sends_the_buckets_sparse_and_follows_the_regimes(tmp_path, drop_at):
    """2 ranks, a slow link: after DDP's rebuild both buckets (266,602 and 544 values) go
    sparse, as the formulas decide (the small one too: the hook's one all_gather round has half
    the ring allreduce's latency), until dense_share's bound (0.05 given, of the values, from
    the second iteration's bucket sizes: 544 is under it, 266,602 not) sends the small one
    whole from the third iteration on; the first two intervals and the one after the learning-rate
    drop are critical (sparse at 0.1), the others not (0.01); the replicas stay bit-identical.
    The rate drops from iteration 7 (announced inside the interval [6, 7]) or 8 (announced
    between the intervals [6, 7] and [8, 9]): either way the interval [8, 9] is critical, as
    gradcomp-train decides at its boundaries."""
    ranks = run(f"auto:slow:{drop_at}", 2, tmp_path)
    assert ranks[0]["sha256"] == ranks[1]["sha256"]
    assert all(torch.equal(a, b) for a, b in zip(ranks[0]["params"], ranks[1]["params"]))
    hist = ranks[0]["history"]
    assert len(hist) == 12
    assert auto_critical(ranks[1]["history"]) == auto_critical(hist)
    critical = [True] * 4 + [False] * 4 + [True] * 2 + [False] * 2
    slow = worker.SLOW_LINK
    for it, h in enumerate(hist):
        sent = {b["bucket"]: b for b in h["auto"]}
        sizes = sorted(b["numel"] for b in h["auto"])
        assert sizes == ([267146] if it == 0 else [544, 266602]), it
        for b in h["auto"]:
            assert b["critical"] == critical[it], (it, b)
            assert b["whole"] == (it >= 2 and b["numel"] == 544), (it, b)
            if b["whole"]:
                assert (b["method"], b["density"]) == ("dense", 1.0), (it, b)
                continue
            want, _ = reference_choice(b["numel"], slow["alpha_seconds"],
                                       slow["beta_seconds_per_byte"], 2,
                                       slow["select_seconds_per_element"], 0.01, 0.1, 0.1,
                                       critical[it], hook=True)
            assert (b["method"], b["density"]) == (want["method"], want["density"]), (it, b)
            assert b["method"] == "sparse" and b["density"] == (0.1 if critical[it] else 0.01)
        assert h["numel"] == 267146 and len(sent) == len(h["auto"])
        ends = h.get("auto_interval_end")  # at the first iteration of each later interval
        assert (ends is not None) == (it % 2 == 0 and it > 0), it
        if ends:
            assert all(e["critical"] == critical[it] for e in ends), (it, ends)
            assert all(math.isfinite(e["norm"]) and e["norm"] > 0 for e in ends)
    report = ranks[0]["report"]
    assert report["calibration"]["alpha_seconds"] == slow["alpha_seconds"]
    assert report["calibration"]["measured"] is None
    assert [b["numel"] for b in report["buckets"]] in ([266602, 544], [544, 266602])
    # the bound: the smallest buckets within 5 % of 267,146 values (13,357): 544 alone
    assert report["dense_share"] == 0.05 and report["dense_below_elements"] == 266602
    assert gc._core.dense_below_elements([544, 266602], 0.05) == 266602
    assert {b["numel"]: b["decision"]["whole"] for b in report["buckets"]} == \
        {544: True, 266602: False}


def test_auto_on_a_fast_link_is_ddps_allreduce(tmp_path):
    """A fast link and a slow selection: every bucket dense, and the parameters after 8
    iterations equal DDP's own allreduce (no hook): bit for bit, as the hook divides by P and
    then runs gloo's allreduce, as DDP does."""
    ranks = run("auto:fast", 2, tmp_path)
    for r in ranks:
        hist = r["auto"]["history"]
        assert len(hist) == 8
        assert all(b["method"] == "dense" and b["density"] == 1.0
                   for h in hist for b in h["auto"])
        assert all(h["k_selected"] == h["numel"] == 267146 for h in hist)
        for a, b in zip(r["auto"]["params"], r["default"]["params"]):
            assert torch.equal(a, b), (a - b).abs().max()
    assert ranks[0]["auto"]["sha256"] == ranks[1]["auto"]["sha256"]


def test_auto_calibrates_on_the_process_group_with_rank_0s_values(tmp_path):
    ranks = run("auto:calibrate", 2, tmp_path)
    c0, c1 = ranks[0]["report"]["calibration"], ranks[1]["report"]["calibration"]
    for key in ("alpha_seconds", "beta_seconds_per_byte", "select_seconds_per_element"):
        assert c0[key] == c1[key] and math.isfinite(c0[key]) and c0[key] >= 0, key
    assert c0["beta_seconds_per_byte"] > 0 and c0["select_seconds_per_element"] > 0
    measured = c0["measured"]
    assert measured["bytes"] == [4096 * 4**i for i in range(6)]
    assert measured["select_elements"] == 2115  # the first bucket
    # the decisions are the binding's on the agreed calibration, the same on both ranks (no
    # bucket whole: dense_share 0 by default)
    for r in ranks:
        assert r["report"]["dense_share"] == 0.0 and r["report"]["dense_below_elements"] == 0
        for b in r["report"]["buckets"]:
            want = gc._core.choose_exchange(b["numel"], c0["alpha_seconds"],
                                            c0["beta_seconds_per_byte"], 2,
                                            c0["select_seconds_per_element"], 0.01, 0.1, 0.1,
                                            b["critical"], 0.0, value_bytes=4,
                                            indices="delta_varint", hook_rows=True)
            assert b["decision"] == dict(want, whole=False)
    assert auto_critical(ranks[0]["history"]) == auto_critical(ranks[1]["history"])
    for a, b in zip(ranks[0]["outputs"], ranks[1]["outputs"]):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("save,drop", [(5, 4), (6, 5)])
def test_auto_state_dict_resumes_bit_for_bit(tmp_path, save, drop):
    """Saved with a drop announced (mid-interval, or right after an interval whose end then
    waits for the next bucket), residuals and reused thresholds in use, and resumed by a
    HookState without costs: the resumed iterations equal the uninterrupted run's bit for bit,
    with the same decisions (sparse, then dense while critical, then sparse)."""
    ranks = run(f"auto:resume:{save}:{drop}", 2, tmp_path)
    want = [("dense", "sparse")] * 4 + [("sparse", "sparse")] * 2 + [("dense", "sparse")] * 2 + \
        [("sparse", "sparse")] * 2
    for r, res in enumerate(ranks):
        whole = auto_critical(res["whole_history"])
        assert [(it[0][0], it[1][0]) for it in whole] == want, whole
        assert [it[0][2] for it in whole] == [True] * 4 + [False] * 2 + [True] * 2 + [False] * 2
        assert auto_critical(res["resumed_history"]) == whole[save:]
        # the interval ends: the same norms (iteration 4's sum restored), changes and regimes
        assert [h.get("auto_interval_end") for h in res["resumed_history"]] == \
            [h.get("auto_interval_end") for h in res["whole_history"][save:]]
        assert [h["iteration"] for h in res["resumed_history"]] == list(range(save, 10))
        for it, (a, b) in enumerate(zip(res["first"] + res["resumed"], res["whole"])):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), f"rank {r} iteration {it}"
        # and the auto state at the end: calibration, regimes, reused thresholds (with their
        # call counts), accumulations, decisions
        resumed, whole = res["resumed_auto"], res["whole_auto"]
        assert all(torch.equal(a, b) for a, b in zip(resumed.pop("accumulated"),
                                                     whole.pop("accumulated")))
        assert resumed == whole
    # every value sent or kept through the switches between sparse and dense; and bucket 0's
    # dense iterations 6 and 7 sent what iterations 4 and 5 left in its residual: after them
    # nothing is left of its parameters (3 and 2: all of iterations 0-7 sent)
    assert_conserved(ranks, [ranks[0]["whole"]], 10, "auto", rebuilds=False)
    empty = [{"residuals": [torch.zeros(worker.SIZES[i]) for members in worker.layout(0)
                            for i in members]}] * 2
    assert_conserved(empty, [ranks[0]["whole"][:8]], 8, "auto, dense after sparse",
                     rebuilds=False, params=worker.layout(0, rebuilds=False)[0])


@pytest.mark.parametrize("kwargs,message", [
    ({"method": "auto", "critical_density": 0.0}, r"critical_density 0.0 is outside \[density"),
    ({"method": "auto", "density": 0.2, "critical_density": 0.1},
     r"critical_density 0.1 is outside \[density 0.2, 1\]"),
    ({"method": "auto", "eta": 0}, "eta 0 is not finite and > 0"),
    ({"method": "auto", "eta": float("inf")}, "eta inf is not finite and > 0"),
    ({"method": "auto", "min_saving": 1.0}, r"min_saving 1.0 is outside \[0, 1\)"),
    ({"method": "auto", "auto_interval": 0}, "auto_interval 0 is not an integer >= 1"),
    ({"method": "auto", "dense_share": 1.0}, r"dense_share 1.0 is outside \[0, 1\)"),
    ({"method": "auto", "dense_share": -0.1}, r"dense_share -0.1 is outside \[0, 1\)"),
    ({"method": "exact_topk", "dense_share": 0.05},
     "dense_share 0.05 is for method 'auto', not 'exact_topk'"),
    ({"method": "auto", "alpha_seconds": -1.0, "beta_seconds_per_byte": 0.0},
     "alpha_seconds -1.0 is not finite and >= 0"),
    ({"method": "auto", "alpha_seconds": 1e-3}, "give both or neither"),
    ({"method": "auto", "select_seconds_per_element": float("nan")},
     "select_seconds_per_element nan is not finite"),
    ({"method": "auto", "momentum": 0.9}, "momentum correction 0.9 is for the sparse methods; "
                                          "with method 'auto' keep the optimizer's momentum"),
    ({"method": "auto", "merge_buckets": True}, "merge_buckets is not offered with method"),
    ({"method": "auto", "density_warmup": gc.DensityWarmup(10)},
     "density_warmup is for the sparse methods, not 'auto'"),
    ({"method": "exact_topk", "eta": 0.5}, "eta 0.5 is for method 'auto', not 'exact_topk'"),
    ({"method": "fp32", "auto_interval": 5}, "auto_interval 5 is for method 'auto'"),
])
def test_bad_auto_arguments_raise_value_error_naming_the_argument(single_rank, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gc.HookState(**kwargs)


def test_auto_needs_the_sparse_allgather_hook(single_rank):
    state = gc.HookState(method="auto")
    p = torch.nn.Parameter(torch.zeros(10))
    with pytest.raises(ValueError, match="ring_allreduce_hook cannot send method 'auto'"):
        gc.ring_allreduce_hook(state, worker.Bucket(0, [p], [torch.ones(10)], True))
    with pytest.raises(ValueError, match="fp16_hook needs"):
        gc.fp16_hook(state, worker.Bucket(0, [p], [torch.ones(10)], True))
    with pytest.raises(ValueError, match="learning_rate_dropped is for method 'auto'"):
        gc.HookState(method="exact_topk").learning_rate_dropped()
    with pytest.raises(ValueError, match="intervals 0 is not an integer >= 1"):
        state.learning_rate_dropped(0)
    # one rank: nothing measured, every exchange free, so every bucket dense, the average the
    # gradient itself
    fut = gc.sparse_allgather_hook(state, worker.Bucket(0, [p], [torch.arange(10.0)], True))
    assert torch.equal(fut.wait(), torch.arange(10.0))
    assert state.history[0]["auto"] == [{"bucket": 0, "numel": 10, "method": "dense",
                                         "density": 1.0, "critical": True, "whole": False}]
    assert state.dense_share == 0.0 and state.auto_report()["dense_below_elements"] == 0
    with pytest.raises(ValueError, match="option eta is 0.5 in the state dict, 0.25 here"):
        gc.HookState(method="auto", eta=0.25).load_state_dict(state.state_dict())
    # a state dict written before dense_share loads as dense_share 0 (none whole)
    old = state.state_dict()
    del old["options"]["dense_share"]
    del old["auto"]["dense_below"]
    gc.HookState(method="auto").load_state_dict(old)
    with pytest.raises(ValueError, match="option dense_share is 0.0 in the state dict, 0.05 here"):
        gc.HookState(method="auto", dense_share=0.05).load_state_dict(old)
    # a dense bucket is checked too with nonfinite="raise" (the fp32 pass that adds the residual)
    checked = gc.HookState(method="auto", nonfinite="raise")
    nan = torch.ones(10)
    nan[3] = float("nan")
    with pytest.raises(gc._core.NonfiniteError, match="non-finite value nan at index 3 of 10"):
        gc.sparse_allgather_hook(checked, worker.Bucket(0, [p], [nan], True)).wait()
