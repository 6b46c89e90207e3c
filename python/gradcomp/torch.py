# SPDX-License-Identifier: Apache-2.0
"""gradcomp's compressors as PyTorch DDP communication hooks.

Two lines in an unchanged DDP script::

    import gradcomp.torch as gc
    model.register_comm_hook(gc.HookState(method="reused_threshold", density=0.01),
                             gc.sparse_allgather_hook)

A hook returns a ``torch.futures.Future`` whose value is the bucket's **average** over the
ranks, like DDP's default allreduce hook. The hooks:

``sparse_allgather_hook``
    Selects from the whole bucket with gradcomp's compressor (``method=``: exact_topk,
    sampled_topk, gaussian_threshold, lognormal_threshold, reused_threshold; or the dense fp32,
    fp16, bf16), error feedback kept per parameter, encodes the message in gradcomp's wire
    format, all-gathers the messages (sizes first) and averages them in C++. Bytes per rank:
    the largest encoded message (about 32 + 5k bytes for k values) to every other rank.
``ring_allreduce_hook``
    The dense baseline: a ring allreduce (reduce-scatter, then allgather; Patarasuk and Yuan
    2009) of the bucket, over point-to-point messages of the process group, with values sent
    as fp32, fp16 or bf16 (``method=``); fp16 / bf16 keep the rounding error as a residual.
    Bytes per rank: 2 (P - 1) / P x n x (4 or 2).
``fp16_hook``
    ``ring_allreduce_hook`` for ``HookState(method="fp16")``: the counterpart of DDP's
    ``fp16_compress_hook``, with error feedback.

``HookState(method="auto")`` with ``sparse_allgather_hook`` decides per bucket and per interval
of ``auto_interval`` iterations what the bucket is sent as: dense (fp32 through
``dist.all_reduce``, as DDP's default allreduce) or the reused threshold's top-k at ``density``
(``critical_density`` while Accordion's detector says the bucket's gradient is in a critical
regime), by gradcomp's own rule (``gradcomp::schedule::choose_exchange`` on alpha-beta cost
models calibrated on the process group: the rule of gradcomp-train ``--method auto``).

How the hooks run: each HookState owns one communication thread and its own process group
(created by the constructor, a collective: every rank constructs its HookState at the same
point). DDP calls a hook per bucket in bucket order; the hook queues the bucket and returns
at once, so backward goes on; the thread compresses and exchanges buckets in that order, so
every rank issues the same collectives in the same order however many buckets are in flight
(PowerSGD's hook started its gloo collectives in different orders and crashed with two
buckets), and DDP's own collectives (parameter broadcasts) never interleave with them.

Error feedback is kept per parameter: the residual (and with ``momentum`` DGC's velocity) of a
parameter lives in the bucket's contiguous storage, and when DDP rebuilds its buckets after the
first iteration every parameter's residual moves to its new bucket: nothing is reset or lost.
``state_dict()`` / ``load_state_dict()`` save and restore the residuals with a checkpoint.

Needs float32 CPU gradients (DDP over gloo or MPI on CPU) and PyTorch's torch.distributed.
"""
import math
import queue
import threading
import time

import numpy as np
import torch
import torch.distributed as dist

from . import _core

SPARSE_METHODS = tuple(_core.sparse_methods)
QUANTIZER_METHODS = tuple(_core.quantizer_methods)
DENSE_METHODS = tuple(_core.dense_methods)
METHODS = SPARSE_METHODS + QUANTIZER_METHODS + DENSE_METHODS
_WIRE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_STATE_FORMAT = "gradcomp.torch.HookState/1"

__all__ = ["HookState", "DensityWarmup", "sparse_allgather_hook", "ring_allreduce_hook",
           "fp16_hook", "METHODS", "SPARSE_METHODS", "QUANTIZER_METHODS", "DENSE_METHODS"]


# a message's size, int64, at the head of its row in the one-round allgather (whose rows
# _core.hook_row_capacity sizes and _core.choose_exchange prices)
_SIZE_BYTES = _core.hook_row_size_bytes
_AUTO_COMPRESSOR = "reused_threshold"  # what method="auto" sends its sparse buckets with
# method="auto"'s calibration: dist.all_reduce of 4 KiB, 16 KiB, ... 4 MiB, the median of 3
# timed runs (the slowest rank's time each) after one warm-up
_CALIBRATION_BYTES = tuple(4096 * 4**i for i in range(6))
_CALIBRATION_REPETITIONS = 3


class DensityWarmup:
    """DGC's density warm-up (Lin et al. 2018, sec. 3.4) for ``HookState(density_warmup=...)``:
    the density starts at ``initial_density`` and decays exponentially to the HookState's
    ``density`` over the first ``epochs`` epochs: d(t) = d0 (dT / d0)^(e / E) at epoch t < E
    with e = floor(t) when ``stepped`` (one density per epoch, as DGC: 25 %, 6.25 %, ... over
    4 epochs) or e = t (a new density every iteration), dT from E on. The same schedule as
    gradcomp-train's ``--density-warmup-epochs`` (``gradcomp::density_warmup``, whose formula
    computes it here).

    Args:
        iterations_per_epoch: the hook's iterations (DDP backward passes) in one epoch, >= 1.
        epochs: E, epochs of warm-up, finite and >= 0 (0: always the target density).
        initial_density: d0 in (0, 1]; a target density above it makes the warm-up a no-op.
        stepped: one density per whole epoch (True, DGC) or a continuous decay (False). The
            reused threshold selects exactly again after each change, so a continuous decay
            selects exactly every iteration of the warm-up.

    Raises:
        ValueError: naming the argument and its limit.
    """

    def __init__(self, iterations_per_epoch, epochs=4.0, initial_density=0.25, stepped=True):
        _positive_int("iterations_per_epoch", iterations_per_epoch)
        if isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or \
                not math.isfinite(epochs) or epochs < 0:
            raise ValueError(f"epochs {epochs!r} is not finite and >= 0")
        if isinstance(initial_density, bool) or not isinstance(initial_density, (int, float)) \
                or not 0.0 < initial_density <= 1.0:
            raise ValueError(f"initial_density {initial_density!r} is outside (0, 1]")
        self.iterations_per_epoch = iterations_per_epoch
        self.epochs = float(epochs)
        self.initial_density = float(initial_density)
        self.stepped = bool(stepped)

    def density(self, iteration, final_density):
        """The density of iteration ``iteration`` (0-based, counted over the whole training)
        for the target ``final_density``."""
        return _core.density_warmup(max(self.initial_density, final_density), final_density,
                                    self.epochs, self.stepped,
                                    iteration / self.iterations_per_epoch)

    def __repr__(self):
        return (f"DensityWarmup(iterations_per_epoch={self.iterations_per_epoch}, "
                f"epochs={self.epochs}, initial_density={self.initial_density}, "
                f"stepped={self.stepped})")


class _Slot:
    """One parameter's error-feedback state: views into its bucket's contiguous storage."""

    __slots__ = ("param", "order", "residual", "velocity", "accumulated")

    def __init__(self, param, order):
        self.param = param
        self.order = order
        self.residual = None
        self.velocity = None
        self.accumulated = None  # method="auto": the interval's sum of averaged gradients


class _Layout:
    """One bucket as DDP laid it out: its parameters, the contiguous residual (and velocity)
    storage that the parameters' slots view, and the bucket's compressor."""

    def __init__(self, key, numel, residual, velocity, compressor, accumulated=None):
        self.key = key
        self.numel = numel
        self.residual = residual
        self.velocity = velocity
        self.compressor = compressor
        # method="auto": the interval's sum of the bucket's averaged gradients (its regime
        # detector's input), the fp32 compressor that adds the residual into a dense bucket
        # (and checks it with nonfinite="raise"), and whether the residual may hold values
        self.accumulated = accumulated
        self.flush = None
        self.dirty = False
        self.density = None  # the density set on the compressor (None: the HookState's)
        # the sparse allgather's payload bytes per rank in one round (0: sizes first); the same
        # on every rank, set from the gathered sizes
        self.capacity = 0


class _Capacity:
    """merge_buckets: the merged all_gather's payload bytes per rank in one round (0: sizes
    first), as _Layout.capacity is for one bucket."""

    def __init__(self):
        self.capacity = 0


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} {value!r} is not an integer >= 1")
    return value


def _real(name, value, ok, limit):
    """float(value) if it is a real number (not a bool) for which ok(value) holds, else
    ValueError "name value limit"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ValueError(f"{name} {value!r} {limit}")
    return float(value)


class HookState:
    """State of gradcomp's DDP communication hooks (modelled on PyTorch's PowerSGDState).

    Args:
        method: compressor name: exact_topk, sampled_topk, gaussian_threshold,
            lognormal_threshold, reused_threshold, random_k (sparse: ``sparse_allgather_hook``),
            signsgd, terngrad, qsgd (quantizers, every value in 1, 2 or 1 + bit_width(levels)
            bits with a scale per ``quantization_bucket`` values: ``sparse_allgather_hook``),
            or fp32, fp16, bf16 (dense: any hook); or "auto" (``sparse_allgather_hook`` only):
            per bucket and interval dense or sparse by gradcomp's rule (below).
        density: fraction of each bucket's elements sent, in (0, 1] (sparse methods; with
            "auto" the density of a sparse bucket outside a critical regime).
        interval: reused_threshold's calls between exact selections (>= 1).
        process_group: the group the hooks' collectives run on; None (default) creates a new
            group of all ranks (collective call). A group given here must not be used by
            anything else while training runs.
        momentum: DGC's momentum correction factor in [0, 1) (Lin et al. 2018, eqs. 4-6), or
            None for plain error feedback; sparse methods only. With it, run the optimizer
            without momentum (the hook's velocity is the momentum).
        factor_masking: with ``momentum``, zero the velocity of every value sent (DGC's
            momentum factor masking; True, the default) or keep it and clear only the
            accumulation (False: density 1 is then momentum SGD; gradcomp's
            ``momentum_correction::factor_masking``).
        seed: the seed of sampled_topk's sample, random_k's choice and the stochastic rounding
            of terngrad and qsgd.
        levels: qsgd's levels per sign, [1, 32768] (15: 5 bits per value, 255: 9).
        quantization_bucket: the quantizers' values per scale, an integer in [0, 2**32) (0:
            one scale per DDP bucket), or None (default) for each quantizer's own: qsgd 512
            (QSGD's bucketing), signsgd and terngrad 0.
        threads: threads per compression call, [1, 1024].
        nonfinite: a NaN or an infinity in a gradient (gradcomp's nonfinite_policy):
            "propagate" (default) sends it; "raise" makes the hook fail with
            ``gradcomp._core.NonfiniteError`` (a FloatingPointError naming the bucket element,
            the value and the count), which DDP raises in backward; nothing of that bucket is
            sent (every rank must raise at the same bucket, or the others wait in its
            collective). The check is fused into the compression pass.
        history_limit: the most recent iterations kept in ``history`` (>= 1).
        density_warmup: a ``DensityWarmup`` (DGC's density warm-up from its initial density
            down to ``density``), or None (default: ``density`` from the first iteration);
            sparse methods only. The iteration it counts from is kept by ``state_dict()``.
        merge_buckets: ``sparse_allgather_hook`` only. False (default): each bucket's messages
            travel in their own all_gather as soon as the bucket is compressed. True: each
            bucket is still compressed as DDP hands it over (overlapping the rest of
            backward), but the messages of all of an iteration's buckets travel in **one**
            all_gather once its last bucket arrives (S1's merging of consecutive layers, at the
            level of DDP's buckets: one collective's latency per iteration instead of one per
            bucket, which pays where the collectives are latency-bound, e.g. ranks sharing
            cores); the earlier buckets' futures complete with the last one's. The averages are
            bit for bit those of the default (the same messages, decoded in the same order).
        critical_density: method "auto": the density of a sparse bucket while its gradient is
            in a critical regime, in [density, 1] (1: such a bucket is sent dense); None
            (default): 0.1, or ``density`` if that is higher.
        eta: method "auto": the regime detector's threshold on the relative change of an
            interval's gradient norm, finite and > 0; None (default): 0.5 (Accordion's).
        min_saving: method "auto": the fraction of dense's exposed seconds that sparse must
            save to be chosen, in [0, 1); None (default): 0.1.
        auto_interval: method "auto": iterations per interval (>= 1; None, default: 50): the
            regimes are judged, and the decisions change, only between intervals.
        alpha_seconds, beta_seconds_per_byte: method "auto": the network's latency per message
            step (s) and inverse bandwidth (s per byte), both finite and >= 0, given together;
            None (default): calibrated at the first iteration (a collective: ``dist.all_reduce``
            of 4 KiB to 4 MiB on the process group, fitted as gradcomp's
            ``calibrate_ring_allreduce`` does; every rank takes rank 0's values).
        dense_share: method "auto": the smallest buckets that together hold at most this share
            of the values of an iteration's buckets are sent whole (dense) in every phase, from
            the second iteration on (the bound comes from the last completed iteration's bucket
            sizes: ``gradcomp::schedule::dense_below_elements``), in [0, 1); None (default):
            0, none (gradcomp-train's ``--auto-dense-share`` defaults to 0.05: there its
            convolutions whole reached the target sooner; through the hooks, with DDP's default
            buckets, the CNN's convolutional bucket (52,096 values, 3.1 %) whole crossed at the
            same epochs as compressed on two seeds). 0.05 sends that bucket whole.
        select_seconds_per_element: method "auto": the reused threshold's seconds per element
            (error feedback, selection and encoding), finite and >= 0; None (default): timed at
            the first iteration on the first bucket (with DDP's defaults the whole model), rank
            0's value on every rank.

    Method "auto" (the rule of gradcomp-train ``--method auto``, docs/train.md): each bucket
    (by its index in the iteration, the same on every rank) is priced by
    ``gradcomp::schedule::choose_exchange`` (``_core.choose_exchange``) as dense, 4n bytes
    through the ring allreduce, 2 (P-1) alpha + 2 (P-1)/P beta 4n seconds, against sparse at d,
    the selection's seconds plus this hook's one all_gather of padded rows, (P-1) (alpha + beta
    (8 + 5/4 M + 64)) for messages of M = k (4 + i) bytes (k = ceil(d n) fp32 values and their
    delta + varint indices, i = gradcomp::expected_index_bytes(delta_varint, d): 1.0 byte at
    d = 0.05, 1.28 at 0.01); overlap with backward 0 (a hook cannot see it), fp16 not a
    candidate.
    Sparse is chosen only where it saves ``min_saving`` of dense's seconds, and never for the
    small buckets under ``dense_share``'s bound (none by default), which are sent whole. A
    dense bucket goes through ``dist.all_reduce`` after division by P (DDP's default hook),
    with the residual the sparse iterations left added first; a sparse one through the sparse
    allgather with the reused threshold and error feedback. Per bucket, Accordion's detector
    (``gradcomp::schedule::critical_regime``; Agarwal et al., MLSys 2021) compares the norm of
    the bucket's averaged gradient summed over an interval with the previous interval's (the
    same on every rank: no communication): a change of at least ``eta``, the first two
    intervals and the interval after ``learning_rate_dropped()`` are critical, and the bucket
    then uses ``critical_density``. ``history`` records per bucket what was sent;
    ``auto_report()`` the calibration and every bucket's priced candidates. Not with
    ``momentum``, ``density_warmup`` or ``merge_buckets``.

    Raises:
        ValueError: naming the argument and its limit.
        RuntimeError: if torch.distributed is not initialised.
    """

    def __init__(self, method="reused_threshold", density=0.01, interval=10,
                 process_group=None, momentum=None, seed=1, threads=1, nonfinite="propagate",
                 history_limit=10000, levels=15, quantization_bucket=None,
                 density_warmup=None, factor_masking=True, merge_buckets=False,
                 critical_density=None, eta=None, min_saving=None, auto_interval=None,
                 alpha_seconds=None, beta_seconds_per_byte=None,
                 select_seconds_per_element=None, dense_share=None):
        if method not in METHODS and method != "auto":
            raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}, auto")
        if isinstance(density, bool) or not isinstance(density, (int, float)) or \
                not 0.0 < density <= 1.0:
            raise ValueError(f"density {density!r} is outside (0, 1]")
        _positive_int("interval", interval)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed {seed!r} is not an integer >= 0")
        _positive_int("threads", threads)
        if threads > 1024:
            raise ValueError(f"threads {threads} is above the limit 1024")
        if momentum is not None and (isinstance(momentum, bool) or
                                     not isinstance(momentum, (int, float)) or
                                     not 0.0 <= momentum < 1.0):
            raise ValueError(f"momentum {momentum!r} is outside [0, 1)")
        if not isinstance(factor_masking, bool):
            raise ValueError(f"factor_masking {factor_masking!r} is not True or False")
        if not isinstance(merge_buckets, bool):
            raise ValueError(f"merge_buckets {merge_buckets!r} is not True or False")
        if nonfinite not in ("propagate", "raise"):
            raise ValueError(f"nonfinite {nonfinite!r} is not one of propagate, raise (skip_step "
                             f"needs the step skipped on every rank: gradcomp-train or the C++ "
                             f"pipeline)")
        _positive_int("history_limit", history_limit)
        _positive_int("levels", levels)
        if levels > 32768:
            raise ValueError(f"levels {levels} is above the limit 32768")
        if quantization_bucket is not None and (
                isinstance(quantization_bucket, bool) or not isinstance(quantization_bucket, int)
                or not 0 <= quantization_bucket < 2**32):
            raise ValueError(f"quantization_bucket {quantization_bucket!r} is not None nor an "
                             f"integer in [0, 2**32)")
        if density_warmup is not None:
            if not isinstance(density_warmup, DensityWarmup):
                raise ValueError(f"density_warmup {density_warmup!r} is not None nor a "
                                 f"gradcomp.torch.DensityWarmup")
            if method not in SPARSE_METHODS:
                raise ValueError(f"density_warmup is for the sparse methods, not {method!r}")
        if momentum and method not in SPARSE_METHODS:
            raise ValueError(f"momentum correction {momentum!r} is for the sparse methods; with "
                             f"method {method!r} keep the optimizer's momentum instead")
        auto = self._auto_options(method, density, merge_buckets, critical_density, eta,
                                  min_saving, auto_interval, dense_share, alpha_seconds,
                                  beta_seconds_per_byte, select_seconds_per_element)
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("gradcomp.torch.HookState: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first)")
        self.method = method
        self.density = float(density)
        self.interval = interval
        self.momentum = float(momentum) if momentum else 0.0
        self.factor_masking = factor_masking
        self.seed = seed
        self.threads = threads
        self.nonfinite = nonfinite
        self.history_limit = history_limit
        self.levels = levels
        self.quantization_bucket = quantization_bucket
        self.density_warmup = density_warmup
        self.merge_buckets = merge_buckets
        # merge_buckets: this iteration's ((message, layout, stats), bucket buffer, future), in
        # arrival order
        self._held = []
        self._merged_capacity = _Capacity()
        self._iterations = 0
        self.process_group = process_group if process_group is not None else dist.new_group()
        self.world_size = dist.get_world_size(self.process_group)
        self.rank = dist.get_rank(self.process_group)
        self._global_ranks = dist.get_process_group_ranks(self.process_group)
        self._slots = {}
        self._order = []
        self._layouts = {}
        self._pending = None
        self._iteration = {}
        self.history = []
        """Statistics of the last ``history_limit`` completed iterations, a dict per iteration
        (see statistics())."""
        # method="auto": the settings, rank 0's calibration (None until the first bucket), a
        # regime detector per bucket index, the priced decisions per (elements, critical), the
        # learning-rate drops announced since the last interval ended, compressor states of a
        # loaded state dict waiting for their buckets
        self.critical_density = auto.get("critical_density")
        self.eta = auto.get("eta")
        self.min_saving = auto.get("min_saving")
        self.auto_interval = auto.get("auto_interval")
        self.dense_share = auto.get("dense_share")
        self._auto_given = auto.get("given")
        # the buckets of fewer values are sent whole (dense_share), from the bucket sizes of the
        # last completed iteration (None before one completed)
        self._dense_below = None
        self._calibration = None
        self._regimes = {}
        self._prices = {}
        self._dropped = 0
        self._drop_lock = threading.Lock()
        # the buckets of an interval's last iteration, until the next iteration's first bucket
        # ends the interval (None: no interval waiting to end); then, within that iteration,
        # the buckets whose interval ends when they arrive, with the drops announced before
        self._interval_ending = None
        self._ending_now = {}
        self._pending_compressors = None
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="gradcomp-hook", daemon=True)
        self._thread.start()

    @staticmethod
    def _auto_options(method, density, merge_buckets, critical_density, eta, min_saving,
                      auto_interval, dense_share, alpha_seconds, beta_seconds_per_byte,
                      select_seconds_per_element):
        """method="auto"'s settings, validated (ValueError naming the argument and its limit);
        {} for another method, which must leave them None."""
        given = {"critical_density": critical_density, "eta": eta, "min_saving": min_saving,
                 "auto_interval": auto_interval, "dense_share": dense_share,
                 "alpha_seconds": alpha_seconds,
                 "beta_seconds_per_byte": beta_seconds_per_byte,
                 "select_seconds_per_element": select_seconds_per_element}
        if method != "auto":
            for name, value in given.items():
                if value is not None:
                    raise ValueError(f"{name} {value!r} is for method 'auto', not {method!r}")
            return {}
        # momentum and density_warmup are refused for every non-sparse method, "auto" included
        if merge_buckets:
            raise ValueError("merge_buckets is not offered with method 'auto' (its dense "
                             "buckets go through one dist.all_reduce each)")

        def nonnegative(name, value):
            return None if value is None else _real(
                name, value, lambda v: math.isfinite(v) and v >= 0, "is not finite and >= 0")

        out = {}
        if critical_density is None:
            critical_density = max(0.1, float(density))
        out["critical_density"] = _real("critical_density", critical_density,
                                        lambda v: density <= v <= 1.0,
                                        f"is outside [density {density!r}, 1]")
        out["eta"] = _real("eta", 0.5 if eta is None else eta,
                           lambda v: math.isfinite(v) and v > 0, "is not finite and > 0")
        out["min_saving"] = _real("min_saving", 0.1 if min_saving is None else min_saving,
                                  lambda v: 0.0 <= v < 1.0, "is outside [0, 1)")
        out["auto_interval"] = _positive_int("auto_interval",
                                             50 if auto_interval is None else auto_interval)
        out["dense_share"] = _real("dense_share", 0.0 if dense_share is None else dense_share,
                                   lambda v: 0.0 <= v < 1.0, "is outside [0, 1)")
        alpha = nonnegative("alpha_seconds", alpha_seconds)
        beta = nonnegative("beta_seconds_per_byte", beta_seconds_per_byte)
        if (alpha is None) != (beta is None):
            raise ValueError(f"alpha_seconds {alpha_seconds!r} and beta_seconds_per_byte "
                             f"{beta_seconds_per_byte!r}: give both or neither")
        out["given"] = {"alpha_seconds": alpha, "beta_seconds_per_byte": beta,
                        "select_seconds_per_element": nonnegative(
                            "select_seconds_per_element", select_seconds_per_element)}
        return out

    # ---- statistics -------------------------------------------------------------------
    def statistics(self):
        """The last completed iteration's statistics: iteration (0-based), buckets, numel,
        k_selected (values sent), density (k_selected / numel), target_density (sparse methods:
        the density asked for, the warm-up's when there is one), wire_bytes (this rank's
        encoded messages), sent_bytes (what this rank's collectives sent), collectives (the
        sparse allgather's all_gathers), compression_seconds, exchange_seconds (the collectives
        and the averaging); with method "auto" also ``auto`` (per bucket in the order sent: a
        dict of bucket (its index), numel, method ("dense" or "sparse"), density (1 for dense)
        and critical (its regime)) and, at the first iteration of every interval but the first,
        ``auto_interval_end`` (the previous interval's end, at this iteration's first bucket;
        per bucket: bucket, norm (of its averaged gradient summed over the interval that
        ended), change (relative to the interval before; None for the first) and critical (the
        regime of the interval this iteration starts)); None before the first iteration ends."""
        self.synchronize()
        return dict(self.history[-1]) if self.history else None

    def synchronize(self):
        """Waits until every queued bucket is averaged."""
        self._queue.join()

    # ---- method="auto" ----------------------------------------------------------------
    def learning_rate_dropped(self, intervals=1):
        """Method "auto": announces a learning-rate drop (call it on every rank, between
        iterations, when the scheduler lowers the rate): when the current interval ends (at the
        first bucket after its last iteration, so a drop announced right after an interval's
        last iteration counts for the interval starting there, as in gradcomp-train) every
        bucket's regime detector is told (``critical_regime::learning_rate_dropped``), so the
        next ``intervals`` intervals (>= 1) are critical (Accordion lowers compression after
        each decay). Local: no communication. Raises ValueError for another method or
        intervals < 1."""
        if self.method != "auto":
            raise ValueError(f"learning_rate_dropped is for method 'auto', not {self.method!r}")
        _positive_int("intervals", intervals)
        self.synchronize()
        with self._drop_lock:
            self._dropped = max(self._dropped, intervals)

    def auto_report(self):
        """Method "auto": the calibration (None before the first bucket: alpha_seconds,
        beta_seconds_per_byte, select_seconds_per_element, the values every rank uses, rank
        0's; and measured, this rank's own measurements: bytes, seconds (the median slowest
        all_reduce per size), fit (``_core.fit_ring_allreduce``'s dict), select_elements (the
        bucket the selection was timed on); None where everything was given or P = 1) and per
        bucket of the last iteration, in index order, a dict of bucket, numel, critical,
        last_change (of its regime detector; None before its first interval ended) and the
        decision in its regime (``_core.choose_exchange``'s: method, density, chosen,
        candidates, and whole: True where the bucket is under dense_share's bound), dense_share
        and dense_below_elements (the bound, from the last completed iteration's bucket sizes;
        None before one completed). Waits for the queued buckets first. Raises ValueError for
        another method."""
        if self.method != "auto":
            raise ValueError(f"auto_report is for method 'auto', not {self.method!r}")
        self.synchronize()
        buckets = []
        for index in sorted(self._regimes):
            layout, regime = self._layouts.get(index), self._regimes[index]
            if layout is None:
                continue
            change = regime.last_change
            buckets.append({"bucket": index, "numel": layout.numel, "critical": regime.critical,
                            "last_change": change if math.isfinite(change) else None,
                            "decision": self._decision(layout.numel, regime.critical)
                            if self._calibration is not None else None})
        calibration = None if self._calibration is None else dict(self._calibration)
        return {"calibration": calibration, "buckets": buckets, "dense_share": self.dense_share,
                "dense_below_elements": self._dense_below}

    # ---- checkpoints ------------------------------------------------------------------
    def state_dict(self):
        """The error-feedback state: every parameter's residual (and velocity) in the order the
        hooks first saw the parameters (deterministic for the same model and DDP bucket sizes),
        the iterations done (where a density warm-up goes on from) and the options that decide
        it. The compressors' own state (a reused threshold) is not
        kept: after a restart it is re-estimated by the first call, which selects exactly.
        Method "auto" adds ``auto``: the calibration (so a resumed run neither calibrates nor
        decides differently; it replaces costs given to the constructor), every bucket's regime
        detector and compressor (density and reused threshold, restored into the bucket of the
        same index and size the resumed hooks see first), the learning-rate drops announced
        and not yet used, an interval end waiting for the next bucket, every parameter's sum of
        averaged gradients in the current interval, dense_share's bound and the decisions in
        force."""
        self.synchronize()
        return {
            "format": _STATE_FORMAT,
            "options": self._options(),
            "shapes": [tuple(s.param.shape) for s in self._order],
            "residuals": [s.residual.clone() for s in self._order],
            "velocities": [s.velocity.clone() for s in self._order] if self.momentum else None,
            "iterations": self._iterations,
            "auto": self._auto_state() if self.method == "auto" else None,
        }

    def _auto_state(self):
        """method="auto"'s part of state_dict(): the calibration, the regime detectors and the
        compressors (their density and reused threshold) per bucket index, the drops not yet
        used, the buckets of an interval whose end waits for the next bucket, every parameter's
        sum of averaged gradients in the current interval, dense_share's bound (dense_below)
        and the decisions in force (for the record: they follow from the rest)."""
        decisions = {}
        if self._calibration is not None:
            for index, regime in self._regimes.items():
                layout = self._layouts.get(index)
                if layout is not None:
                    d = self._decision(layout.numel, regime.critical)
                    decisions[index] = {"numel": layout.numel, "critical": regime.critical,
                                        "method": d["method"], "density": d["density"],
                                        "whole": d["whole"]}
        return {
            "calibration": None if self._calibration is None else dict(self._calibration),
            "regimes": {i: r.state() for i, r in self._regimes.items()},
            "dropped": self._dropped,
            "interval_ending": None if self._interval_ending is None else
            list(self._interval_ending),
            "accumulated": [s.accumulated.clone() for s in self._order],
            "compressors": {i: {"numel": l.numel, "density": l.density,
                                "state": l.compressor.state()}
                            for i, l in self._layouts.items() if l.compressor is not None},
            "decisions": decisions,
            "dense_below": self._dense_below,
        }

    def load_state_dict(self, state):
        """Restores what state_dict() returned. Before the first iteration the values wait until
        the hooks see each parameter. A method "auto" state dict written before ``dense_share``
        existed loads as ``dense_share`` 0. Raises ValueError naming what differs (format, an
        option, the number or shape of the parameters)."""
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ValueError(f"not a {_STATE_FORMAT} state dict")
        options, saved = self._options(), state["options"]
        if saved.get("method") == "auto" and "dense_share" not in saved:
            saved = dict(saved, dense_share=0.0)  # written before dense_share: none whole
        for key in list(options) + [k for k in saved if k not in options]:
            here, there = options.get(key), saved.get(key)
            if there != here:
                raise ValueError(f"option {key} is {there!r} in the state dict, {here!r} here")
        shapes, residuals = [tuple(s) for s in state["shapes"]], state["residuals"]
        velocities = state["velocities"] or [None] * len(residuals)
        if len(shapes) != len(residuals) or len(velocities) != len(residuals):
            raise ValueError("state dict: shapes, residuals and velocities differ in length")
        for i, (shape, r) in enumerate(zip(shapes, residuals)):
            if r.dtype != torch.float32 or r.numel() != math.prod(shape):
                raise ValueError(f"state dict: residual {i} has {r.numel()} {r.dtype} values, "
                                 f"its parameter shape {shape} float32")
        iterations = state.get("iterations", 0)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
            raise ValueError(f"state dict: iterations {iterations!r} is not an integer >= 0")
        auto = state.get("auto")
        if (auto is None) != (self.method != "auto"):
            raise ValueError("state dict: method 'auto' state missing or unexpected")
        accumulated = [None] * len(residuals)
        if auto is not None:
            accumulated = auto["accumulated"]
            if len(accumulated) != len(residuals) or any(
                    a.dtype != torch.float32 or a.numel() != r.numel()
                    for a, r in zip(accumulated, residuals)):
                raise ValueError("state dict: the auto state's accumulated gradients differ "
                                 "from the residuals in count, size or type")
            regimes = {}
            for index, regime_state in auto["regimes"].items():
                regimes[index] = _core.CriticalRegime(self.eta)
                regimes[index].load_state(regime_state)
        self.synchronize()
        self._iterations = iterations
        self._pending = list(zip(shapes, residuals, velocities, accumulated))
        if auto is not None:
            self._calibration = None if auto["calibration"] is None else dict(auto["calibration"])
            self._regimes = regimes
            self._prices = {}
            with self._drop_lock:
                self._dropped = int(auto["dropped"])
            ending = auto.get("interval_ending")  # absent: written where intervals ended at once
            self._interval_ending = None if ending is None else list(ending)
            self._pending_compressors = dict(auto["compressors"])
            self._dense_below = auto.get("dense_below")
        if self._order:
            if len(self._order) != len(self._pending):
                raise ValueError(f"state dict has {len(self._pending)} parameters, the hooks "
                                 f"have seen {len(self._order)}")
            for slot in self._order:
                self._restore(slot)
            self._pending = None
            if auto is not None:
                for index, layout in self._layouts.items():
                    self._restore_compressor(index, layout)
                    layout.dirty = bool(layout.residual.any())
                self._pending_compressors = None

    def _restore_compressor(self, index, layout):
        """method="auto": the compressor state a loaded state dict saved for bucket `index`,
        into `layout`'s compressor if the bucket has the same size (else the first call selects
        exactly, as after a restart without one)."""
        saved = (self._pending_compressors or {}).pop(index, None)
        if saved is None or saved["numel"] != layout.numel or layout.compressor is None:
            return
        layout.compressor.load_state(saved["state"])
        layout.density = saved["density"]

    def _options(self):
        options = {"method": self.method, "density": self.density, "interval": self.interval,
                   "momentum": self.momentum, "world_size": self.world_size}
        if self.method == "auto":
            options.update(critical_density=self.critical_density, eta=self.eta,
                           min_saving=self.min_saving, auto_interval=self.auto_interval,
                           dense_share=self.dense_share)
        if self.momentum and not self.factor_masking:
            options["factor_masking"] = False
        if self.method == "qsgd":
            options["levels"] = self.levels
        if self.method in QUANTIZER_METHODS:
            options["quantization_bucket"] = self.quantization_bucket
        return options

    def _restore(self, slot):
        if slot.order >= len(self._pending):
            raise ValueError(f"state dict has {len(self._pending)} parameters, the hooks see "
                             f"parameter {slot.order}")
        shape, residual, velocity, accumulated = self._pending[slot.order]
        if shape != tuple(slot.param.shape):
            raise ValueError(f"state dict: parameter {slot.order} has shape {shape}, the "
                             f"model's {tuple(slot.param.shape)} (restore into the same model "
                             f"with the same DDP bucket sizes)")
        slot.residual.copy_(residual)
        if slot.velocity is not None and velocity is not None:
            slot.velocity.copy_(velocity)
        if slot.accumulated is not None and accumulated is not None:
            slot.accumulated.copy_(accumulated)

    # ---- the communication thread -----------------------------------------------------
    def _submit(self, work, bucket):
        buffer = bucket.buffer()
        if buffer.dtype != torch.float32 or buffer.device.type != "cpu":
            raise ValueError(f"gradcomp hooks need float32 CPU buckets, got {buffer.dtype} on "
                             f"{buffer.device}")
        future = torch.futures.Future()
        self._queue.put((work, buffer, bucket.parameters(), bucket.index(), bucket.is_last(),
                         future))
        return future

    def _run(self):
        while True:
            work, buffer, params, index, last, future = self._queue.get()
            try:
                if self.merge_buckets:
                    self._run_merged(work, buffer, params, index, last, future)
                else:
                    work(buffer, params, index)
                    if last:
                        self._end_iteration()
                    future.set_result(buffer)
            except BaseException as e:  # handed to DDP, which raises it in backward
                held, self._held = self._held, []
                for _, _, f in held:
                    if not f.done():
                        f.set_exception(e)
                if not future.done():
                    future.set_exception(e)
            finally:
                self._queue.task_done()

    def _run_merged(self, work, buffer, params, index, last, future):
        """merge_buckets: compress the bucket now, exchange every held bucket at the last."""
        if getattr(work, "__func__", None) is not HookState._sparse_allgather:
            raise ValueError("merge_buckets is for sparse_allgather_hook (the ring hooks run one "
                             "allreduce per bucket)")
        self._held.append((self._compress_bucket(buffer, params, index), buffer, future))
        if not last:
            return
        # held until done: whatever fails on the way fails every held future (_run)
        self._exchange_merged(self._held)
        self._end_iteration()
        held, self._held = self._held, []
        for _, b, f in held:
            f.set_result(b)

    def _count(self, **values):
        for k, v in values.items():
            self._iteration[k] = self._iteration.get(k, 0) + v

    def _end_iteration(self):
        it = self._iteration
        it["iteration"] = self._iterations
        self._iterations += 1
        it["density"] = it.get("k_selected", 0) / it["numel"] if it.get("numel") else 0.0
        if self.method == "auto":
            self._pending_compressors = None  # what the first iteration did not claim
            self._ending_now = {}  # buckets of the ended interval that did not come again
            if "auto_interval_end" in it:
                it["auto_interval_end"].sort(key=lambda e: e["bucket"])
            sizes = [b["numel"] for b in it.get("auto", [])]
            if sizes:  # the same sizes on every rank (DDP's buckets)
                self._dense_below = _core.dense_below_elements(sizes, self.dense_share)
            if self._iterations % self.auto_interval == 0:
                # the interval ends at the next iteration's first bucket (_auto_exchange): a
                # drop announced between the two iterations then makes the interval that
                # starts there critical, as gradcomp-train's boundary does
                self._interval_ending = [b["bucket"] for b in it.get("auto", [])]
        self.history.append(it)
        if len(self.history) > self.history_limit:
            del self.history[:len(self.history) - self.history_limit]
        self._iteration = {}
        if self._pending is not None and len(self._order) != len(self._pending):
            raise ValueError(f"state dict has {len(self._pending)} parameters, the model "
                             f"{len(self._order)}")
        self._pending = None

    def _layout(self, params, index, numel, method):
        """The layout of bucket `index`; a new one (every parameter's residual moved into it)
        when DDP laid the bucket out anew."""
        key = tuple(id(p) for p in params)
        layout = self._layouts.get(index)
        if layout is not None and layout.key == key:
            return layout
        total = sum(p.numel() for p in params)
        if total != numel:
            raise ValueError(f"bucket {index} holds {numel} values, its parameters {total}")
        residual = torch.zeros(numel, dtype=torch.float32)
        velocity = torch.zeros(numel, dtype=torch.float32) if self.momentum else None
        auto = self.method == "auto"
        accumulated = torch.zeros(numel, dtype=torch.float32) if auto else None
        offset = 0
        for p in params:
            n = p.numel()
            slot = self._slots.get(id(p))
            fresh = slot is None
            if fresh:
                slot = _Slot(p, len(self._order))
                self._slots[id(p)] = slot
                self._order.append(slot)
            else:
                residual[offset:offset + n].copy_(slot.residual)
                if velocity is not None:
                    velocity[offset:offset + n].copy_(slot.velocity)
                if accumulated is not None:
                    accumulated[offset:offset + n].copy_(slot.accumulated)
            slot.residual = residual[offset:offset + n]
            slot.velocity = velocity[offset:offset + n] if velocity is not None else None
            slot.accumulated = accumulated[offset:offset + n] if auto else None
            if fresh and self._pending is not None:
                self._restore(slot)
            offset += n
        compressor = None
        if method != "fp32" or self.nonfinite != "propagate":
            compressor = _core.Compressor(method, self.density, self.interval, self.seed,
                                          self.threads, self.nonfinite, self.levels,
                                          self.quantization_bucket)
        layout = _Layout(key, numel, residual, velocity, compressor, accumulated)
        if auto:
            self._restore_compressor(index, layout)
            layout.dirty = bool(residual.any())
        self._layouts[index] = layout
        return layout

    # ---- the exchanges ----------------------------------------------------------------
    def _sparse_allgather(self, buffer, params, index):
        wire, layout, st = self._compress_bucket(buffer, params, index)
        self._gather_average(wire, layout, st, buffer)

    def _gather_average(self, wire, layout, st, buffer):
        """Every rank's message `wire` gathered, decoded and averaged into `buffer`."""
        t0 = time.perf_counter()
        gathered, sizes, offset, rounds, sent = self._gather_messages(wire, layout)
        _core.decode_average(gathered.numpy(), sizes.numpy(), buffer.numpy(),
                             float(self.world_size), offset)
        # headroom for the next call's sizes; every rank computes it from the same sizes
        layout.capacity = _core.hook_row_capacity(int(sizes.max()))
        self._count_compressed(st)
        self._count(sent_bytes=sent, collectives=rounds, exchange_seconds=time.perf_counter() - t0)

    def _auto_exchange(self, buffer, params, index):
        """method="auto": bucket `index` sent as its regime's decision says (dense through
        dist.all_reduce, or sparse through the allgather), its average added to the interval's
        accumulation, the choice recorded in the iteration's history."""
        layout = self._layout(params, index, buffer.numel(), _AUTO_COMPRESSOR)
        if self._calibration is None:
            self._calibrate(buffer)
        if self._interval_ending is not None:  # the first bucket after an interval's last
            with self._drop_lock:
                dropped, self._dropped = self._dropped, 0
            self._ending_now = {i: dropped for i in self._interval_ending}
            self._interval_ending = None
            # detectors of buckets no longer in the iteration are dropped
            self._regimes = {i: r for i, r in self._regimes.items() if i in self._ending_now}
        if index in self._ending_now:  # (a resumed run sees each bucket's layout only here)
            self._iteration.setdefault("auto_interval_end", []).append(
                self._end_interval(index, layout, self._ending_now.pop(index)))
        regime = self._regimes.get(index)
        if regime is None:  # a new bucket: critical until its first interval ends
            regime = self._regimes[index] = _core.CriticalRegime(self.eta)
        critical = regime.critical
        decision = self._decision(layout.numel, critical)
        if decision["method"] == "sparse":
            density = decision["density"]
            if density != (layout.density or self.density):
                layout.compressor.set_density(density)
            layout.density = density
            wire, st = layout.compressor.compress(layout.residual.numpy(), buffer.numpy())
            layout.dirty = True
            self._gather_average(wire, layout, st, buffer)
        else:
            self._dense_average(buffer, layout)
        layout.accumulated.add_(buffer)
        self._iteration.setdefault("auto", []).append(
            {"bucket": index, "numel": layout.numel, "method": decision["method"],
             "density": decision["density"], "critical": critical, "whole": decision["whole"]})

    def _dense_average(self, buffer, layout):
        """The bucket's average through dist.all_reduce as DDP's default hook computes it
        (divided by P, then summed), after the residual left by sparse iterations was added
        (and, with nonfinite="raise", the values checked) by an fp32 compressor with error
        feedback, which leaves the residual 0."""
        seconds = 0.0
        if layout.dirty or self.nonfinite != "propagate":
            if layout.flush is None:
                layout.flush = _core.Compressor("fp32", 1.0, nonfinite=self.nonfinite)
            seconds = layout.flush.compress_dense(layout.residual.numpy(), buffer.numpy(),
                                                  buffer.numpy())["compression_seconds"]
            layout.dirty = False
        t0 = time.perf_counter()
        buffer.div_(self.world_size)
        dist.all_reduce(buffer, group=self.process_group)
        n, p = layout.numel, self.world_size
        self._count(buckets=1, numel=n, k_selected=n, wire_bytes=4 * n,
                    sent_bytes=2 * (p - 1) * 4 * n // p, collectives=1,
                    compression_seconds=seconds, exchange_seconds=time.perf_counter() - t0)

    def _whole(self, numel):
        """Whether a bucket of `numel` values is under dense_share's bound (sent whole)."""
        return self._dense_below is not None and numel < self._dense_below

    def _decision(self, numel, critical):
        """choose_exchange's decision for a bucket of `numel` values in its regime, priced on
        the calibration, with ``whole``: a bucket under dense_share's bound (whole True) gets
        the dense candidate whatever the prices say."""
        priced = self._decision_priced(numel, critical)
        if not self._whole(numel):
            return dict(priced, whole=False)
        return dict(priced, method="dense", density=1.0, chosen=priced["candidates"][0],
                    whole=True)

    def _decision_priced(self, numel, critical):
        """choose_exchange's decision for `numel` values in the regime (cached: the same inputs
        give the same decision)."""
        key = (numel, critical)
        decision = self._prices.get(key)
        if decision is None:
            c = self._calibration
            decision = _core.choose_exchange(
                numel, c["alpha_seconds"], c["beta_seconds_per_byte"], self.world_size,
                c["select_seconds_per_element"], self.density, self.critical_density,
                self.min_saving, critical, 0.0, value_bytes=4, indices="delta_varint",
                hook_rows=True)
            self._prices[key] = decision
        return decision

    def _end_interval(self, index, layout, dropped):
        """Ends bucket `index`'s interval (at its first arrival after the interval's last
        iteration): its detector is told of `dropped` learning-rate drop intervals announced
        before, then observes the norm of the bucket's averaged gradient summed over the
        interval (a non-finite norm is not observed: the model diverged); the sum restarts.
        Returns the record for history."""
        regime = self._regimes[index]  # every bucket of the ended iteration has one
        if dropped:
            regime.learning_rate_dropped(dropped)
        norm = math.sqrt(_core.sum_of_squares(layout.accumulated.numpy()))
        if math.isfinite(norm):
            regime.observe(norm)
        layout.accumulated.zero_()
        change = regime.last_change
        return {"bucket": index, "norm": norm,
                "change": change if math.isfinite(change) else None,
                "critical": regime.critical}

    def _calibrate(self, buffer):
        """method="auto"'s inputs, at the first bucket (collective when something is measured,
        which the options decide alike on every rank): alpha and beta from dist.all_reduce of
        _CALIBRATION_BYTES on the process group (the median of the slowest rank's times per
        size, fitted by _core.fit_ring_allreduce as gradcomp::mpi::calibrate_ring_allreduce
        does), the reused threshold's seconds per element timed on this bucket's values, then
        rank 0's values broadcast to every rank. Given values are not measured; one rank
        measures nothing (every exchange costs 0 there)."""
        p = self.world_size
        given = self._auto_given
        alpha, beta = given["alpha_seconds"], given["beta_seconds_per_byte"]
        select = given["select_seconds_per_element"]
        measured = {}
        if alpha is None:
            alpha = beta = 0.0
            if p > 1:
                seconds = [self._time_all_reduce(b) for b in _CALIBRATION_BYTES]
                fit = _core.fit_ring_allreduce([float(b) for b in _CALIBRATION_BYTES], seconds, p)
                alpha, beta = fit["alpha_seconds"], fit["beta_seconds_per_byte"]
                measured.update(bytes=list(_CALIBRATION_BYTES), seconds=seconds, fit=fit)
        if select is None:
            select = 0.0
            if p > 1:
                select = self._time_selection(buffer)
                measured["select_elements"] = buffer.numel()
        if measured:
            agreed = torch.tensor([alpha, beta, select], dtype=torch.float64)
            dist.broadcast(agreed, src=self._global_ranks[0], group=self.process_group)
            alpha, beta, select = agreed.tolist()
        self._calibration = {"alpha_seconds": alpha, "beta_seconds_per_byte": beta,
                             "select_seconds_per_element": select,
                             "measured": measured or None}
        self._prices = {}

    def _time_all_reduce(self, nbytes):
        """The median over _CALIBRATION_REPETITIONS runs (after one warm-up) of the slowest
        rank's seconds for dist.all_reduce of `nbytes` bytes of float32, each run after a
        one-value all_reduce that lines the ranks up. Collective."""
        data = torch.ones(nbytes // 4, dtype=torch.float32)
        line_up = torch.zeros(1, dtype=torch.float32)
        times = []
        for rep in range(_CALIBRATION_REPETITIONS + 1):
            dist.all_reduce(line_up, group=self.process_group)
            t0 = time.perf_counter()
            dist.all_reduce(data, group=self.process_group)
            slowest = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=self.process_group)
            if rep > 0:  # the first run warms up buffers and connections
                times.append(slowest.item())
        return sorted(times)[len(times) // 2]

    def _time_selection(self, buffer):
        """The reused threshold's mean seconds per element over 2 max(3, interval) calls
        (after one) at ``density`` with error feedback on a copy of `buffer`'s values, as
        gradcomp-train's auto times it on its largest layer (local)."""
        c = _core.Compressor(_AUTO_COMPRESSOR, self.density, self.interval, self.seed,
                             self.threads)
        grad = buffer.clone().numpy()
        residual = np.zeros(grad.size, dtype=np.float32)
        calls = 2 * max(3, self.interval)
        seconds = 0.0
        for call in range(calls + 1):
            _, st = c.compress(residual, grad)
            if call > 0:
                seconds += st["compression_seconds"]
        return seconds / calls / max(1, grad.size)

    def _exchange_merged(self, held):
        """merge_buckets: one gathered message per rank for the buckets `held` (the B sizes as
        int64, then the B encoded messages), then each bucket's messages decoded and averaged
        into its buffer in rank order, as _sparse_allgather does per bucket."""
        p = self.world_size
        t0 = time.perf_counter()
        head = torch.tensor([w.size for (w, _, _), _, _ in held], dtype=torch.int64)
        combined = np.concatenate([head.view(torch.uint8).numpy()] +
                                  [w for (w, _, _), _, _ in held])
        gathered, sizes, offset, rounds, sent = self._gather_messages(combined,
                                                                      self._merged_capacity)
        rows = gathered.view(p, -1)
        heads = rows[:, offset:offset + head.numel() * _SIZE_BYTES].contiguous()
        heads = heads.view(torch.int64).view(p, head.numel())
        start = torch.full((p,), offset + head.numel() * _SIZE_BYTES, dtype=torch.int64)
        for b, (_, buffer, _) in enumerate(held):
            bucket_sizes = heads[:, b].contiguous()
            width = max(int(bucket_sizes.max()), 1)
            messages = torch.zeros(p, width, dtype=torch.uint8)
            for r in range(p):
                at, n = int(start[r]), int(bucket_sizes[r])
                messages[r, :n] = rows[r, at:at + n]
            start += bucket_sizes
            _core.decode_average(messages.view(-1).numpy(), bucket_sizes.numpy(), buffer.numpy(),
                                 float(p), 0)
        self._merged_capacity.capacity = _core.hook_row_capacity(int(sizes.max()))
        for (_, _, st), _, _ in held:
            self._count_compressed(st)
        self._count(sent_bytes=sent, collectives=rounds, exchange_seconds=time.perf_counter() - t0)

    def _count_compressed(self, st):
        self._count(buckets=1, numel=st["numel"], k_selected=st["k_selected"],
                    wire_bytes=st["wire_bytes"], compression_seconds=st["compression_seconds"])

    def _compress_bucket(self, buffer, params, index):
        """The bucket's encoded message (error feedback on its parameters' residuals), its
        layout and the compression's statistics."""
        layout = self._layout(params, index, buffer.numel(), self.method)
        velocity = layout.velocity.numpy() if layout.velocity is not None else None
        if layout.compressor is None:  # fp32 through the allgather: send the values as they are
            layout.compressor = _core.Compressor("fp32", 1.0)
        if self.method in SPARSE_METHODS:
            target = self.density if self.density_warmup is None else \
                self.density_warmup.density(self._iterations, self.density)
            if target != (layout.density or self.density):
                layout.compressor.set_density(target)
            layout.density = target
            self._iteration["target_density"] = target
        wire, st = layout.compressor.compress(layout.residual.numpy(), buffer.numpy(), velocity,
                                              self.momentum, self.factor_masking)
        return wire, layout, st

    def _gather_messages(self, wire, layout):
        """Gathers every rank's encoded message. In one all_gather when the messages fit the
        bucket's capacity (each row: the 8-byte size, then the message, zero padded); else (the
        first call, or a message larger than the capacity: every rank sees the sizes, so all
        decide alike) the sizes, then the messages padded to the largest. Returns the gathered
        rows, the sizes, the messages' offset in a row, the collectives run and the bytes this
        rank sent."""
        p = self.world_size
        cap = layout.capacity
        rounds, sent = 0, 0
        if cap:
            row = _SIZE_BYTES + cap
            send = torch.zeros(row, dtype=torch.uint8)
            send[:_SIZE_BYTES] = torch.tensor([wire.size], dtype=torch.int64).view(torch.uint8)
            if wire.size <= cap:
                send[_SIZE_BYTES:_SIZE_BYTES + wire.size] = torch.from_numpy(wire)
            gathered = torch.empty(p * row, dtype=torch.uint8)
            dist.all_gather(list(gathered.view(p, row)), send, group=self.process_group)
            sizes = gathered.view(p, row)[:, :_SIZE_BYTES].contiguous().view(torch.int64)
            sizes = sizes.view(p)
            rounds, sent = 1, (p - 1) * row
            if int(sizes.max()) <= cap:
                return gathered, sizes, _SIZE_BYTES, rounds, sent
        else:
            size = torch.tensor([wire.size], dtype=torch.int64)
            sizes = torch.empty(p, dtype=torch.int64)
            dist.all_gather(list(sizes.view(p, 1)), size, group=self.process_group)
            rounds, sent = 1, (p - 1) * _SIZE_BYTES
        capacity = int(sizes.max())
        send = torch.zeros(capacity, dtype=torch.uint8)
        send[:wire.size] = torch.from_numpy(wire)
        gathered = torch.empty(p * capacity, dtype=torch.uint8)
        dist.all_gather(list(gathered.view(p, capacity)), send, group=self.process_group)
        return gathered, sizes, 0, rounds + 1, sent + (p - 1) * capacity

    def _ring(self, buffer, params, index, method):
        if method not in DENSE_METHODS:
            raise ValueError(f"ring_allreduce_hook sums dense buckets; method {method!r} is "
                             f"sparse (use sparse_allgather_hook, or method fp32, fp16, bf16)")
        layout = self._layout(params, index, buffer.numel(), method)
        seconds = 0.0
        if layout.compressor is not None:  # round to fp16 / bf16, the error stays as residual
            st = layout.compressor.compress_dense(layout.residual.numpy(), buffer.numpy(),
                                                  buffer.numpy())
            seconds = st["compression_seconds"]
        t0 = time.perf_counter()
        sent = _ring_average(buffer, _WIRE_DTYPES[method], self.rank, self.world_size,
                             self._global_ranks, self.process_group)
        n = buffer.numel()
        self._count(buckets=1, numel=n, k_selected=n, wire_bytes=n * buffer.element_size()
                    if method == "fp32" else 2 * n, sent_bytes=sent,
                    compression_seconds=seconds, exchange_seconds=time.perf_counter() - t0)


def _ring_average(acc, wire_dtype, rank, size, global_ranks, group):
    """Averages the fp32 tensor `acc` in place over the group with a ring allreduce: P - 1
    reduce-scatter steps (partial sums kept in fp32, sent as `wire_dtype`), the owner of each
    chunk rounds it to the wire type, P - 1 allgather steps, then division by P; the result is
    bit-identical on every rank. Returns the bytes this rank sent."""
    if size == 1:
        return 0
    n = acc.numel()
    bounds = [i * (n // size) + min(i, n % size) for i in range(size + 1)]

    def chunk(c):
        return acc[bounds[c]:bounds[c + 1]]

    right, left = global_ranks[(rank + 1) % size], global_ranks[(rank - 1) % size]
    exact = wire_dtype == torch.float32
    sent = 0

    def step(send_chunk, recv_chunk):
        out = chunk(send_chunk)
        out = out if exact else out.to(wire_dtype)
        into = torch.empty(bounds[recv_chunk + 1] - bounds[recv_chunk], dtype=wire_dtype)
        works = [dist.isend(out, right, group=group), dist.irecv(into, left, group=group)]
        for w in works:
            w.wait()
        return into, out.numel() * out.element_size()

    for s in range(size - 1):
        into, b = step((rank - s) % size, (rank - s - 1) % size)
        chunk((rank - s - 1) % size).add_(into)
        sent += b
    own = chunk((rank + 1) % size)
    if not exact:
        own.copy_(own.to(wire_dtype))
    for s in range(size - 1):
        into, b = step((rank + 1 - s) % size, (rank - s) % size)
        chunk((rank - s) % size).copy_(into)
        sent += b
    acc.div_(size)
    return sent


def sparse_allgather_hook(state, bucket):
    """DDP communication hook: the bucket's average over the ranks through gradcomp's compressor
    (``state.method`` at ``state.density``) with error feedback and an allgather of the encoded
    messages. Register with ``ddp_model.register_comm_hook(state, sparse_allgather_hook)``;
    every rank must register it. Returns a torch.futures.Future of the averaged bucket. With
    ``HookState(method="auto")`` each bucket goes dense (fp32, divided by P, then
    ``dist.all_reduce``) or sparse (the reused threshold at its regime's density) as the
    state's decision for the bucket says; the first bucket calibrates (a collective) unless the
    costs were given."""
    if state.method == "auto":
        return state._submit(state._auto_exchange, bucket)
    return state._submit(state._sparse_allgather, bucket)


def ring_allreduce_hook(state, bucket):
    """DDP communication hook: the bucket's average over the ranks through a ring allreduce,
    values sent as ``state.method`` (fp32, fp16 or bf16; the rounding error of fp16 / bf16
    stays in the residual). Every rank must register it. Returns a torch.futures.Future of the
    averaged bucket. Raises ValueError (through the future) for a sparse method, and at once for
    method "auto" (``sparse_allgather_hook`` sends its dense and sparse buckets)."""
    if state.method == "auto":
        raise ValueError("ring_allreduce_hook cannot send method 'auto': register "
                         "sparse_allgather_hook (it sends each bucket dense through "
                         "dist.all_reduce or sparse through the allgather)")
    return state._submit(lambda b, p, i: state._ring(b, p, i, state.method), bucket)


def fp16_hook(state, bucket):
    """ring_allreduce_hook for a ``HookState(method="fp16")``: DDP's fp16_compress_hook with
    error feedback and fp32 partial sums. Raises ValueError for another method."""
    if state.method != "fp16":
        raise ValueError(f"fp16_hook needs HookState(method='fp16'), got {state.method!r}")
    return ring_allreduce_hook(state, bucket)
