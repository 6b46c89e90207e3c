# SPDX-License-Identifier: Apache-2.0
"""gradcomp-train --parallel hybrid (S2; docs/hybrid.md), end to end.

Running fc1 model parallel computes the same mathematics as data parallelism (only the order of
fp32 sums differs), so after the same steps its loss and accuracy must match the data-parallel
run closely; the data-parallel parameters stay bit-identical across ranks; the model-parallel
slices, gathered into the full layer, give the same outputs as the hybrid model. Uneven splits
(fc2's 10 outputs over 3 ranks) and a compressed data-parallel part work too. Bad values exit
with status 2 naming them.
"""
from train_runner import load, needs_train
from train_runner import run as run_train

pytestmark = needs_train


def run(tmp_path, name, ranks, *args):
    return run_train(tmp_path, name, ranks, *args, evals_per_epoch=1)


def test_fc1_model_parallel_matches_data_parallel(tmp_path):
    common = ["--method", "dense", "--transport", "ring", "--merge", "optimal"]
    p, data = run(tmp_path, "data", 2, *common)
    assert p.returncode == 0, p.stdout + p.stderr
    p, hybrid = run(tmp_path, "hybrid", 2, *common, "--parallel", "hybrid", "--mp-layers", "fc1")
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = load(data), load(hybrid)
    layers = {d["layer"]: d["parallelism"] for d in b["config"]["hybrid_layers"]}
    assert layers == {"fc1": "model", "fc2": "data"}
    assert b["replicas_identical"]
    assert b["config"]["model_parallel_check_max_difference"] < 1e-4
    assert abs(a["final_test_loss"] - b["final_test_loss"]) < 1e-3
    assert abs(a["final_test_accuracy"] - b["final_test_accuracy"]) <= 0.005
    # fc1's 1.6 M gradients leave the allreduce; its activations travel instead
    sent_data = a["per_iteration"]["bytes_sent"]["mean_over_ranks"]
    sent_hybrid = b["per_iteration"]["bytes_sent"]["mean_over_ranks"]
    assert sent_hybrid < 0.1 * sent_data
    assert b["config"]["model_parallel_sent_bytes_per_iteration"] > 0


def test_uneven_split_with_a_compressed_data_parallel_part(tmp_path):
    p, report = run(tmp_path, "uneven", 3, "--method", "exact_topk", "--density", "0.05",
                    "--transport", "allgather", "--parallel", "hybrid", "--mp-layers", "fc1,fc2")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    assert r["replicas_identical"]
    assert r["config"]["model_parallel_check_max_difference"] < 1e-4
    assert r["final_test_accuracy"] > 0.3  # learns (10 % is chance)


def test_auto_prices_the_whole_iteration_and_splits_what_it_reports(tmp_path):
    p, report = run(tmp_path, "auto", 2, "--method", "dense", "--transport", "ring", "--merge",
                    "optimal", "--parallel", "hybrid", "--mp-layers", "auto")
    assert p.returncode == 0, p.stdout + p.stderr
    r = load(report)
    plan = r["config"]["hybrid_plan"]
    # the chosen set is the fastest of all sets, every layer data parallel among them
    assert 0 < plan["predicted_iteration_seconds"] <= plan["data_parallel_predicted_iteration_seconds"]
    assert plan["model_parallel_fixed_seconds"] >= 0 and plan["seconds"] > 0
    layers = r["config"]["hybrid_layers"]
    assert [d["layer"] for d in layers] == ["fc1", "fc2"]
    for d in layers:  # fc2's 10 outputs split over 2 ranks too: both are candidates
        assert d["parallelism"] == d["by_iteration"]
    model_parallel = [d["layer"] for d in layers if d["parallelism"] == "model"]
    # what the report says is split is what left the data-parallel exchange
    exchanged = sum(group["elements"] for group in r["plan"]["groups"])
    full = 1_663_370  # the CNN's parameters
    split = {"fc1": 3136 * 512 + 512, "fc2": 512 * 10 + 10}
    assert exchanged == full - sum(split[name] for name in model_parallel)
    assert r["replicas_identical"]
    if model_parallel:
        assert r["config"]["model_parallel_check_max_difference"] < 1e-4
    assert "hybrid plan (" in p.stderr


def test_bad_hybrid_options_exit_2(tmp_path):
    p, _ = run(tmp_path, "name", 2, "--parallel", "hybrid", "--mp-layers", "fc9")
    assert p.returncode == 2 and "'fc9' is not a fully connected layer" in p.stderr
    p, _ = run(tmp_path, "coded", 3, "--parallel", "hybrid", "--transport", "coded",
               "--redundancy", "2")
    assert p.returncode == 2 and "--parallel" in p.stderr
