#!/usr/bin/python3
"""The PyTorch peer of the folder benchmarks (suites tta and throughput): what a PyTorch user
writes for the same job, DistributedDataParallel over gloo with torchvision's ImageFolder and
DataLoader (DistributedSampler, worker processes), on ringtrain's recipe: the same model
(resnet20 below, written to match ringtrain's layer for layer; torchvision's resnet18/50),
initialisation, SGD with momentum and weight decay on conv/linear weights only, the per-step
cosine schedule, RandomResizedCrop + flip for training and resize to SIZE/0.875 + centre crop
for evaluation. Prints one JSON line from rank 0; when it evaluates, its "curve" lists the seconds
since training started and the test accuracy after each epoch.

Modes: --target-accuracy T evaluates after every epoch and stops once the test accuracy
reaches T (time to accuracy); --steps N times N steps after --warmup (throughput, no
evaluation). --print-params prints the model's parameter count and exits. --ddp spawns
--nproc ranks, or is one rank of those RANK/WORLD_SIZE/MASTER_* of the environment name."""
import argparse
import contextlib
import json
import math
import os
import resource
import socket
import sys
import time

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def cifar_resnet(nn, depth, channels, classes):
    """ringtrain's resnet20/56 (src/nn/ZooResNet.cpp): conv3x3 16 + BN + ReLU, 3 stages of
    (depth-2)/6 basic blocks at 16/32/64 (stride 2 entering stages 2 and 3), projection
    shortcuts (1x1 conv + BN) where the shape changes, global average pool, linear."""
    class Block(nn.Module):
        def __init__(self, cin, planes, stride):
            super().__init__()
            self.main = nn.Sequential(nn.Conv2d(cin, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes),
                                      nn.ReLU(inplace=True), nn.Conv2d(planes, planes, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(planes))
            self.skip = nn.Identity() if stride == 1 and cin == planes else nn.Sequential(
                nn.Conv2d(cin, planes, 1, stride, 0, bias=False), nn.BatchNorm2d(planes))

        def forward(self, x):
            return nn.functional.relu(self.main(x) + self.skip(x))

    n, layers, cin = (depth - 2) // 6, [], 16
    for planes in (16, 32, 64):
        for i in range(n):
            layers.append(Block(cin, planes, 2 if i == 0 and planes != 16 else 1))
            cin = planes
    return nn.Sequential(nn.Conv2d(channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def build(name, channels, classes):
    import torch.nn as nn
    if name in ("resnet20", "resnet56"):
        model = cifar_resnet(nn, int(name[6:]), channels, classes)
    elif name in ("resnet18", "resnet50"):
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=classes)
        if channels != 3:
            model.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    else:
        raise ValueError(f"unknown model '{name}' (resnet20, resnet56, resnet18, resnet50)")
    init_like_ringtrain(nn, model)
    return model


def init_like_ringtrain(nn, model):
    """src/nn/Model.cpp's init: weights U(-b, b), b = gain sqrt(3 / fan_in), gain sqrt(2) but 1 for
    the last weight layer (it feeds softmax, not a ReLU); biases and BN shifts 0, BN scales 1."""
    weighted = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    for m in weighted:
        fan_in = m.weight[0].numel()
        bound = (1.0 if m is weighted[-1] else math.sqrt(2.0)) * math.sqrt(3.0 / fan_in)
        nn.init.uniform_(m.weight, -bound, bound)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def lr_at(args, epoch):
    """ringtrain's per-step schedule (src/optim/LrSchedule.cpp) at a fractional epoch."""
    if args.lr_schedule == "constant":
        return args.lr
    if epoch >= args.epochs:
        return args.lr_min
    return args.lr_min + (args.lr - args.lr_min) * (1.0 + math.cos(math.pi * epoch / args.epochs)) / 2.0


class Loader:
    """ImageFolder's loader with the mode ringtrain decodes to; a class, so that DataLoader
    workers started by spawn (as under torch.multiprocessing) can unpickle it."""

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, path):
        from PIL import Image
        with open(path, "rb") as f:
            return Image.open(f).convert(self.mode)


def datasets(args):
    import torchvision.datasets as D
    import torchvision.transforms as T
    mean, std = (args.mean, args.std) if args.mean else (IMAGENET_MEAN, IMAGENET_STD)
    loader = Loader("L" if args.channels == 1 else "RGB")
    norm = [T.ToTensor(), T.Normalize(mean[:args.channels], std[:args.channels])]
    flip = [] if args.no_flip else [T.RandomHorizontalFlip()]
    train_tf = T.Compose([T.RandomResizedCrop(args.size, scale=tuple(args.crop_scale)), *flip, *norm])
    val_tf = T.Compose([T.Resize(round(args.size / 0.875)), T.CenterCrop(args.size), *norm])
    return (D.ImageFolder(os.path.join(args.data_dir, "train"), train_tf, loader=loader),
            D.ImageFolder(os.path.join(args.data_dir, "val"), val_tf, loader=loader))


def evaluate(args, model, val_set, rank, world):
    """Accuracy over the whole val split, every world-th image per rank, counts summed."""
    import torch
    import torch.utils.data as U
    mine = U.Subset(val_set, range(rank, len(val_set), world))
    dl = U.DataLoader(mine, batch_size=max(args.batch_size, 256), num_workers=args.workers)
    model.eval()
    counts = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad(), autocast(args)():
        for x, y in dl:
            counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
    model.train()
    if world > 1:
        torch.distributed.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def autocast(args):
    import torch
    if args.autocast == "bf16":  # the peer of ringtrain --precision bf16
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext


def train(args, rank=0, world=1):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.data as U
    torch.manual_seed(args.seed)
    train_set, val_set = datasets(args)
    model = build(args.model, args.channels, len(train_set.classes))
    decay = [p for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear)) for p in [m.weight]]
    rest = [p for p in model.parameters() if all(p is not q for q in decay)]
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's parameters
    opt = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                          lr=args.lr, momentum=args.momentum, nesterov=args.nesterov)
    sampler = U.DistributedSampler(train_set, world, rank, shuffle=True, seed=args.seed, drop_last=True)
    dl = U.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                      drop_last=True, persistent_workers=args.workers > 0)
    per_epoch, total = len(dl), args.warmup + args.steps if args.steps else None
    out = {"steps": 0, "data_s": 0.0, "time_to_target_s": None, "final_test_accuracy": None, "curve": []}
    t0 = timed_from = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        it, i = iter(dl), 0
        while total is None or out["steps"] < total:
            w = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            out["data_s"] += time.perf_counter() - w if out["steps"] >= args.warmup else 0.0
            for g in opt.param_groups:
                g["lr"] = lr_at(args, epoch + i / per_epoch)
            opt.zero_grad(set_to_none=True)
            with autocast(args)():
                loss = F.cross_entropy(model(batch[0]), batch[1])
            loss.backward()  # DDP all-reduces its buckets during backward
            opt.step()
            out["steps"], i = out["steps"] + 1, i + 1
            if out["steps"] == args.warmup and total:
                if world > 1:
                    torch.distributed.barrier()
                timed_from = time.perf_counter()
        out["epochs_completed"] = epoch + 1
        if total is not None:
            if out["steps"] >= total:
                break
            continue
        out["final_test_accuracy"] = evaluate(args, model, val_set, rank, world)
        out["curve"].append([round(time.perf_counter() - t0, 3), out["final_test_accuracy"]])
        if args.target_accuracy and out["final_test_accuracy"] >= args.target_accuracy:
            out["time_to_target_s"] = time.perf_counter() - t0
            break
    out["train_s"] = time.perf_counter() - t0
    out["timed_s"] = time.perf_counter() - timed_from
    out["loss"] = float(loss.item())
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    return out


def record(args, ranks, world):
    import torch
    import torchvision
    r0, timed = ranks[0], max(r["timed_s"] for r in ranks)  # synchronous steps: the slowest rank
    steps = r0["steps"] - (args.warmup if args.steps else 0)
    return {"framework": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
            "model": args.model, "world_size": world, "batch_size": args.batch_size, "workers": args.workers,
            "params": param_count(args), "images_per_s": world * args.batch_size * steps / max(timed, 1e-9),
            "data_wait_share": max(r["data_s"] for r in ranks) / max(timed, 1e-9),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ranks),
            **{k: r0[k] for k in ("steps", "epochs_completed", "train_s", "time_to_target_s", "final_test_accuracy",
                                   "loss", "curve")}}


def param_count(args):
    classes = len([d for d in os.scandir(os.path.join(args.data_dir, "train")) if d.is_dir()]) if args.data_dir \
        else args.classes
    return sum(p.numel() for p in build(args.model, args.channels, classes).parameters())


def ddp_rank(rank, world, args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mine = train(args, rank, world)
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        if rank == 0:
            print(json.dumps(record(args, everyone, world)), flush=True)
    finally:
        dist.destroy_process_group()


def pair(text):
    a, _, b = text.partition(",")
    return [float(a), float(b)]


def floats(text):
    return tuple(float(v) for v in text.split(","))


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", help="DIR/train/<class>, DIR/val/<class>")
    p.add_argument("--model", default="resnet20")
    p.add_argument("--channels", type=int, choices=(1, 3), default=3, help="1: images read as gray (PIL 'L')")
    p.add_argument("--classes", type=int, default=10, help="with --print-params and no --data-dir")
    p.add_argument("--size", type=int, default=224, help="crop side")
    p.add_argument("--crop-scale", type=pair, default=[0.08, 1.0])
    p.add_argument("--no-flip", action="store_true")
    p.add_argument("--mean", type=floats, help="per channel, of x/255 (default ImageNet's)")
    p.add_argument("--std", type=floats)
    p.add_argument("--batch-size", type=int, default=128, help="per rank")
    p.add_argument("--epochs", type=int, default=30, help="cap, and the cosine schedule's length")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--lr-min", type=float, default=0.0)
    p.add_argument("--lr-schedule", choices=("cosine", "constant"), default="cosine")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--target-accuracy", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=0, help="throughput: timed steps (no evaluation)")
    p.add_argument("--warmup", type=int, default=0, help="throughput: untimed steps first")
    p.add_argument("--workers", type=int, default=1, help="DataLoader worker processes per rank")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--autocast", choices=("none", "bf16"), default="none")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel over gloo")
    p.add_argument("--nproc", type=int, default=2, help="ranks spawned with --ddp (RANK/WORLD_SIZE unset)")
    p.add_argument("--print-params", action="store_true")
    args = p.parse_args(argv)
    if not args.print_params and not args.data_dir:
        p.error("--data-dir is required")
    return args


def main(argv=None):
    args = parse(argv)
    if args.print_params:
        print(json.dumps({"model": args.model, "params": param_count(args)}))
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if not args.ddp:
        import torch
        torch.set_num_threads(args.threads)
        print(json.dumps(record(args, [train(args)], 1)), flush=True)
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # one rank, started by someone else
        ddp_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    else:
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
        mp.spawn(ddp_rank, args=(args.nproc, args), nprocs=args.nproc, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
