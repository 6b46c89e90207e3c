#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch quick start of docs/python.md and docs/choosing.md as a script that runs: a
small DDP model on synthetic data (no data set needed) with gradcomp's sparse allgather hook,
reused threshold at density 0.01 and DGC's momentum correction in the hook; then the setting
recommended for a schedule that drops the learning rate (DGC's density warm-up). It checks what
a user relies on and exits 1 otherwise: the loss falls, every rank holds the same parameters
(DDP's invariant, kept by the hook's average), the hook sent about 1 % of the values, and the
warm-up's density falls from 25 % to the target.
Run on 2 local processes, MPICH's mpiexec as a plain launcher (ranks from PMI_RANK /
PMI_SIZE, or RANK / WORLD_SIZE as torchrun sets them; MPI itself is not used):

    PYTHONPATH=build/python GLOO_SOCKET_IFNAME=lo mpiexec -n 2 /usr/bin/python3 \\
        examples/07_ddp_quick_start/quick_start.py

Needs Debian's python3-torch (run it with /usr/bin/python3) and the gradcomp package built by
CMake (or installed with pip).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import gradcomp.torch as gc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--master-addr", default="127.0.0.1", help="rank 0's address")
    ap.add_argument("--master-port", default="29512")
    a = ap.parse_args()

    torch.set_num_threads(1)
    env = os.environ
    env.setdefault("MASTER_ADDR", a.master_addr)
    env.setdefault("MASTER_PORT", a.master_port)
    dist.init_process_group("gloo", rank=int(env.get("RANK", env.get("PMI_RANK", 0))),
                            world_size=int(env.get("WORLD_SIZE", env.get("PMI_SIZE", 1))))
    rank = dist.get_rank()

    # a regression task: 64 inputs, 8 outputs of a fixed random linear map; each rank draws its
    # own batches
    torch.manual_seed(0)
    teacher = torch.randn(64, 8)

    def train(ddp_model, opt, iterations):
        """The losses of `iterations` steps."""
        data = torch.Generator().manual_seed(1 + rank)
        losses = []
        for _ in range(iterations):
            x = torch.randn(32, 64, generator=data)
            opt.zero_grad()
            loss = F.mse_loss(ddp_model(x), x @ teacher)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    def same_on_every_rank(model):
        """The largest difference of a parameter from rank 0's."""
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        reference = flat.clone()
        dist.broadcast(reference, 0)
        difference = torch.tensor([(flat - reference).abs().max().item()])
        dist.all_reduce(difference, op=dist.ReduceOp.MAX)
        return difference.item() == 0.0

    # the quick start: reused threshold at density 0.01, DGC's momentum correction in the hook
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
    ddp_model = nn.parallel.DistributedDataParallel(model)
    state = gc.HookState(method="reused_threshold", density=0.01, momentum=0.9)  # collective
    ddp_model.register_comm_hook(state, gc.sparse_allgather_hook)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.04, momentum=0)  # momentum is in the hook
    losses = train(ddp_model, opt, a.iterations)
    stats = state.statistics()
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    ok = last < 0.9 * first and same_on_every_rank(model) and stats["density"] < 0.02
    if rank == 0:
        print(f"quick start: loss {first:.4f} -> {last:.4f} over {a.iterations} iterations, "
              f"density {stats['density']:.4f}, {stats['sent_bytes']} bytes sent per iteration",
              flush=True)

    # for a schedule that drops the learning rate (docs/python.md, "Recommended settings"):
    # DGC's density warm-up over one epoch (here 10 iterations), the velocity kept
    iterations_per_epoch = 10
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
    ddp_model = nn.parallel.DistributedDataParallel(model)
    state = gc.HookState(method="reused_threshold", density=0.01, momentum=0.9,
                         factor_masking=False,
                         density_warmup=gc.DensityWarmup(iterations_per_epoch, epochs=1))
    ddp_model.register_comm_hook(state, gc.sparse_allgather_hook)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.04, momentum=0)
    densities = []
    for _ in range(2 * iterations_per_epoch):
        train(ddp_model, opt, 1)
        densities.append(state.statistics()["target_density"])
    ok = ok and densities[0] == 0.25 and densities[-1] == 0.01 and same_on_every_rank(model)
    if rank == 0:
        print(f"density warm-up: target density {densities[0]} -> {densities[-1]} over "
              f"{len(densities)} iterations", flush=True)
        print(f"quick start: {'ok' if ok else 'FAILED'} ({dist.get_world_size()} ranks)",
              flush=True)
    dist.barrier()  # every rank is done with its collectives
    # Leave at once, without destroying the DDP model: with PyTorch 1.13 a process can hang at
    # exit in the DDP Reducer's ProcessGroupGloo destructor (it holds the GIL and waits for
    # gloo's work thread, which waits for the GIL to free a tensor)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
