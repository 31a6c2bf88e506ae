#!/usr/bin/python3
"""The PyTorch (CPU) peer of ringtrain's comparisons: the same model zoo and SGD step on the same
synthetic data, timed after a warm-up, in one process or as DDP ranks over gloo. Prints one JSON
line (images/s, peak RSS, loss). The models are plain layer specs, so their parameter and FLOP
counts need no torch. `--ddp` spawns --nproc ranks, or is one rank of those RANK/WORLD_SIZE/MASTER_*
of the environment name (one per emulated node)."""
import argparse
import contextlib
import json
import os
import resource
import socket
import sys
import time

try:
    from . import torch_graphs
except ImportError:  # run as the peer's worker script, beside it
    import torch_graphs

# Input shape (C, H, W) of each model in the comparisons (the graph models': torch_graphs).
NATURAL_SHAPE = {"logreg": (1, 28, 28), "lenet5": (1, 28, 28), "mlp": (3, 32, 32), "svhn-cnn": (3, 32, 32),
                 "vgg11": (3, 32, 32), "alexnet": (3, 32, 32), **torch_graphs.GRAPH_SHAPE}
VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


def model_spec(name):
    """Layers of ringtrain's zoo model, layer for layer (src/nn's zoo): ("conv", out, k, pad),
    ("bn",), ("relu",), ("maxpool", k), ("flatten",), ("linear", out), ("lrn",), ("dropout", p)."""
    if name == "logreg":
        return [("flatten",), ("linear", 10)]
    if name in ("lenet5", "svhn-cnn"):  # LeCun et al. 1998 with ReLU and max-pooling
        pad, hidden = (2, [120, 84]) if name == "lenet5" else (1, [64])
        spec = [("conv", 6, 5, pad), ("relu",), ("maxpool", 2), ("conv", 16, 5, 0 if name == "lenet5" else 1),
                ("relu",), ("maxpool", 2), ("flatten",)]
        return spec + [x for h in hidden for x in (("linear", h), ("relu",))] + [("linear", 10)]
    if name == "mlp":
        return [("flatten",)] + [x for w in (1024, 512, 256, 128, 64, 32) for x in (("linear", w), ("relu",))] + \
            [("linear", 10)]
    if name == "alexnet":  # CIFAR-sized: LRN after the first two convs, dropout before each hidden FC
        return [("conv", 64, 5, 2), ("relu",), ("lrn",), ("maxpool", 2), ("conv", 192, 5, 2), ("relu",), ("lrn",),
                ("maxpool", 2), ("conv", 384, 3, 1), ("relu",), ("conv", 256, 3, 1), ("relu",), ("conv", 256, 3, 1),
                ("relu",), ("maxpool", 2), ("flatten",), ("dropout", 0.5), ("linear", 1024), ("relu",),
                ("dropout", 0.5), ("linear", 1024), ("relu",), ("linear", 10)]
    if name == "vgg11":  # Simonyan & Zisserman's "A" with BatchNorm, one 512->10 classifier
        spec = []
        for v in VGG11:
            spec += [("maxpool", 2)] if v == "M" else [("conv", v, 3, 1), ("bn",), ("relu",)]
        return spec + [("flatten",), ("linear", 10)]
    raise ValueError(f"unknown model '{name}' (known: {', '.join(sorted(NATURAL_SHAPE))})")


def walk(name, shape, nn=None):
    """(parameters, multiply-adds of the forward, of its first weighted layer, torch layers if nn)."""
    c, h, w = shape
    flat, params, macs, first, layers = None, 0, 0, None, []
    for layer in model_spec(name):
        kind, m = layer[0], 0
        if kind == "conv":
            _, out, k, pad = layer
            h, w = h + 2 * pad - k + 1, w + 2 * pad - k + 1
            layers += [nn.Conv2d(c, out, k, padding=pad)] if nn else []
            m, params, c = out * h * w * c * k * k, params + out * c * k * k + out, out
        elif kind == "bn":
            params, layers = params + 2 * c, layers + ([nn.BatchNorm2d(c)] if nn else [])
        elif kind == "maxpool":
            h, w, layers = h // layer[1], w // layer[1], layers + ([nn.MaxPool2d(layer[1])] if nn else [])
        elif kind == "flatten":
            flat, layers = c * h * w, layers + ([nn.Flatten()] if nn else [])
        elif kind == "linear":
            layers += [nn.Linear(flat, layer[1])] if nn else []
            m, params, flat = flat * layer[1], params + flat * layer[1] + layer[1], layer[1]
        elif nn:  # size 5, alpha 1e-4 (divided by size, as ringtrain does), beta 0.75, k 2
            layers.append({"relu": lambda: nn.ReLU(inplace=True), "dropout": lambda: nn.Dropout(layer[1]),
                           "lrn": lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)}[kind]())
        first = first if first is not None or not m else m
        macs += m
    return params, macs, first or 0, layers


def describe(name, shape):
    """Parameters and training FLOPs per image: 2 per multiply-add of conv and linear layers, for
    the forward, weight-gradient and input-gradient passes (none of the last for the first layer)."""
    if name in torch_graphs.GRAPH_SHAPE:
        return torch_graphs.describe(name, shape)
    params, macs, first, _ = walk(name, shape)
    return {"params": params, "train_flops_per_image": 6 * macs - 2 * first}


def build(name, shape):
    if name in torch_graphs.GRAPH_SHAPE:
        return torch_graphs.build(name, shape)
    import torch.nn as nn
    params, _, _, layers = walk(name, shape, nn)
    model = nn.Sequential(*layers)
    n = sum(p.numel() for p in model.parameters())
    if n != params:
        raise AssertionError(f"{name}: torch has {n} parameters, the spec {params}")
    return model


def train(args, shape, rank=0, world=1):
    """Warm-up, then timed steps of this rank's shard (a seed + epoch permutation, every world-th
    index, the last partial batch dropped, as ringtrain's DistributedSampler)."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(args.seed)
    model = build(args.model, shape)
    channels_last = args.memory_format == "channels_last"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)  # broadcasts rank 0's parameters
        if args.ddp_hook == "fp16":  # DDP's compression: buckets cast to fp16 for the all-reduce
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    g = torch.Generator().manual_seed(args.seed)
    x_all = torch.randn((args.synthetic_train, *shape), generator=g)
    y_all = torch.randint(0, 10, (args.synthetic_train,), generator=g)
    per_rank = args.synthetic_train // world
    state = {"epoch": -1, "pos": per_rank}
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.autocast == "bf16" \
        else contextlib.nullcontext  # the peer of ringtrain --precision bf16

    def step():
        if state["pos"] + args.batch_size > per_rank:
            state["epoch"] += 1
            perm = torch.randperm(args.synthetic_train, generator=torch.Generator().manual_seed(args.seed + state["epoch"]))
            state["idx"], state["pos"] = perm[rank:per_rank * world:world], 0
        idx = state["idx"][state["pos"]:state["pos"] + args.batch_size]
        state["pos"] += args.batch_size
        x, y = x_all.index_select(0, idx), y_all.index_select(0, idx)  # a copy, as Dataset::get
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces its buckets during backward
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    if world > 1:
        torch.distributed.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    elapsed = time.perf_counter() - t0
    if args.final_eval:  # untimed, as ringtrain's evaluation at the end; it counts towards peak RSS
        model.eval()
        with torch.no_grad():
            model(torch.randn((max(1, args.final_eval // world), *shape), generator=g))
    return {"elapsed_s": elapsed, "loss": float(loss.item()),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}  # Linux: KiB


def record(args, shape, ranks, world):
    import torch
    elapsed = max(r["elapsed_s"] for r in ranks)  # synchronous steps: the slowest rank
    return {"framework": "pytorch", "torch": torch.__version__, "model": args.model, "world_size": world,
            "batch_size": args.batch_size, "steps": args.steps,
            "images_per_s": world * args.batch_size * args.steps / elapsed,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ranks), "loss": ranks[0]["loss"], **describe(args.model, shape)}


def ddp_rank(rank, world, args, shape):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mine = train(args, shape, rank, world)
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        if rank == 0:
            print(json.dumps(record(args, shape, everyone, world)), flush=True)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(NATURAL_SHAPE), default="lenet5")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--synthetic-train", type=int, default=16384, help="images held in memory")
    p.add_argument("--final-eval", type=int, default=0, metavar="N", help="then evaluate N images, untimed")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel over gloo")
    p.add_argument("--nproc", type=int, default=2, help="ranks spawned with --ddp (RANK/WORLD_SIZE unset)")
    p.add_argument("--ddp-hook", choices=["none", "fp16"], default="none")
    p.add_argument("--autocast", choices=["none", "bf16"], default="none")
    p.add_argument("--memory-format", choices=["default", "channels_last"], default="default",
                   help="of the model and the batches (PyTorch's NHWC path)")
    args = p.parse_args(argv)
    args.lr, args.momentum, args.seed = 0.01, 0.9, 1  # ringtrain's defaults
    shape = NATURAL_SHAPE[args.model]
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if not args.ddp:
        import torch
        torch.set_num_threads(args.threads)
        print(json.dumps(record(args, shape, [train(args, shape)], 1)), flush=True)
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # one rank, started by someone else
        ddp_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, shape)
    else:
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
        mp.spawn(ddp_rank, args=(args.nproc, args, shape), nprocs=args.nproc, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
