# SPDX-License-Identifier: Apache-2.0
"""scripts/ddp_train.py (the PyTorch DDP peer of the main job) and scripts/compare-runs.py.

The sample order must be gradcomp-train's exactly (golden values shared with
test/apps/sample_order_test.cpp), the shards DistributedSampler's layout, and the network's
initial weights gradcomp-train's: a no-communication run of each on the same data starts from the
same test loss. Runs use 2 local ranks on a few hundred samples (mpiexec as the launcher).
"""
import json
import os
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import DistributedSampler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import ddp_train  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
MPIEXEC = os.environ.get("GRADCOMP_MPIEXEC", "mpiexec")
GRADCOMP_TRAIN = os.environ.get("GRADCOMP_TRAIN", "")


def test_splitmix64_reference_sequence():
    rng = ddp_train.SplitMix64(0)
    assert [rng.next() for _ in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                              0x06C45D188009454F]


def test_golden_values_shared_with_cpp():
    assert ddp_train.epoch_order(60000, 1, 0)[:8] == [56858, 2289, 14309, 49649, 57449, 40485,
                                                       56020, 951]
    assert ddp_train.epoch_order(60000, 1, 2)[:8] == [9975, 15793, 37417, 28440, 5216, 59255,
                                                       46925, 42996]
    s = ddp_train.shard(1001, 4, 3, 7, 1)
    assert len(s) == 251 and s[:6] == [23, 208, 412, 772, 65, 787] and s[-1] == 745


def test_below_is_uniform_and_in_range():
    rng = ddp_train.SplitMix64(42)
    counts = [0] * 7
    for _ in range(70000):
        counts[rng.below(7)] += 1
    assert all(abs(c - 10000) < 560 for c in counts)


@pytest.mark.parametrize("n", [1, 2, 3, 1000])
def test_epoch_order_is_a_permutation(n):
    assert sorted(ddp_train.epoch_order(n, 3, 1)) == list(range(n))


@pytest.mark.parametrize("ranks,n", [(1, 10), (3, 10), (4, 10), (4, 1001)])
def test_shards_follow_distributed_sampler(ranks, n):
    order = ddp_train.epoch_order(n, 5, 0)
    for r in range(ranks):
        positions = list(DistributedSampler(range(n), num_replicas=ranks, rank=r, shuffle=False))
        assert ddp_train.shard(n, ranks, r, 5, 0) == [order[p] for p in positions]


def test_bad_arguments_exit_2():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ddp_train.py"), "--epochs",
                        "0"], capture_output=True, text=True)
    assert p.returncode == 2 and "--epochs 0 is below 1" in p.stderr
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ddp_train.py"),
                        "--test-limit", "-1"], capture_output=True, text=True)
    assert p.returncode == 2 and "--test-limit -1 is below 0" in p.stderr
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ddp_train.py"),
                        "--auto-dense-share", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and "--auto-dense-share 1 is outside [0, 1)" in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--lr-decay", "step"], "--lr-decay step needs --lr-decay-epochs"),
    (["--lr-decay-epochs", "1"], "--lr-decay-epochs needs --lr-decay step"),
    (["--lr-decay", "step", "--lr-decay-epochs", "2,1"],
     "--lr-decay-epochs 1 is not above the one before it, 2"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1", "--lr-decay-factor", "0"],
     "--lr-decay-factor 0 is outside (0, 1]"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1", "--lr-decay-factor", "1.5"],
     "--lr-decay-factor 1.5 is outside (0, 1]"),
    (["--lr-decay", "step", "--lr-decay-epochs", "-1"], "-1 is outside [0, 1e6]"),
    (["--lr-decay", "step", "--lr-decay-epochs", "1,x"], "'x' is not a number"),
])
def test_bad_lr_decay_exits_2_naming_it(args, message):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ddp_train.py"), *args],
                       capture_output=True, text=True)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_lr_decay_text_and_milestones_follow_gradcomp_train():
    a = ddp_train.parse_args(["--lr-decay", "step", "--lr-decay-epochs", "1.5,3",
                              "--lr-decay-factor", "0.5"])
    assert ddp_train.lr_decay_text(a) == "step at 1.5,3 x 0.5"
    assert ddp_train.step_milestones(a, 469) == [703, 1407]  # floor(1.5 x 469), 3 x 469
    assert ddp_train.lr_decay_text(ddp_train.parse_args([])) == "none"


def run_ddp(tmp_path, name, *args, port):
    report = tmp_path / f"{name}.json"
    cmd = [MPIEXEC, "-n", "2", sys.executable, os.path.join(ROOT, "scripts", "ddp_train.py"),
           "--train-limit", "512", "--test-limit", "400", "--epochs", "1", "--evals-per-epoch", "1",
           "--iface", "lo",
           "--master-port", str(port), "--report", str(report), "--label", name, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(report) as f:
        return report, json.load(f)


@pytest.mark.skipif(not os.path.isdir(DATA), reason="dataset-fashion-mnist is not installed")
@pytest.mark.parametrize("exchange,port", [("dense", 29611), ("powersgd", 29612)])
def test_ddp_run_learns_with_identical_replicas(tmp_path, exchange, port):
    _, r = run_ddp(tmp_path, exchange, "--exchange", exchange, "--require-accuracy", "0.3",
                   port=port)
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    assert r["config"]["iterations_per_epoch"] == 8 and len(r["curve"]) == 2
    assert r["per_iteration"]["iteration_ms"]["mean_over_ranks"] > 0
    assert r["config"]["merge"] == ("one bucket" if exchange == "powersgd" else
                                    "25 MiB buckets (first 1 MiB)")
    assert "bytes_sent" not in r["per_iteration"]  # ranks share lo: not measurable


PACKAGE_DIR = os.environ.get("GRADCOMP_PYTHON_PACKAGE_DIR", "")


@pytest.mark.skipif(not (os.path.isdir(DATA) and PACKAGE_DIR),
                    reason="needs the dataset and the built gradcomp.torch package "
                           "(GRADCOMP_PYTHON_PACKAGE_DIR)")
@pytest.mark.parametrize("exchange,port", [("gradcomp", 29617), ("gradcomp-ring", 29618),
                                           ("gradcomp-fp16", 29619)])
def test_ddp_run_with_gradcomp_hooks(tmp_path, exchange, port, monkeypatch):
    """The peer script with gradcomp.torch's hooks (scripts/python-hooks.sh measures them):
    learns, keeps the replicas identical over DDP's default buckets, reports the hook's
    statistics (a sparse exchange sends about its density)."""
    monkeypatch.setenv("PYTHONPATH", PACKAGE_DIR)
    _, r = run_ddp(tmp_path, exchange, "--exchange", exchange, "--require-accuracy", "0.3",
                   port=port)
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    hook = {k: v["mean_over_ranks"] for k, v in r["hook_statistics"].items()}
    assert hook["buckets"] >= 1 and hook["numel"] == r["config"]["parameters"]
    if exchange == "gradcomp":
        assert 0.005 <= hook["density"] <= 0.02
    else:
        assert hook["density"] == 1.0


@pytest.mark.skipif(not (os.path.isdir(DATA) and PACKAGE_DIR),
                    reason="needs the dataset and the built gradcomp.torch package "
                           "(GRADCOMP_PYTHON_PACKAGE_DIR)")
def test_ddp_run_with_the_auto_hook(tmp_path, monkeypatch):
    """--exchange gradcomp --method auto: HookState(method="auto") with the optimizer's
    momentum, intervals of --auto-interval-epochs (0.25 of 8 iterations: 2), and the step decay
    at epoch 0.5 announced to the hook before iteration 4: the interval starting there is
    critical whatever the norms do (as gradcomp-train decides at its boundaries). The report
    holds the calibration, every bucket's candidates and the intervals. DDP's bucket of the
    convolutions (52,096 values, 3.1 % of the CNN) goes whole from the second iteration's
    bound on (--auto-dense-share 0.05; the default 0 sends none whole)."""
    monkeypatch.setenv("PYTHONPATH", PACKAGE_DIR)
    _, r = run_ddp(tmp_path, "auto", "--exchange", "gradcomp", "--method", "auto",
                   "--auto-interval-epochs", "0.25", "--auto-critical-density", "0.2",
                   "--auto-dense-share", "0.05", "--lr-decay", "step", "--lr-decay-epochs", "0.5",
                   "--require-accuracy", "0.3",
                   port=29623)
    assert r["replicas_identical"] and len(set(r["replica_hashes"])) == 1
    assert r["config"]["hook_method"] == "auto" and r["config"]["optimizer_momentum"] == 0.9
    auto = r["auto"]
    assert auto["calibration"]["beta_seconds_per_byte"] > 0
    assert auto["buckets"] and all(b["decision"]["candidates"] for b in auto["buckets"])
    intervals = {i["iteration"]: i["buckets"] for i in auto["intervals"]}
    assert sorted(intervals) == [0, 2, 4, 6]
    assert all(b["critical"] for b in intervals[0] + intervals[2])  # the first two intervals
    assert all(b["critical"] for b in intervals[4])  # the one the drop at iteration 4 starts
    # a critical bucket is sent at --auto-critical-density unless the rule chose dense
    assert all(b["density"] in (0.2, 1.0) for b in intervals[0] + intervals[4])
    assert auto["dense_share"] == 0.05 and auto["dense_below_elements"] > 52096
    for it in (2, 4, 6):
        assert [(b["numel"], b["method"]) for b in intervals[it] if b["whole"]] == \
            [(52096, "dense")], intervals[it]


@pytest.mark.skipif(not (os.path.isdir(DATA) and GRADCOMP_TRAIN),
                    reason="needs gradcomp-train (GRADCOMP_TRAIN) and the dataset")
@pytest.mark.parametrize("model,port", [("cnn", 29613), ("vgg", 29620), ("mlp", 29621)])
def test_same_initial_model_and_data_as_gradcomp_train(tmp_path, model, port):
    """No-communication runs of both programs: identical weights and test data give the same
    test loss before training, and the same batches and update rule the same after."""
    _, ours_py = run_ddp(tmp_path, "py", "--exchange", "none", "--model", model, port=port)
    report = tmp_path / "cpp.json"
    p = subprocess.run([MPIEXEC, "-n", "2", GRADCOMP_TRAIN, "--transport", "none", "--merge",
                        "single", "--train-limit", "512", "--test-limit", "400", "--epochs", "1",
                        "--evals-per-epoch", "1", "--model", model, "--report", str(report)],
                       capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    with open(report) as f:
        cpp = json.load(f)
    assert cpp["config"]["parameters"] == ours_py["config"]["parameters"]
    assert cpp["config"]["test_samples"] == ours_py["config"]["test_samples"] == 400
    assert cpp["curve"][0]["test_loss"] == pytest.approx(ours_py["curve"][0]["test_loss"], rel=1e-6)
    assert cpp["curve"][0]["test_accuracy"] == ours_py["curve"][0]["test_accuracy"]
    # the same batches, optimizer and kernels: measured bit-identical after training too
    assert cpp["curve"][1]["test_loss"] == pytest.approx(ours_py["curve"][1]["test_loss"], rel=1e-6)


@pytest.mark.skipif(not (os.path.isdir(DATA) and GRADCOMP_TRAIN),
                    reason="needs gradcomp-train (GRADCOMP_TRAIN) and the dataset")
def test_step_decay_matches_gradcomp_train(tmp_path):
    """--lr-decay step --lr-decay-epochs 0.5 in both programs (8 iterations per epoch: the rate
    drops from iteration 4 on): no-communication runs end with the same test loss, which the
    constant rate does not give."""
    decay = ["--lr-decay", "step", "--lr-decay-epochs", "0.5", "--lr-decay-factor", "0.1"]
    _, py = run_ddp(tmp_path, "py", "--exchange", "none", *decay, port=29622)
    ends = {}
    for name, extra in (("step", decay), ("constant", [])):
        report = tmp_path / f"cpp-{name}.json"
        p = subprocess.run([MPIEXEC, "-n", "2", GRADCOMP_TRAIN, "--transport", "none", "--merge",
                            "single", "--train-limit", "512", "--test-limit", "400", "--epochs",
                            "1", "--evals-per-epoch", "1", "--report", str(report), *extra],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert p.returncode == 0, p.stdout + p.stderr
        with open(report) as f:
            ends[name] = json.load(f)
    assert py["config"]["lr_decay"] == ends["step"]["config"]["lr_decay"] == "step at 0.5 x 0.1"
    end = py["curve"][1]["test_loss"]
    assert ends["step"]["curve"][1]["test_loss"] == pytest.approx(end, rel=1e-6)
    assert ends["constant"]["curve"][1]["test_loss"] != pytest.approx(end, rel=1e-3)


@pytest.mark.skipif(not os.path.isdir(DATA), reason="dataset-fashion-mnist is not installed")
def test_compare_runs_uses_only_this_invocation(tmp_path):
    since = time.time() - 1
    dense, _ = run_ddp(tmp_path, "dense", "--exchange", "dense", port=29614)
    floor, _ = run_ddp(tmp_path, "floor", "--exchange", "none", port=29615)
    fp16, _ = run_ddp(tmp_path, "fp16", "--exchange", "fp16", port=29616)
    script = os.path.join(ROOT, "scripts", "compare-runs.py")
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path / "cmp"), "--since",
                        str(since), str(dense), str(fp16), str(floor)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "| | dense | fp16 | floor |" in text
    assert "x as fast as **dense**" in text and "x of floor" in text
    assert (tmp_path / "cmp" / "accuracy-vs-time.svg").read_text().startswith("<svg")
    # a common target: the highest accuracy that both runs with communication reach
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path / "cmp3"), "--target-common",
                        str(dense), str(fp16), str(floor)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    runs = [json.loads(open(f).read()) for f in (dense, fp16)]
    common = min(max(q["test_accuracy"] for q in r["curve"]) for r in runs)
    assert f"to reach {100 * common:.2f} % (the highest accuracy every run reaches)" in p.stdout
    os.utime(dense, (since - 100, since - 100))  # a report from before the invocation
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path / "cmp2"), "--since",
                        str(since), str(dense), str(fp16)], capture_output=True, text=True)
    assert p.returncode == 2 and "before this invocation" in p.stderr


@pytest.mark.skipif(not (os.path.isdir(DATA) and GRADCOMP_TRAIN),
                    reason="needs gradcomp-train (GRADCOMP_TRAIN) and the dataset")
def test_target_accuracy_stops_both_programs_at_the_same_evaluation(tmp_path):
    """--target-accuracy A: both programs stop at the first evaluation whose accuracy reaches A
    (no-communication runs: the same curve), report the training time there, and compare-runs
    --target-accuracy puts every run's time to it side by side; unreached, the run trains the
    cap and reports null."""
    common = ["--train-limit", "512", "--test-limit", "400", "--epochs", "2",
              "--evals-per-epoch", "4", "--eval-stages", "1"]

    def cpp(name, *extra, transport="none"):
        report = tmp_path / f"{name}.json"
        p = subprocess.run([MPIEXEC, "-n", "2", GRADCOMP_TRAIN, "--transport", transport,
                            "--merge", "single", *common, "--report", str(report),
                            "--label", name, *extra],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert p.returncode == 0, p.stdout + p.stderr
        with open(report) as f:
            return report, json.load(f), p.stderr

    _, full, _ = cpp("full")
    accuracies = [q["test_accuracy"] for q in full["curve"]]
    assert len(accuracies) == 9  # the initial evaluation and 8 in 2 epochs
    # the target: an accuracy first reached at a point k >= 2 (above every earlier point)
    k = next(i for i in range(2, 9) if accuracies[i] > max(accuracies[:i]))
    target = accuracies[k]
    report, stopped, log = cpp("stopped", "--target-accuracy", repr(target))
    assert len(stopped["curve"]) == k + 1 and stopped["config"]["stopped_early"]
    assert stopped["time_to_target_seconds"] == stopped["curve"][k]["train_seconds"]
    assert stopped["epochs_to_target"] == full["curve"][k]["epochs_done"]
    assert [q["test_loss"] for q in stopped["curve"]] == [q["test_loss"] for q in full["curve"][:k + 1]]
    assert "reached --target-accuracy" in log
    assert stopped["eval_seconds"] > 0 and all(q["eval_seconds"] > 0 for q in stopped["curve"])
    py_report, py = run_ddp(tmp_path, "py", "--exchange", "none", "--epochs", "2",
                            "--evals-per-epoch", "4", "--eval-stages", "1",
                            "--target-accuracy", repr(target), port=29623)
    assert len(py["curve"]) == k + 1
    assert py["epochs_to_target"] == stopped["epochs_to_target"]
    assert py["curve"][k]["test_loss"] == pytest.approx(stopped["curve"][k]["test_loss"], rel=1e-6)
    _, unreached, _ = cpp("unreached", "--target-accuracy", "0.999")
    assert unreached["time_to_target_seconds"] is None and len(unreached["curve"]) == 9
    # compare-runs: runs with communication (the floors are iteration-time references only)
    ring_report, ring, _ = cpp("ring", "--target-accuracy", repr(target), transport="ring")
    # a run that stopped before the target: the ring run's report cut after its initial point
    never = dict(ring, label="never", curve=ring["curve"][:1])
    never_report = tmp_path / "never.json"
    never_report.write_text(json.dumps(never))
    script = os.path.join(ROOT, "scripts", "compare-runs.py")
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path / "cmp"),
                        "--target-accuracy", repr(target), str(ring_report), str(never_report),
                        str(report)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"**Time to {100 * target:.2f} % test accuracy**" in p.stdout
    t = ring["time_to_target_seconds"]
    assert t is not None and f"| ring | {t:.1f} s | - | - |" in p.stdout
    assert "| never | not reached in 2 epochs | - | - |" in p.stdout
    assert "| stopped |" not in p.stdout.split("**Time to")[1].split("\n\n")[1]
    assert f"target {100 * target:.1f} %" in (tmp_path / "cmp" / "accuracy-vs-time.svg").read_text()


@pytest.mark.skipif(not (os.path.isdir(DATA) and GRADCOMP_TRAIN),
                    reason="needs gradcomp-train (GRADCOMP_TRAIN) and the dataset")
def test_staged_evaluations_stop_early_alike_in_both_programs(tmp_path):
    """--eval-stages 4 with a target far above the curve: every evaluation between epoch ends
    stops after its first quarter of the (randomly ordered) test set, in both programs alike
    (same images, same loss); the initial and epoch-end evaluations see the whole set and equal
    those of an unstaged run, whose training the evaluations do not change."""
    common = ["--train-limit", "512", "--test-limit", "400", "--epochs", "2",
              "--evals-per-epoch", "4", "--target-accuracy", "0.999"]

    def cpp(name, *extra):
        report = tmp_path / f"{name}.json"
        p = subprocess.run([MPIEXEC, "-n", "2", GRADCOMP_TRAIN, "--transport", "none",
                            "--merge", "single", *common, "--report", str(report), *extra],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert p.returncode == 0, p.stdout + p.stderr
        with open(report) as f:
            return json.load(f), p.stderr

    staged, log = cpp("staged", "--eval-stages", "4")
    whole, _ = cpp("whole", "--eval-stages", "1")
    samples = [q["test_samples"] for q in staged["curve"]]
    assert samples == [400, 100, 100, 100, 400, 100, 100, 100, 400]
    assert [q["test_samples"] for q in whole["curve"]] == [400] * 9
    assert "stopped early: 100 test images" in log
    for q, w in zip(staged["curve"], whole["curve"]):
        assert q["train_loss"] == w["train_loss"]  # the same training
        if q["test_samples"] == 400:
            assert q["test_loss"] == w["test_loss"]
    _, py = run_ddp(tmp_path, "py", "--exchange", "none", "--epochs", "2", "--evals-per-epoch",
                    "4", "--target-accuracy", "0.999", "--eval-stages", "4", port=29624)
    assert [q["test_samples"] for q in py["curve"]] == samples
    for q, c in zip(py["curve"], staged["curve"]):
        assert q["test_loss"] == pytest.approx(c["test_loss"], rel=1e-6)


def load_compare_runs():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "compare_runs", os.path.join(ROOT, "scripts", "compare-runs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_runs_times_the_iterations_outside_critical_phases():
    """compare-runs' auto row: rank 0's training seconds over the intervals in which no group
    was critical (the last interval ends at the report's end), by hand."""
    cr = load_compare_runs()
    report = {"train_seconds": 5.5, "curve": [{"iteration": 0}, {"iteration": 30}],
              "auto": {"intervals": [
                  {"iteration": 0, "train_seconds": 1.0, "critical": [True, False]},
                  {"iteration": 10, "train_seconds": 3.0, "critical": [False, False]},
                  {"iteration": 20, "train_seconds": 4.0, "critical": [False, False]}]}}
    assert cr.noncritical_ms(report) == pytest.approx(1000 * (1.0 + 1.5) / 20)
    report["auto"]["intervals"][2]["critical"] = [False, True]
    assert cr.noncritical_ms(report) == pytest.approx(1000 * 1.0 / 10)
    for i in report["auto"]["intervals"]:
        i["critical"] = [True]
    assert cr.noncritical_ms(report) is None  # no interval outside a critical phase
    assert cr.noncritical_ms({"train_seconds": 1.0, "curve": [{"iteration": 5}]}) is None
