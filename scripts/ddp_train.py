#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch DDP over gloo on the main job's model and data: the peer that gradcomp-train is
measured against in the same invocation (scripts/main-job.sh, scripts/reproduce.sh).

Trains exactly what gradcomp-train trains with the same options: the same networks (built in
the same order after torch.manual_seed(seed), so the initial weights are identical), the same
normalised Fashion-MNIST tensors, the same sample order and shards (apps/common/
sample_order.hpp, reproduced below), batch, learning rate (and its step decay: --lr-decay),
momentum, epochs and evaluation points; and writes a report in gradcomp-train's JSON layout,
so scripts/compare-runs.py puts the runs side by side. Gradient exchange (--exchange):

  dense     DDP's default allreduce hook (buckets of --bucket-mib MiB, DDP's first bucket 1 MiB)
  fp16      DDP's fp16_compress_hook (default_hooks)
  powersgd  DDP's PowerSGD hook (Vogels et al., NeurIPS 2019) of rank --powersgd-rank, error
            feedback and warm start on, dense for the first --powersgd-start-iter iterations;
            one bucket (with DDP's two default buckets its gloo collectives were started in
            different orders on different ranks and crashed in the project's runs)
  none      no DDP, no gradient exchange: every rank trains alone on its shard (the floor)
  gradcomp       gradcomp's sparse_allgather_hook (gradcomp.torch, docs/python.md): --method
                 (default reused_threshold) at --density with error feedback; with
                 --momentum-correction true (the default, as gradcomp-train's) and a sparse
                 method DGC's momentum correction runs inside the hook and the optimizer steps
                 without momentum, as gradcomp-train does (--factor-masking false keeps the
                 velocity of sent values); --density-warmup-epochs E: DGC's density warm-up
                 in the hook (gradcomp.torch.DensityWarmup); --method auto:
                 HookState(method="auto"), per bucket dense or sparse by gradcomp's rule, the
                 optimizer's momentum, intervals of --auto-interval-epochs, and
                 learning_rate_dropped() called when --lr-decay lowers the rate
  gradcomp-ring  gradcomp's ring_allreduce_hook, fp32 values (a dense ring over gloo)
  gradcomp-fp16  gradcomp's fp16_hook (fp16 values with error feedback, fp32 partial sums)
The gradcomp hooks run with DDP's default buckets (several: --bucket-mib, first 1 MiB); the
report adds the hook's statistics (bytes, achieved density, compression seconds). They need the
gradcomp.torch package: build it and put <build>/python on PYTHONPATH.

Launch one process per rank with mpiexec as a plain process launcher (the script reads hydra's
PMI_RANK / PMI_SIZE, or torchrun's RANK / WORLD_SIZE; MPI itself is not used):

  OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo mpiexec -n 4 /usr/bin/python3 scripts/ddp_train.py \\
      --master-addr 127.0.0.1 --exchange dense --epochs 1 --report ddp.json

On the emulated cluster: scripts/emulated-cluster.sh run --hosts 4 -- /usr/bin/python3
scripts/ddp_train.py --master-addr <host 1's address> --iface eth0 ... (scripts/main-job.sh).
Bytes sent are measured on the network interface (--iface, its tx_bytes over the training
iterations: wire bytes, headers included) when each rank has its own interface; with plain
local ranks sharing `lo` they cannot be told apart and are reported as null.

Needs Debian's python3-torch (PyTorch 1.13): run it with /usr/bin/python3.
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import sys
import time

MASK64 = (1 << 64) - 1
GRADCOMP_HOOKS = ["gradcomp", "gradcomp-ring", "gradcomp-fp16"]
KEEP_ALIVE = []  # the DDP model, destroyed by no one: see the end of the file
HOOK_KEYS = ["buckets", "numel", "k_selected", "wire_bytes", "sent_bytes", "compression_seconds",
             "exchange_seconds"]


# ---- the sample order of apps/common/sample_order.hpp ---------------------------------
class SplitMix64:
    """splitmix64 (Steele, Lea and Flood, OOPSLA 2014), as in sample_order.hpp."""

    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        """Uniform integer in [0, bound): Lemire's multiply-and-reject (ACM TOMACS 2019)."""
        product = self.next() * bound
        low = product & MASK64
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                product = self.next() * bound
                low = product & MASK64
        return product >> 64


# Test images per forward pass of an evaluation, as gradcomp-train's evaluation_batch (a batch of
# 1000 cost 2.4x as much per image in one process)
EVALUATION_BATCH = 100

def epoch_order(n, seed, epoch):
    """The epoch's permutation of 0 .. n-1 (Fisher-Yates driven by splitmix64(seed * 1000003 +
    epoch)), identical to gradcomp_apps::epoch_order."""
    order = list(range(n))
    rng = SplitMix64(seed * 1000003 + epoch)
    for i in range(n, 1, -1):
        j = rng.below(i)
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


# Staged evaluation (gradcomp_apps::test_order_seed, can_stop_early in
# apps/common/staged_evaluation.hpp): the test set in a fixed random order, evaluated in parts
# that stop once the accuracy so far plus 3 standard errors is below the target.
TEST_ORDER_SEED = 0x7E57
EARLY_STOP_STANDARD_ERRORS = 3.0


def stage_range(begin, end, s, stages):
    """Stage s of `stages` of [begin, end) (gradcomp_apps::stage_range)."""
    length = end - begin
    return begin + length * s // stages, begin + length * (s + 1) // stages


def can_stop_early(correct, seen, total, target):
    """Whether the accuracy of `seen` random test images plus 3 standard errors of such a sample
    (drawn without replacement from `total`) is below `target` (gradcomp_apps::can_stop_early)."""
    if target <= 0 or seen <= 0 or seen >= total:
        return False
    p = correct / seen
    se = math.sqrt(p * (1 - p) / seen * (total - seen) / (total - 1))
    return p + EARLY_STOP_STANDARD_ERRORS * se < target


def shard(n, ranks, rank, seed, epoch):
    """DistributedSampler's shard of rank `rank`: positions rank, rank + P, ... of the epoch's
    permutation padded by wrapping (gradcomp_apps::shard)."""
    order = epoch_order(n, seed, epoch)
    per_rank = (n + ranks - 1) // ranks
    return [order[(j * ranks + rank) % n] for j in range(per_rank)]


# ---- data and networks (apps/common/fashion_mnist.hpp) -----------------------------------
def read_idx(path, dims):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        b = f.read()
    if len(b) < 4 or b[0] != 0 or b[1] != 0 or b[2] != 8 or b[3] != dims:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes with {dims} dimensions")
    shape = [int.from_bytes(b[4 + 4 * d:8 + 4 * d], "big") for d in range(dims)]
    header = 4 + 4 * dims
    count = 1
    for s in shape:
        count *= s
    if len(b) - header != count:
        raise ValueError(f"{path}: {len(b) - header} data bytes for {count} elements")
    return shape, b[header:]


def find_idx(folder, name):
    for p in (os.path.join(folder, name), os.path.join(folder, name + ".gz")):
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(f"Fashion-MNIST file {name} missing in {folder}")


def load_fashion_mnist(torch, folder, train, limit=0):
    """Images (N x 1 x 28 x 28 float32, normalised as gradcomp-train does, operation by
    operation, so the tensors are bit-identical) and labels (int64)."""
    prefix = "train" if train else "t10k"
    ishape, ibytes = read_idx(find_idx(folder, prefix + "-images-idx3-ubyte"), 3)
    _, lbytes = read_idx(find_idx(folder, prefix + "-labels-idx1-ubyte"), 1)
    n = ishape[0] if limit <= 0 else min(ishape[0], limit)
    x = torch.frombuffer(bytearray(ibytes[:n * ishape[1] * ishape[2]]), dtype=torch.uint8)
    x = x.reshape(n, 1, ishape[1], ishape[2]).to(torch.float32).div_(255.0).sub_(0.2860).div_(0.3530)
    y = torch.frombuffer(bytearray(lbytes[:n]), dtype=torch.uint8).to(torch.int64)
    return x.contiguous(), y.contiguous()


def make_network(torch, name):
    nn = torch.nn
    F = torch.nn.functional

    class CNN(nn.Module):  # gradcomp_apps::cnn: the same layers, created in the same order
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
            self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
            self.fc1 = nn.Linear(7 * 7 * 64, 512)
            self.fc2 = nn.Linear(512, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = F.relu(self.fc1(x.flatten(1)))
            return self.fc2(x)

    class VGG(nn.Module):  # gradcomp_apps::vgg
        def __init__(self):
            super().__init__()
            channels = [1, 32, 64, 128]
            self.names = []
            for block in range(3):
                for j in range(2):
                    cin = channels[block] if j == 0 else channels[block + 1]
                    name = f"conv{block + 1}_{j + 1}"
                    setattr(self, name, nn.Conv2d(cin, channels[block + 1], 3, padding=1))
                    self.names.append(name)
            self.fc1 = nn.Linear(128 * 3 * 3, 256)
            self.fc2 = nn.Linear(256, 256)
            self.fc3 = nn.Linear(256, 10)

        def forward(self, x):
            for i, name in enumerate(self.names):
                x = F.relu(getattr(self, name)(x))
                if i % 2 == 1:
                    x = F.max_pool2d(x, 2)
            x = F.relu(self.fc1(x.flatten(1)))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    class MLP(nn.Module):  # gradcomp_apps::mlp
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(28 * 28, 512)
            self.fc2 = nn.Linear(512, 512)
            self.fc3 = nn.Linear(512, 10)

        def forward(self, x):
            x = F.relu(self.fc1(x.flatten(1)))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    if name == "cnn":
        return CNN()
    if name == "mlp":
        return MLP()
    if name == "vgg":
        return VGG()
    raise ValueError(f"unknown --model '{name}' (cnn, vgg, mlp)")


# ---- helpers ---------------------------------------------------------------------------------
def interface_bytes(iface, direction):
    try:
        with open(f"/sys/class/net/{iface}/statistics/{direction}_bytes") as f:
            return int(f.read())
    except OSError:
        return None


def blas_in_use():
    """The BLAS library this process mapped (OpenBLAS or Debian's slow reference BLAS)."""
    found = ""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                slash = line.find("/")
                if slash >= 0 and "blas" in line and ".so" in line:
                    found = os.path.realpath(line[slash:].strip())
                    if "openblas" in found:
                        break
    except OSError:
        pass
    if not found:
        return "unknown (no BLAS library mapped)"
    return found + (" (OpenBLAS)" if "openblas" in found else " (reference BLAS: slow)")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchange", choices=["dense", "fp16", "powersgd", "none"] + GRADCOMP_HOOKS,
                    default="dense")
    ap.add_argument("--model", choices=["cnn", "vgg", "mlp"], default="cnn")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--train-limit", type=int, default=0, help="first N training samples (0: all)")
    ap.add_argument("--test-limit", type=int, default=0,
                    help="evaluate on the first N test samples (0: all 10,000)")
    ap.add_argument("--lr", type=float, default=0.04)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--lr-decay", choices=["none", "step"], default="none",
                    help="none (constant --lr) or step (x --lr-decay-factor from iteration "
                         "floor(E x iterations per epoch) on, for each E of --lr-decay-epochs): "
                         "gradcomp-train's --lr-decay step")
    ap.add_argument("--lr-decay-epochs", type=epoch_list, default=[],
                    help="--lr-decay step: the epochs E, ascending, comma-separated (fractions "
                         "allowed)")
    ap.add_argument("--lr-decay-factor", type=float, default=0.1,
                    help="--lr-decay step: the multiplier at each of --lr-decay-epochs, in (0, 1]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--evals-per-epoch", type=int, default=4)
    ap.add_argument("--eval-stages", type=int, default=4,
                    help="with --target-accuracy, an evaluation before an epoch's end runs in this "
                         "many parts of the test set and stops after a part whose accuracy plus 3 "
                         "standard errors is below the target (gradcomp-train's rule); 1: always "
                         "the whole test set")
    ap.add_argument("--bucket-mib", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--powersgd-rank", type=int, default=2)
    ap.add_argument("--powersgd-start-iter", type=int, default=10)
    ap.add_argument("--method", default="reused_threshold",
                    help="--exchange gradcomp: the hook's compressor (gradcomp.torch.METHODS)")
    ap.add_argument("--density", type=float, default=0.01, help="--exchange gradcomp")
    ap.add_argument("--interval", type=int, default=10,
                    help="--exchange gradcomp: reused_threshold's calls between exact selections")
    ap.add_argument("--density-warmup-epochs", type=float, default=0.0,
                    help="--exchange gradcomp, sparse methods: DGC's density warm-up from "
                         "--warmup-initial-density down to --density over E epochs (0: off)")
    ap.add_argument("--warmup-initial-density", type=float, default=0.25,
                    help="the density warm-up's first density")
    ap.add_argument("--warmup-stepped", type=true_false, default=True,
                    help="the density warm-up: one density per epoch (true, DGC's) or a new "
                         "one every iteration (false)")
    ap.add_argument("--momentum-correction", type=true_false, default=True,
                    help="--exchange gradcomp, sparse methods: DGC's momentum correction in the "
                         "hook, optimizer without momentum (true/false)")
    ap.add_argument("--factor-masking", type=true_false, default=True,
                    help="with momentum correction: zero the velocity of sent values (true, "
                         "DGC's) or keep it (false)")
    ap.add_argument("--merge-buckets", type=true_false, default=False,
                    help="--exchange gradcomp: the messages of all of an iteration's buckets in "
                         "one all_gather at its last bucket (HookState(merge_buckets=True); "
                         "true/false)")
    ap.add_argument("--auto-critical-density", type=float, default=None,
                    help="--exchange gradcomp --method auto: the density in a critical regime "
                         "(HookState's critical_density; default: the hook's, 0.1 or --density)")
    ap.add_argument("--auto-dense-share", type=float, default=0.0,
                    help="--exchange gradcomp --method auto: the smallest buckets that together "
                         "hold at most this share of the values are sent whole (HookState's "
                         "dense_share, as gradcomp-train's --auto-dense-share), in [0, 1); "
                         "default 0: none")
    ap.add_argument("--auto-interval-epochs", type=float, default=0.125,
                    help="--exchange gradcomp --method auto: the hook's interval (auto_interval) "
                         "in epochs, as gradcomp-train's --auto-interval-epochs")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    ap.add_argument("--master-port", type=int, default=int(os.environ.get("MASTER_PORT", "29533")))
    ap.add_argument("--iface", default=os.environ.get("GLOO_SOCKET_IFNAME", ""),
                    help="network interface whose tx_bytes count the bytes sent (each rank must "
                         "have its own, as on the emulated cluster; empty or lo: not measured)")
    ap.add_argument("--label", default="")
    ap.add_argument("--report", default="", help="JSON report (gradcomp-train's layout)")
    ap.add_argument("--require-accuracy", type=float, default=0.0,
                    help="exit 4 when the final test accuracy is below this")
    ap.add_argument("--target-accuracy", type=float, default=0.0,
                    help="train until the first evaluation whose test accuracy reaches this "
                         "fraction, --epochs being the cap (0: every epoch); the report gives "
                         "time_to_target_seconds (gradcomp-train's rule)")
    a = ap.parse_args(argv)
    if not (0.0 <= a.target_accuracy <= 1.0):
        ap.error(f"--target-accuracy {a.target_accuracy} is outside [0, 1]")
    for name in ("epochs", "batch_size", "evals_per_epoch", "threads", "powersgd_rank"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)} is below 1")
    if not 1 <= a.eval_stages <= 100:
        ap.error(f"--eval-stages {a.eval_stages} is outside [1, 100]")
    if not (math.isfinite(a.density_warmup_epochs) and a.density_warmup_epochs >= 0):
        ap.error(f"--density-warmup-epochs {a.density_warmup_epochs} is not finite and >= 0")
    if a.density_warmup_epochs > 0 and a.exchange != "gradcomp":
        ap.error("--density-warmup-epochs is for --exchange gradcomp")
    for name in ("train_limit", "test_limit"):
        if getattr(a, name) < 0:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)} is below 0")
    problem = lr_decay_problem(a)
    if problem:
        ap.error(problem)
    if a.auto_critical_density is not None and not a.density <= a.auto_critical_density <= 1:
        ap.error(f"--auto-critical-density {a.auto_critical_density:g} is outside [--density "
                 f"{a.density:g}, 1]")
    if not 0 <= a.auto_dense_share < 1:
        ap.error(f"--auto-dense-share {a.auto_dense_share:g} is outside [0, 1)")
    if not 0 < a.auto_interval_epochs <= 1000:
        ap.error(f"--auto-interval-epochs {a.auto_interval_epochs:g} is outside (0, 1000]")
    if a.exchange == "powersgd" and a.powersgd_start_iter < 2:
        ap.error(f"--powersgd-start-iter {a.powersgd_start_iter} is below 2 (PyTorch's minimum "
                 "with error feedback and warm start)")
    return a


def epoch_list(text):
    """--lr-decay-epochs: comma-separated finite numbers in [0, 1e6]."""
    out = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{part}' is not a number") from None
        if not (math.isfinite(v) and 0 <= v <= 1e6):
            raise argparse.ArgumentTypeError(f"{part} is outside [0, 1e6]")
        out.append(v)
    return out


def lr_decay_problem(a):
    """"" or why the step decay's options do not fit together (gradcomp-train's checks,
    apps/gradcomp-train/options.hpp)."""
    if a.lr_decay == "step" and not a.lr_decay_epochs:
        return "--lr-decay step needs --lr-decay-epochs"
    if a.lr_decay != "step" and a.lr_decay_epochs:
        return "--lr-decay-epochs needs --lr-decay step"
    for before, e in zip(a.lr_decay_epochs, a.lr_decay_epochs[1:]):
        if not e > before:
            return f"--lr-decay-epochs {e:g} is not above the one before it, {before:g}"
    if not 0 < a.lr_decay_factor <= 1:
        return f"--lr-decay-factor {a.lr_decay_factor:g} is outside (0, 1]"
    return ""


def first_iteration_at(epochs, iterations_per_epoch):
    """The iteration from which on epoch fraction `epochs` counts as reached: floor(epochs x
    iterations_per_epoch), as gradcomp-train computes it (apps/gradcomp-train/large_batch.hpp)."""
    return int(epochs * float(iterations_per_epoch))


def step_milestones(a, iterations_per_epoch):
    """The 0-based iterations at which --lr-decay step multiplies the rate by its factor; exits 2
    (on every rank: each computes the same) when two epochs fall on one iteration."""
    if a.lr_decay != "step":
        return []
    at = [first_iteration_at(e, iterations_per_epoch) for e in a.lr_decay_epochs]
    for i in range(1, len(at)):
        if at[i] == at[i - 1]:
            print(f"ddp_train: --lr-decay-epochs {a.lr_decay_epochs[i - 1]:g} and "
                  f"{a.lr_decay_epochs[i]:g} fall on the same iteration {at[i]} "
                  f"({iterations_per_epoch} iterations per epoch)", file=sys.stderr)
            sys.exit(2)
    return at


def shortest(v):
    """The shortest text that reads back to the same double, as C++'s std::to_chars writes it."""
    t = repr(float(v))
    return t[:-2] if t.endswith(".0") else t


def lr_decay_text(a):
    """The decay as gradcomp-train's report records it: none or "step at E1,E2 x F"."""
    if a.lr_decay != "step":
        return "none"
    return ("step at " + ",".join(shortest(e) for e in a.lr_decay_epochs) + " x " +
            shortest(a.lr_decay_factor))


def true_false(text):
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"'{text}' is not true or false")
    return text == "true"


def import_gradcomp_torch():
    try:
        import gradcomp.torch as gc
    except ImportError as e:
        raise SystemExit(f"ddp_train: error: --exchange gradcomp* needs the gradcomp.torch "
                         f"package ({e}): build it (cmake --build <build> --target "
                         "gradcomp_python) and put <build>/python on PYTHONPATH")
    return gc


def gradcomp_hook(gc, a, correction, iterations_per_epoch):
    """The HookState (a collective: every rank at the same point) and hook for the exchange."""
    if a.exchange == "gradcomp":
        warmup = None
        if a.density_warmup_epochs > 0:
            warmup = gc.DensityWarmup(iterations_per_epoch, epochs=a.density_warmup_epochs,
                                      initial_density=a.warmup_initial_density,
                                      stepped=a.warmup_stepped)
        if a.method == "auto":  # the optimizer keeps its momentum (correction is off)
            interval = max(1, round(a.auto_interval_epochs * iterations_per_epoch))
            state = gc.HookState(method="auto", density=a.density, interval=a.interval,
                                 seed=a.seed, threads=a.threads, auto_interval=interval,
                                 critical_density=a.auto_critical_density,
                                 dense_share=a.auto_dense_share)
            return state, gc.sparse_allgather_hook
        state = gc.HookState(method=a.method, density=a.density, interval=a.interval,
                             momentum=a.momentum if correction else None, seed=a.seed,
                             threads=a.threads, density_warmup=warmup,
                             factor_masking=a.factor_masking, merge_buckets=a.merge_buckets)
        return state, gc.sparse_allgather_hook
    if a.exchange == "gradcomp-ring":
        return gc.HookState(method="fp32", threads=a.threads), gc.ring_allreduce_hook
    return gc.HookState(method="fp16", threads=a.threads), gc.fp16_hook


def auto_record(state):
    """HookState(method="auto")'s decisions for the report: auto_report() (calibration, every
    bucket's candidates) and, per interval of the kept history, each bucket's method, density
    and regime at the interval's first iteration."""
    record = state.auto_report()
    intervals = []
    for it in state.history:
        if it["iteration"] % state.auto_interval == 0 and "auto" in it:
            intervals.append({"iteration": it["iteration"], "buckets": it["auto"]})
    record["intervals"] = intervals
    return record


def hook_statistics(history):
    """Per-iteration means of the hook's statistics and the achieved density, this rank."""
    n = max(1, len(history))
    total = {k: sum(h.get(k, 0) for h in history) for k in HOOK_KEYS}
    means = {k: total[k] / n for k in HOOK_KEYS}
    means["density"] = total["k_selected"] / total["numel"] if total["numel"] else 0.0
    return means


def launch_rank():
    for r, s in (("PMI_RANK", "PMI_SIZE"), ("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK",
                                                                      "OMPI_COMM_WORLD_SIZE")):
        if r in os.environ and s in os.environ:
            return int(os.environ[r]), int(os.environ[s])
    return 0, 1


# ---- training ------------------------------------------------------------------------------
def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    gc = import_gradcomp_torch() if a.exchange in GRADCOMP_HOOKS else None
    if gc is not None and a.method not in gc.METHODS and a.method != "auto":
        raise SystemExit(f"ddp_train: error: --method {a.method} is not one of "
                         f"{', '.join(gc.METHODS)}")
    # DGC's momentum correction inside the hook for sparse methods, the optimizer then without
    # momentum (gradcomp-train's rule, apps/gradcomp-train/setup.hpp)
    correction = (a.exchange == "gradcomp" and a.momentum_correction
                  and a.method in gc.SPARSE_METHODS)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, ranks = launch_rank()
    if a.iface:  # gloo's sockets on that interface (the emulated host's shaped link)
        os.environ["GLOO_SOCKET_IFNAME"] = a.iface
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master_addr}:{a.master_port}",
                            rank=rank, world_size=ranks)
    root = rank == 0

    def say(text):
        if root:
            print(f"ddp_train: {text}", file=sys.stderr, flush=True)

    train_x, train_y = load_fashion_mnist(torch, a.data, True, a.train_limit)
    test_x, test_y = load_fashion_mnist(torch, a.data, False, a.test_limit)
    test_order = torch.tensor(epoch_order(len(test_x), TEST_ORDER_SEED, 0), dtype=torch.int64)
    test_x, test_y = test_x.index_select(0, test_order), test_y.index_select(0, test_order)
    torch.manual_seed(a.seed)
    net = make_network(torch, a.model)
    params = list(net.parameters())
    numel = sum(p.numel() for p in params)
    for p in params:  # rank 0's parameters everywhere (DDP does it too; the floor needs it)
        dist.broadcast(p.data, 0)

    model = net
    merge = "-"
    if a.exchange != "none":
        one_bucket = a.exchange == "powersgd"
        cap_bytes = int(a.bucket_mib * 1024 * 1024)
        if one_bucket:
            # DDP's first bucket is capped at dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) whatever
            # bucket_cap_mb says; raising it to the cap gives one bucket for this model
            dist._DEFAULT_FIRST_BUCKET_BYTES = cap_bytes
        model = DDP(net, bucket_cap_mb=a.bucket_mib)
        merge = "one bucket" if one_bucket else f"{a.bucket_mib:g} MiB buckets (first 1 MiB)"
        if a.exchange == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif a.exchange == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
            state = powerSGD_hook.PowerSGDState(
                process_group=None, matrix_approximation_rank=a.powersgd_rank,
                start_powerSGD_iter=a.powersgd_start_iter, use_error_feedback=True,
                warm_start=True, random_seed=a.seed)
            model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    n = train_x.shape[0]
    per_rank = (n + ranks - 1) // ranks
    iterations_per_epoch = (per_rank + a.batch_size - 1) // a.batch_size
    hook_state = None
    if gc is not None:
        hook_state, hook = gradcomp_hook(gc, a, correction, iterations_per_epoch)
        model.register_comm_hook(hook_state, hook)
    KEEP_ALIVE.append(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=a.lr,
                                momentum=0.0 if correction else a.momentum)
    milestones = step_milestones(a, iterations_per_epoch)
    F = torch.nn.functional
    iface = a.iface if a.iface and a.iface != "lo" else ""
    measured_bytes = bool(iface) and interface_bytes(iface, "tx") is not None
    blas = blas_in_use()
    say(f"{ranks} ranks, model {a.model} ({numel} parameters), exchange {a.exchange}, "
        f"{n} training samples ({iterations_per_epoch} iterations of batch {a.batch_size} per "
        f"epoch), bytes {'measured on ' + iface if measured_bytes else 'not measured'}, BLAS: {blas}")

    def evaluate(staged=False):
        """Accuracy and mean loss on the test set; `staged`: in --eval-stages parts that stop
        early far below --target-accuracy (evaluate.samples: the images evaluated)."""
        t = time.perf_counter()
        net.eval()
        parts = a.eval_stages if staged and a.target_accuracy > 0 else 1
        total = torch.zeros(3, dtype=torch.float64)  # correct, loss sum, count over all ranks
        with torch.no_grad():
            begin, end = len(test_x) * rank // ranks, len(test_x) * (rank + 1) // ranks
            for s in range(parts):
                first, last = stage_range(begin, end, s, parts)
                sums = torch.zeros(3, dtype=torch.float64)
                sums[2] = last - first
                for b in range(first, last, EVALUATION_BATCH):
                    logits = net(test_x[b:min(b + EVALUATION_BATCH, last)])
                    labels = test_y[b:min(b + EVALUATION_BATCH, last)]
                    sums[0] += float((logits.argmax(1) == labels).sum())
                    sums[1] += float(F.cross_entropy(logits, labels, reduction="sum"))
                dist.all_reduce(sums)
                total += sums
                if can_stop_early(int(total[0]), int(total[2]), len(test_x), a.target_accuracy):
                    break
        net.train()
        evaluate.seconds = time.perf_counter() - t
        evaluate.samples = int(total[2])
        return float(total[0] / total[2]), float(total[1] / total[2])

    # the wall clock from here (data loaded, model built), as gradcomp-train's: the initial
    # evaluation included
    start = time.perf_counter()
    acc, loss = evaluate()
    curve = [{"epoch": 0, "epochs_done": 0.0, "iteration": 0, "train_seconds": 0.0,
              "train_loss": 0.0, "test_accuracy": acc, "test_loss": loss,
              "test_samples": evaluate.samples, "eval_seconds": evaluate.seconds}]

    def reached_target():
        # the accuracy is a ratio of integer sums over all ranks: the same on every rank
        return a.target_accuracy > 0 and curve[-1]["test_accuracy"] >= a.target_accuracy
    say(f"initial test accuracy {100 * acc:.2f} %")
    s = {"iteration": 0.0, "forward": 0.0, "backward": 0.0, "step": 0.0, "tx": 0.0, "rx": 0.0}
    iterations = 0
    auto = hook_state is not None and hook_state.method == "auto"
    train_seconds = 0.0
    loss_sum, loss_count, global_iteration = 0.0, 0, 0
    dist.barrier()
    for epoch in range(0 if reached_target() else a.epochs):
        mine = shard(n, ranks, rank, a.seed, epoch)
        next_eval = 1
        for it in range(iterations_per_epoch):
            begin = it * a.batch_size
            index = torch.tensor(mine[begin:min(begin + a.batch_size, per_rank)], dtype=torch.int64)
            x, y = train_x.index_select(0, index), train_y.index_select(0, index)
            tx0 = interface_bytes(iface, "tx") if measured_bytes else 0
            rx0 = interface_bytes(iface, "rx") if measured_bytes else 0
            # --lr-decay step: the rate of this (0-based) iteration, gradcomp-train's rule
            lr = a.lr * a.lr_decay_factor ** sum(1 for m in milestones if global_iteration >= m)
            if auto and lr < optimizer.param_groups[0]["lr"]:  # Accordion: critical next
                hook_state.learning_rate_dropped()
            for group in optimizer.param_groups:
                group["lr"] = lr
            t0 = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            out = model(x)
            step_loss = F.cross_entropy(out, y)
            t1 = time.perf_counter()
            step_loss.backward()  # DDP: returns once every bucket's exchange is done
            t2 = time.perf_counter()
            optimizer.step()
            t3 = time.perf_counter()
            if measured_bytes:
                s["tx"] += interface_bytes(iface, "tx") - tx0
                s["rx"] += interface_bytes(iface, "rx") - rx0
            s["iteration"] += t3 - t0
            s["forward"] += t1 - t0
            s["backward"] += t2 - t1
            s["step"] += t3 - t2
            iterations += 1
            global_iteration += 1
            train_seconds += t3 - t0
            loss_sum += float(step_loss.detach())
            loss_count += 1
            if (it + 1) * a.evals_per_epoch >= next_eval * iterations_per_epoch:
                next_eval += 1
                l = torch.tensor([loss_sum, float(loss_count)], dtype=torch.float64)
                dist.all_reduce(l)
                acc, loss = evaluate(staged=it + 1 < iterations_per_epoch)
                curve.append({"epoch": epoch + 1, "epochs_done": epoch + (it + 1) / iterations_per_epoch,
                              "iteration": global_iteration, "train_seconds": train_seconds,
                              "train_loss": float(l[0] / max(1.0, float(l[1]))),
                              "test_accuracy": acc, "test_loss": loss,
                              "test_samples": evaluate.samples, "eval_seconds": evaluate.seconds})
                loss_sum, loss_count = 0.0, 0
                early = (f" (stopped early: {evaluate.samples} test images)"
                         if evaluate.samples < len(test_x) else "")
                say(f"epoch {curve[-1]['epochs_done']:.2f}: test accuracy {100 * acc:.2f} %{early}, "
                    f"{train_seconds:.1f} s training, {1000 * s['iteration'] / iterations:.1f} ms/iteration")
                if reached_target():
                    say(f"the test accuracy reached --target-accuracy {100 * a.target_accuracy:.2f} % "
                        f"after {train_seconds:.1f} s of training: training stops")
                dist.barrier()
                if reached_target():
                    break
        if reached_target():
            break
    wall_seconds = time.perf_counter() - start
    target = next((p for p in curve if a.target_accuracy > 0
                   and p["test_accuracy"] >= a.target_accuracy), None)

    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().contiguous().numpy().tobytes())
    hashes = [None] * ranks
    dist.all_gather_object(hashes, h.hexdigest()[:16])
    identical = all(x == hashes[0] for x in hashes)
    keys = ["iteration", "forward", "backward", "step", "tx", "rx"]
    values = [s[k] / max(1, iterations) for k in keys]
    if hook_state is not None:
        hook_state.synchronize()
        hook_means = hook_statistics(hook_state.history)
        keys += ["hook_" + k for k in HOOK_KEYS + ["density"]]
        values += [hook_means[k] for k in HOOK_KEYS + ["density"]]
    mine_values = torch.tensor(values, dtype=torch.float64)
    means, maxes = mine_values.clone(), mine_values.clone()
    dist.all_reduce(means)
    means /= ranks
    dist.all_reduce(maxes, op=dist.ReduceOp.MAX)
    final_accuracy = curve[-1]["test_accuracy"]
    status = 0
    if a.exchange != "none" and not identical:
        status = 3
    elif final_accuracy < a.require_accuracy:
        status = 4
    dist.barrier()
    dist.destroy_process_group()
    if not root:
        return status

    def stat(i, scale=1000.0):
        return {"mean_over_ranks": float(means[i]) * scale, "max_over_ranks": float(maxes[i]) * scale}

    per_iteration = {"iteration_ms": stat(0), "forward_ms": stat(1),
                     "backward_ms": stat(2), "optimizer_step_ms": stat(3)}
    if measured_bytes:
        per_iteration["bytes_sent"] = stat(4, 1.0)
        per_iteration["bytes_received"] = stat(5, 1.0)
    hook_report = None
    if hook_state is not None:
        i = keys.index("hook_buckets")
        per_iteration["compression_ms"] = stat(keys.index("hook_compression_seconds"))
        hook_report = {k: stat(i + j, 1.0) for j, k in enumerate(HOOK_KEYS + ["density"])}
        hook_report["compression_ms"] = hook_report.pop("compression_seconds")
        hook_report["exchange_ms"] = hook_report.pop("exchange_seconds")
        for k in ("compression_ms", "exchange_ms"):
            hook_report[k] = {m: v * 1000.0 for m, v in hook_report[k].items()}
        merge += f": {float(means[i]):g} buckets per iteration"
    label = a.label or ("PyTorch DDP, " + {
        "dense": "dense allreduce", "fp16": "fp16 hook",
        "powersgd": f"PowerSGD rank {a.powersgd_rank}", "none": "no communication",
        "gradcomp": f"gradcomp hook {a.method} {a.density:g}", "gradcomp-ring":
        "gradcomp ring hook (fp32)", "gradcomp-fp16": "gradcomp fp16 hook"}[a.exchange])
    report = {
        "label": label,
        "peer": "pytorch-ddp",
        "config": {"ranks": ranks, "method": a.exchange, "transport": "none" if a.exchange == "none"
                   else "ddp-gloo", "merge": merge, "model": a.model, "epochs": a.epochs,
                   "batch_size_per_rank": a.batch_size, "train_samples": n,
                   "test_samples": len(test_x), "iterations_per_epoch": iterations_per_epoch,
                   "lr": a.lr, "lr_decay": lr_decay_text(a), "momentum": a.momentum,
                   "seed": a.seed, "target_accuracy": a.target_accuracy,
                   "torch_threads_per_rank": a.threads, "parameters": numel,
                   "parameter_tensors": len(params), "blas": blas, "data": a.data,
                   "torch_version": torch.__version__,
                   "bucket_mib": a.bucket_mib,
                   "powersgd_rank": a.powersgd_rank if a.exchange == "powersgd" else None,
                   "powersgd_start_iter": a.powersgd_start_iter if a.exchange == "powersgd" else None,
                   "bytes_measured_on": iface if measured_bytes else None,
                   "hook_method": hook_state.method if hook_state else None,
                   "density": a.density if a.exchange == "gradcomp" else None,
                   "interval": a.interval if a.exchange == "gradcomp" else None,
                   "density_warmup": repr(hook_state.density_warmup)
                   if hook_state is not None and hook_state.density_warmup else None,
                   "momentum_correction": correction,
                   "factor_masking": correction and a.factor_masking,
                   "merge_buckets": a.merge_buckets if a.exchange == "gradcomp" else None,
                   "optimizer_momentum": 0.0 if correction else a.momentum},
        "curve": curve,
        "final_test_accuracy": final_accuracy,
        "final_test_loss": curve[-1]["test_loss"],
        "train_seconds": train_seconds,
        "wall_seconds": wall_seconds,
        "eval_seconds": sum(p["eval_seconds"] for p in curve),
        "time_to_target_seconds": target["train_seconds"] if target else None,
        "epochs_to_target": target["epochs_done"] if target else None,
        "per_iteration": per_iteration,
        "hook_statistics": hook_report,
        # --method auto: the calibration and each bucket's priced candidates (rank 0's; the
        # same on every rank), and per interval each bucket's regime and what it was sent as
        "auto": auto_record(hook_state) if auto else None,
        "achieved_density": hook_report["density"]["mean_over_ranks"] if hook_report else None,
        "replica_hashes": hashes,
        "replicas_identical": identical,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"## {label}, {ranks} ranks\n")
    print("| epoch | test accuracy | training seconds |\n|---|---|---|")
    for p in curve:
        if p["epoch"] == 0 or p["epochs_done"] == p["epoch"]:
            print(f"| {p['epoch']} | {100 * p['test_accuracy']:.2f} % | {p['train_seconds']:.1f} |")
    print(f"\n| iteration | {1000 * float(means[0]):.1f} ms |\n|---|---|")
    print(f"| training time / evaluation time / wall time | {train_seconds:.1f} s / "
          f"{report['eval_seconds']:.1f} s / {wall_seconds:.1f} s |")
    if a.target_accuracy > 0:
        print(f"| time to {100 * a.target_accuracy:.2f} % test accuracy | " +
              (f"{target['train_seconds']:.1f} s (epoch {target['epochs_done']:.3f}) |" if target
               else f"not reached in {a.epochs} epochs |"))
    print(f"| forward / backward (with DDP's exchange) / step | {1000 * float(means[1]):.1f} / "
          f"{1000 * float(means[2]):.1f} / {1000 * float(means[3]):.1f} ms |")
    if measured_bytes:
        print(f"| bytes sent per rank per iteration ({iface}) | {float(means[4]):.0f} |")
    if hook_report:
        hr = hook_report
        print(f"| gradcomp hook per iteration: buckets, density, wire / sent bytes, compression / "
              f"exchange ms | {hr['buckets']['mean_over_ranks']:g}, "
              f"{hr['density']['mean_over_ranks']:.4f}, {hr['wire_bytes']['mean_over_ranks']:.0f} / "
              f"{hr['sent_bytes']['mean_over_ranks']:.0f}, {hr['compression_ms']['mean_over_ranks']:.2f}"
              f" / {hr['exchange_ms']['mean_over_ranks']:.2f} |")
    same = "independent (no exchange)" if a.exchange == "none" else "yes" if identical else "NO"
    print(f"| replicas identical | {same} ({hashes}) |")
    print(f"| BLAS | {blas} |", flush=True)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    if status == 3:
        print(f"ddp_train: error: the replicas differ across ranks: {hashes}", file=sys.stderr)
    elif status == 4:
        print(f"ddp_train: error: final test accuracy {final_accuracy:.4f} is below "
              f"--require-accuracy {a.require_accuracy:.4f}", file=sys.stderr)
    return status


if __name__ == "__main__":
    code = main()
    # Leave without destroying the DDP model (KEEP_ALIVE): with PyTorch 1.13, rank 0 of a
    # PowerSGD run once hung for good after writing its report, in the DDP Reducer's
    # ProcessGroupGloo destructor (holding the GIL, it waited for gloo's work thread, which
    # waited for the GIL to free a tensor)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
