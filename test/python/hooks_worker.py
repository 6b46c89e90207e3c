# SPDX-License-Identifier: Apache-2.0
"""One rank of the gradcomp.torch hook tests (test_hooks.py launches WORLD_SIZE of them).

    hooks_worker.py SCENARIO OUT_DIR     (env: RANK, WORLD_SIZE, INIT_FILE, PYTHONPATH)

Scenarios call the hooks directly with buckets laid out by the test (so a reference can follow
every value), or train a small model under DDP. Each rank writes OUT_DIR/rank<r>.pt.
"""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

import gradcomp.torch as gc
import package_under_test  # this file's directory is sys.path[0] (run) or on it (imported)

package_under_test.check_installed(gc)  # GRADCOMP_TEST_INSTALLED=1: not the repository's copy


class Bucket:
    """Stands in for torch.distributed.GradBucket: DDP's buffer is the concatenation of the
    bucket's gradients."""

    def __init__(self, index, params, grads, last):
        self._index, self._params, self._last = index, params, last
        self._buffer = torch.cat([g.reshape(-1) for g in grads])

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._params

    def index(self):
        return self._index

    def is_last(self):
        return self._last


SIZES = [1003, 517, 64, 2051]


def gradients(rank, iteration):
    g = torch.Generator().manual_seed(1000 * iteration + rank)
    return [torch.randn(n, generator=g) for n in SIZES]


def layout(iteration, rebuilds=True):
    """Bucket layouts: DDP's first iteration, then a rebuilt one (other buckets, other order);
    with rebuilds=False the first layout throughout."""
    if iteration == 0 or not rebuilds:
        return [[3, 2], [1, 0]]
    return [[1, 3], [0], [2]]


def run_buckets(state, hook, params, rank, iterations, first=0, rebuilds=True):
    """Iterations first.. of the scenario's gradients; the bucket layout starts anew with each
    state, as with a new DDP object after a restart."""
    out = []
    for it in range(first, first + iterations):
        grads = gradients(rank, it)
        groups = layout(it - first, rebuilds)
        futures = []
        for b, members in enumerate(groups):
            bucket = Bucket(b, [params[i] for i in members], [grads[i] for i in members],
                            b == len(groups) - 1)
            futures.append(hook(state, bucket))
        out.append([f.wait().clone() for f in futures])
    return out


# method="auto"'s hand-made cost models (2 ranks), priced as the hook sends (one all_gather of
# padded rows against the ring's two steps): a slow link (1 ms per message step, 100 MB/s) on
# which every bucket pays to be sparse (a DDP bucket of 266,602 values and one of 544); a slower
# selection (70 ns per value, 0.1 ms per step) on which the hand-made buckets of 2115 values go
# sparse at density 0.01 and dense at 0.1, those of 1520 sparse at both; a fast link (1 us,
# 10 GB/s, a slow selection) on which nothing pays
SLOW_LINK = {"alpha_seconds": 1e-3, "beta_seconds_per_byte": 1e-8,
             "select_seconds_per_element": 1e-9}
SLOW_SELECTION = {"alpha_seconds": 1e-4, "beta_seconds_per_byte": 1e-8,
                  "select_seconds_per_element": 7e-8}
FAST_LINK = {"alpha_seconds": 1e-6, "beta_seconds_per_byte": 1e-10,
             "select_seconds_per_element": 1e-8}


def auto_model():
    """Rebuilt by DDP into two buckets: the last three layers (266,602 values, closing the
    first 1 MiB bucket) and the first layer (544 values)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 10))


def train_auto(rank, iterations, extra, interval=2, drop_at=None):
    """`iterations` of SGD on auto_model() under DDP with HookState(method="auto", interval,
    **extra) and sparse_allgather_hook (extra None: DDP's own allreduce, no hook); MultiStepLR
    drops the rate tenfold from iteration `drop_at` (None: never) and the hook is told."""
    model = auto_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    state = None
    if extra is not None:
        state = gc.HookState(method="auto", density=0.01, auto_interval=interval,
                             **extra)  # collective; extra: the tests' costs (none: calibrated)
        ddp.register_comm_hook(state, gc.sparse_allgather_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(opt, [drop_at or iterations + 1], 0.1)
    g = torch.Generator().manual_seed(rank)
    for _ in range(iterations):
        x, y = torch.randn(16, 16, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        lr = scheduler.get_last_lr()[0]
        scheduler.step()
        if scheduler.get_last_lr()[0] < lr:  # the scheduler dropped the learning rate
            state.learning_rate_dropped()  # Accordion: the next interval is critical
    params = [p.detach().clone() for p in model.parameters()]
    digest = hashlib.sha256(b"".join(p.numpy().tobytes() for p in params)).hexdigest()
    return {"params": params, "sha256": digest,
            "history": state.history if state is not None else None,
            "report": state.auto_report() if state is not None else None}


def main():
    scenario, out_dir = sys.argv[1], sys.argv[2]
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + os.environ["INIT_FILE"],
                            rank=rank, world_size=size)
    params = [torch.nn.Parameter(torch.zeros(n)) for n in SIZES]
    result = {}
    if scenario.startswith("buckets:"):
        _, hook_name, method, momentum = scenario.split(":")
        kwargs = {"method": method, "density": 0.05}
        if momentum != "0":
            kwargs["momentum"] = float(momentum.split("-")[0])
        if momentum.endswith("-kept"):  # momentum correction without factor masking
            kwargs["factor_masking"] = False
        state = gc.HookState(**kwargs)
        hook = getattr(gc, hook_name)
        result["outputs"] = run_buckets(state, hook, params, rank, 3)
        result["history"] = state.history
        result["residuals"] = [s.clone() for s in state.state_dict()["residuals"]]
    elif scenario.startswith("merged:"):
        # the same buckets through the default and through merge_buckets=True
        _, method = scenario.split(":")
        for name, merge in (("plain", False), ("merged", True)):
            momentum = 0.9 if method in gc.SPARSE_METHODS else None
            state = gc.HookState(method=method, density=0.05, momentum=momentum,
                                 merge_buckets=merge)
            result[name] = run_buckets(state, gc.sparse_allgather_hook, params, rank, 3)
            result[name + "_history"] = state.history
            result[name + "_residuals"] = [s.clone() for s in state.state_dict()["residuals"]]
        state = gc.HookState(method="fp32", merge_buckets=True)
        try:
            run_buckets(state, gc.ring_allreduce_hook, params, rank, 1)
            result["ring"] = "ok"
        except Exception as e:
            result["ring"] = f"{type(e).__name__}: {e}"
    elif scenario.startswith("resume:"):
        rebuilds = scenario == "resume:rebuilds"
        # with momentum correction where the layouts stay (bit-identity covers the velocity);
        # without where they change (the test then checks a conservation sum)
        options = {"method": "exact_topk", "density": 0.05, "momentum": None if rebuilds else 0.9}
        state = gc.HookState(**options)
        result["first"] = run_buckets(state, gc.sparse_allgather_hook, params, rank, 2, 0,
                                      rebuilds)
        saved = state.state_dict()
        fresh = gc.HookState(**options)
        fresh.load_state_dict(saved)  # before the hooks saw any parameter
        result["resumed"] = run_buckets(fresh, gc.sparse_allgather_hook, params, rank, 2, 2,
                                        rebuilds)
        result["residuals"] = fresh.state_dict()["residuals"]
        whole = gc.HookState(**options)
        result["whole"] = run_buckets(whole, gc.sparse_allgather_hook, params, rank, 4, 0,
                                      rebuilds)[2:]
    elif scenario == "warmup":
        # DGC's density warm-up, 2 iterations per epoch over 2 epochs from 0.5 to 0.05; then a
        # state saved after 3 iterations and resumed goes on at iteration 3's density
        def options():
            return {"method": "exact_topk", "density": 0.05,
                    "density_warmup": gc.DensityWarmup(2, epochs=2, initial_density=0.5)}
        state = gc.HookState(**options())
        result["outputs"] = run_buckets(state, gc.sparse_allgather_hook, params, rank, 5)
        result["history"] = state.history
        result["residuals"] = [s.clone() for s in state.state_dict()["residuals"]]
        first = gc.HookState(**options())
        run_buckets(first, gc.sparse_allgather_hook, params, rank, 3, 0, False)
        resumed = gc.HookState(**options())
        resumed.load_state_dict(first.state_dict())
        result["resumed"] = run_buckets(resumed, gc.sparse_allgather_hook, params, rank, 2, 3,
                                        False)
        result["resumed_history"] = resumed.history
        whole = gc.HookState(**options())
        result["whole"] = run_buckets(whole, gc.sparse_allgather_hook, params, rank, 5, 0,
                                      False)[3:]
    elif scenario.startswith("nonfinite:"):
        # every rank: a NaN in parameter 2 (alone in the last bucket of the rebuilt layout)
        _, hook_name, method, *merge = scenario.split(":")
        state = gc.HookState(method=method, density=0.05, nonfinite="raise", history_limit=1,
                             merge_buckets=merge == ["merged"])
        hook = getattr(gc, hook_name)
        outcomes = []
        for it in range(2):
            grads = gradients(rank, it)
            if it == 1:
                grads[2][5] = float("nan")
            groups = layout(it)
            futures = [hook(state, Bucket(b, [params[i] for i in members],
                                          [grads[i] for i in members], b == len(groups) - 1))
                       for b, members in enumerate(groups)]
            for f in futures:
                try:
                    f.wait()
                    outcomes.append("ok")
                except Exception as e:  # DDP raises the hook's exception in backward
                    outcomes.append(f"{type(e).__name__}: {e}")
        result["outcomes"] = outcomes
        result["history"] = state.history
    elif scenario.startswith("ddp:"):
        _, hook_name, method, *merge = scenario.split(":")
        torch.manual_seed(0)
        # 2.2 MB of parameters: DDP's first iteration has one bucket, its rebuilt buckets
        # (first one 1 MiB, then bucket_cap_mb) several
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10))
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.25)
        state = gc.HookState(method=method, density=0.05, merge_buckets=merge == ["merged"])
        ddp.register_comm_hook(state, getattr(gc, hook_name))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        for _ in range(6):
            x, y = torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        result["params"] = [p.detach().clone() for p in model.parameters()]
        result["history"] = state.history
    elif scenario.startswith("auto:slow:"):
        # 12 iterations in intervals of 2; eta so high that no norm change is critical: the
        # first two intervals are, and after the drop the interval [8, 9]: a drop from
        # iteration 7 (announced mid-interval) or 8 (announced right after the interval [6, 7])
        drop_at = int(scenario.split(":")[2])
        result.update(train_auto(rank, 12, dict(SLOW_LINK, eta=1e6, dense_share=0.05),
                                 drop_at=drop_at))
    elif scenario == "auto:fast":
        result["auto"] = train_auto(rank, 8, FAST_LINK)
        result["default"] = train_auto(rank, 8, None)
    elif scenario == "auto:calibrate":
        state = gc.HookState(method="auto")  # calibrates at the first bucket
        result["outputs"] = run_buckets(state, gc.sparse_allgather_hook, params, rank, 2, 0,
                                        False)
        result["report"] = state.auto_report()
        result["history"] = state.history
    elif scenario.startswith("auto:resume:"):
        # bucket 0 (2115 values) sparse at 0.01 when normal, dense when critical; bucket 1
        # (1520) sparse at 0.01 and 0.1; intervals of 2, no norm change critical, a drop
        # announced after iteration DROP: saved after SAVE iterations ("auto:resume:SAVE:DROP";
        # 5:4: mid-interval, the drop pending, iteration 4 accumulated; 6:5: at the boundary,
        # the drop and the end of the interval [4, 5] pending), residuals and reused thresholds
        # in use, resumed by a HookState without costs (the state's calibration is used: no
        # collective, the same decisions)
        save, drop = (int(x) for x in scenario.split(":")[2:])
        options = dict(auto_interval=2, eta=1e6, density=0.01)

        def iterations(state, first, count, drop_after=None):
            out = []
            for it in range(first, first + count):
                out += run_buckets(state, gc.sparse_allgather_hook, params, rank, 1, it, False)
                if it == drop_after:
                    state.learning_rate_dropped()
            return out

        first = gc.HookState(method="auto", **options, **SLOW_SELECTION)
        result["first"] = iterations(first, 0, save, drop_after=drop)
        saved = first.state_dict()
        resumed = gc.HookState(method="auto", **options)
        resumed.load_state_dict(saved)
        result["resumed"] = iterations(resumed, save, 10 - save)
        result["resumed_history"] = resumed.history
        whole = gc.HookState(method="auto", **options, **SLOW_SELECTION)
        result["whole"] = iterations(whole, 0, 10, drop_after=drop)
        result["whole_history"] = whole.history
        result["residuals"] = [s.clone() for s in whole.state_dict()["residuals"]]
        result["whole_auto"] = whole.state_dict()["auto"]
        result["resumed_auto"] = resumed.state_dict()["auto"]
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    # Leave at once, without destroying the DDP models: with PyTorch 1.13 a process can hang at
    # exit in the DDP Reducer's ProcessGroupGloo destructor (it holds the GIL and waits for
    # gloo's work thread, which waits for the GIL to free a tensor)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
