#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An ordinary PyTorch DDP training script (Fashion-MNIST, a small CNN) with gradcomp's
compression hook added by the two lines marked "gradcomp". Run on 4 local processes, with
MPICH's mpiexec as a plain process launcher (the ranks come from PMI_RANK / PMI_SIZE, or from
RANK / WORLD_SIZE as torchrun sets them; MPI itself is not used):

    PYTHONPATH=build/python GLOO_SOCKET_IFNAME=lo mpiexec -n 4 /usr/bin/python3 \\
        examples/python/ddp_fashion_mnist.py --epochs 1

`--hook none` trains with DDP's own allreduce. Needs Debian's python3-torch (run it with
/usr/bin/python3), dataset-fashion-mnist and the gradcomp package built by CMake.
"""
import argparse
import gzip
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import gradcomp.torch as gc  # gradcomp (1/2)

HOOKS = {"sparse_allgather": gc.sparse_allgather_hook, "ring": gc.ring_allreduce_hook,
         "fp16": gc.fp16_hook}


def load(folder, train):
    """Images (N x 1 x 28 x 28, normalised) and labels of Debian's Fashion-MNIST files."""
    prefix = "train" if train else "t10k"
    with gzip.open(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(images.copy()).float().view(-1, 1, 28, 28) / 255 - 0.2860) / 0.3530
    return x, torch.from_numpy(labels.copy()).long()


def network():
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(7 * 7 * 64, 512), nn.ReLU(), nn.Linear(512, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--hook", choices=["none", *HOOKS], default="sparse_allgather")
    ap.add_argument("--method", default="reused_threshold", help=", ".join(gc.METHODS))
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=0, help="stop after N (0: whole epochs)")
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--master-addr", default="127.0.0.1", help="rank 0's address")
    ap.add_argument("--master-port", default="29511")
    a = ap.parse_args()

    torch.set_num_threads(1)
    env = os.environ
    os.environ.setdefault("MASTER_ADDR", a.master_addr)
    os.environ.setdefault("MASTER_PORT", a.master_port)
    dist.init_process_group("gloo", rank=int(env.get("RANK", env.get("PMI_RANK", 0))),
                            world_size=int(env.get("WORLD_SIZE", env.get("PMI_SIZE", 1))))
    rank, ranks = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(network())
    sparse = a.hook == "sparse_allgather" and a.method in gc.SPARSE_METHODS
    if a.hook != "none":
        method = "fp16" if a.hook == "fp16" else a.method
        state = gc.HookState(method=method, density=a.density, momentum=0.9 if sparse else None)
        model.register_comm_hook(state, HOOKS[a.hook])  # gradcomp (2/2)
    # DGC's momentum correction keeps the momentum in the hook: plain SGD then
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.0 if sparse else 0.9)

    x, y = load(a.data, True)
    x, y = x[rank::ranks], y[rank::ranks]  # this rank's shard
    test_x, test_y = load(a.data, False)
    step = 0
    for epoch in range(a.epochs):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        for b in range(len(x) // a.batch):
            batch = order[b * a.batch:(b + 1) * a.batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            opt.step()
            step += 1
            if a.iterations and step >= a.iterations:
                break
        with torch.no_grad():
            accuracy = (model.module(test_x).argmax(1) == test_y).float().mean().item()
        if rank == 0:
            stats = state.statistics() if a.hook != "none" else None
            sent = f", sent {stats['sent_bytes'] / 1e6:.2f} MB per iteration, density " \
                   f"{stats['density']:.4f}" if stats else ""
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}, test accuracy {accuracy:.4f}"
                  f"{sent}", flush=True)
        if a.iterations and step >= a.iterations:
            break
    dist.barrier()  # every rank is done with its collectives
    # Leave at once, without destroying the DDP model: with PyTorch 1.13 a process can hang at
    # exit in the DDP Reducer's ProcessGroupGloo destructor (it holds the GIL and waits for
    # gloo's work thread, which waits for the GIL to free a tensor)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
