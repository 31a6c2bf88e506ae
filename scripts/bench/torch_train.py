#!/usr/bin/python3
"""PyTorch (CPU) baseline for ringtrain's benchmarks: the same model zoo, the same SGD step,
timed after warm-up; also a single-thread sgemm for the machine's measured FP32 peak.

The architectures are described once as plain-Python layer specs (MODEL_SPECS), so parameter
and FLOP counts are available without torch; torch is imported only when a model is built.
Every run prints exactly one JSON line on stdout (results); progress goes to stderr.

  torch_train.py --model lenet5 --batch-size 64 --steps 200          # 1 process, 1 thread
  torch_train.py --model vgg11 --batch-size 32 --steps 20 --ddp --nproc 2   # DDP, gloo
  torch_train.py --describe --model mlp                              # params + FLOPs only
  torch_train.py --sgemm 2048                                        # peak FP32, 1 thread
"""

import argparse
import gzip
import json
import os
import platform
import resource
import socket
import statistics
import struct
import sys
import time

# ---------------------------------------------------------------------------------------------
# Model zoo, mirroring ringtrain's src/nn zoo layer for layer (see design.md §5 and the
# experiments: LeNet-5 as in LeCun et al. 1998 with ReLU/max-pool, VGG-11 "A" of Simonyan &
# Zisserman 2014 with BatchNorm and a single 512->10 classifier as in the CIFAR-10 versions).
# Layer spec tuples: ("conv", out_channels, kernel, pad, bias), ("bn",), ("relu",),
# ("maxpool", k), ("flatten",), ("linear", out_features), ("lrn",), ("dropout", p).
# ---------------------------------------------------------------------------------------------

VGG11_CFG = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]

# Natural input shape (C, H, W) per model, as in the benchmark table.
NATURAL_SHAPE = {
    "logreg": (1, 28, 28),
    "lenet5": (1, 28, 28),
    "mlp": (3, 32, 32),
    "svhn-cnn": (3, 32, 32),
    "vgg11": (3, 32, 32),
    "alexnet": (3, 32, 32),
}

# Parameter counts stated in the brief for the natural shapes (trainable parameters; BN
# gamma/beta count, running statistics do not). vgg11 uses conv bias + BN, as torchvision's
# vgg11_bn and the common CIFAR-10 VGG do.
EXPECTED_PARAMS = {
    ("logreg", (1, 28, 28)): 7_850,
    ("lenet5", (1, 28, 28)): 61_706,
    ("mlp", (3, 32, 32)): 3_846_442,
    ("svhn-cnn", (3, 32, 32)): 40_450,
    ("vgg11", (3, 32, 32)): 9_231_114,
    ("alexnet", (3, 32, 32)): 7_706_442,  # as stated in ringtrain's src/nn/ModelZoo.cpp
}


def model_spec(name, vgg_conv_bias=True):
    """Return the layer spec list of a zoo model (input shape independent)."""
    if name == "logreg":
        return [("flatten",), ("linear", 10)]
    if name == "lenet5":
        return [("conv", 6, 5, 2, True), ("relu",), ("maxpool", 2),
                ("conv", 16, 5, 0, True), ("relu",), ("maxpool", 2),
                ("flatten",), ("linear", 120), ("relu",), ("linear", 84), ("relu",),
                ("linear", 10)]
    if name == "mlp":
        spec = [("flatten",)]
        for width in (1024, 512, 256, 128, 64, 32):
            spec += [("linear", width), ("relu",)]
        return spec + [("linear", 10)]
    if name == "svhn-cnn":
        return [("conv", 6, 5, 1, True), ("relu",), ("maxpool", 2),
                ("conv", 16, 5, 1, True), ("relu",), ("maxpool", 2),
                ("flatten",), ("linear", 64), ("relu",), ("linear", 10)]
    if name == "alexnet":
        # ringtrain's CIFAR-sized AlexNet: LRN after the first two convs, dropout 0.5 before
        # each hidden FC.
        return [("conv", 64, 5, 2, True), ("relu",), ("lrn",), ("maxpool", 2),
                ("conv", 192, 5, 2, True), ("relu",), ("lrn",), ("maxpool", 2),
                ("conv", 384, 3, 1, True), ("relu",), ("conv", 256, 3, 1, True), ("relu",),
                ("conv", 256, 3, 1, True), ("relu",), ("maxpool", 2),
                ("flatten",), ("dropout", 0.5), ("linear", 1024), ("relu",),
                ("dropout", 0.5), ("linear", 1024), ("relu",), ("linear", 10)]
    if name == "vgg11":
        spec = []
        for v in VGG11_CFG:
            if v == "M":
                spec.append(("maxpool", 2))
            else:
                spec += [("conv", v, 3, 1, vgg_conv_bias), ("bn",), ("relu",)]
        return spec + [("flatten",), ("linear", 10)]
    raise ValueError(f"unknown model '{name}' (known: {', '.join(sorted(NATURAL_SHAPE))})")


def describe(name, shape, vgg_conv_bias=True):
    """Walk the spec over an input shape (C, H, W): parameter count and FLOPs per image.

    FLOPs count only the multiply-adds of conv and linear layers (2 FLOPs per MAC); BN, ReLU,
    pooling, loss and the SGD update are left out (they are O(activations), not O(MACs)).
    Training FLOPs = forward + weight gradient + input gradient, each 2*MAC, except that the
    first weighted layer needs no input gradient (the images do not require grad) - the usual
    "3x forward" rule made exact.
    """
    c, h, w = shape
    flat = None
    params = 0
    fwd_macs = 0
    first_macs = None
    for layer in model_spec(name, vgg_conv_bias):
        kind = layer[0]
        if kind == "conv":
            _, out_c, k, pad, bias = layer
            h = h + 2 * pad - k + 1
            w = w + 2 * pad - k + 1
            if h <= 0 or w <= 0:
                raise ValueError(f"{name}: input {shape} too small for its convolutions")
            macs = out_c * h * w * c * k * k
            params += out_c * c * k * k + (out_c if bias else 0)
            c = out_c
        elif kind == "bn":
            params += 2 * c
            macs = 0
        elif kind == "maxpool":
            h //= layer[1]
            w //= layer[1]
            macs = 0
        elif kind == "flatten":
            flat = c * h * w
            macs = 0
        elif kind == "linear":
            out_f = layer[1]
            macs = flat * out_f
            params += flat * out_f + out_f
            flat = out_f
        else:  # relu, lrn, dropout
            macs = 0
        if macs and first_macs is None:
            first_macs = macs
        fwd_macs += macs
    fwd_flops = 2 * fwd_macs
    train_flops = 3 * fwd_flops - 2 * (first_macs or 0)
    return {"model": name, "shape": "x".join(map(str, shape)), "params": params,
            "forward_flops_per_image": fwd_flops, "train_flops_per_image": train_flops}


def build_torch_model(name, shape, vgg_conv_bias=True):
    """Build the torch.nn.Sequential for a spec and assert its parameter count."""
    import torch.nn as nn
    c, h, w = shape
    layers = []
    flat = None
    for layer in model_spec(name, vgg_conv_bias):
        kind = layer[0]
        if kind == "conv":
            _, out_c, k, pad, bias = layer
            layers.append(nn.Conv2d(c, out_c, k, padding=pad, bias=bias))
            h, w, c = h + 2 * pad - k + 1, w + 2 * pad - k + 1, out_c
        elif kind == "bn":
            layers.append(nn.BatchNorm2d(c))
        elif kind == "relu":
            layers.append(nn.ReLU(inplace=True))
        elif kind == "maxpool":
            layers.append(nn.MaxPool2d(layer[1]))
            h, w = h // layer[1], w // layer[1]
        elif kind == "flatten":
            layers.append(nn.Flatten())
            flat = c * h * w
        elif kind == "linear":
            layers.append(nn.Linear(flat, layer[1]))
            flat = layer[1]
        elif kind == "lrn":
            # size 5, alpha 1e-4 (torch divides it by size, as ringtrain does), beta 0.75, k 2
            layers.append(nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0))
        elif kind == "dropout":
            layers.append(nn.Dropout(layer[1]))
    model = nn.Sequential(*layers)
    n_torch = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_spec = describe(name, shape, vgg_conv_bias)["params"]
    if n_torch != n_spec:
        raise AssertionError(f"{name}: torch has {n_torch} parameters, spec says {n_spec}")
    expected = EXPECTED_PARAMS.get((name, tuple(shape)))
    if expected is not None and vgg_conv_bias and n_torch != expected:
        raise AssertionError(f"{name} on {shape}: {n_torch} parameters, expected {expected}")
    return model


# ---------------------------------------------------------------------------------------------
# Data: synthetic images held in memory (N(0,1) pixels, uniform labels), or Fashion-MNIST read
# from Debian's IDX .gz files without torchvision.
# ---------------------------------------------------------------------------------------------

FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx_gz(path):
    """Read an IDX file (LeCun's MNIST format: magic 0x0000 08 ndim, big-endian dims, u8)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise RuntimeError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    count = 1
    for d in dims:
        count *= d
    if len(data) != 4 + 4 * ndim + count:
        raise RuntimeError(f"{path}: {len(data)} bytes, header says {4 + 4 * ndim + count}")
    return dims, data[4 + 4 * ndim:]


def load_data(args, shape):
    """Return (images float32 (N, C, H, W), labels int64 (N,)) as torch tensors."""
    import torch
    if args.dataset == "fashion-mnist":
        if tuple(shape) != (1, 28, 28):
            raise ValueError("fashion-mnist images are 1x28x28")
        dims, pixels = read_idx_gz(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz"))
        _, labels = read_idx_gz(os.path.join(FASHION_DIR, "train-labels-idx1-ubyte.gz"))
        x = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(dims[0], 1, 28, 28)
        y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
        return x.float().div_(255.0), y
    g = torch.Generator().manual_seed(args.seed)
    n = args.synthetic_train
    x = torch.randn((n, *shape), generator=g, dtype=torch.float32)
    y = torch.randint(0, 10, (n,), generator=g)
    return x, y


class ShardedBatches:
    """Per-epoch shuffled batches of this rank's shard, like ringtrain's DistributedSampler
    (seed + epoch permutation, rank takes every world-th index, last partial batch dropped)."""

    def __init__(self, n, batch, rank, world, seed):
        import torch
        self.torch = torch
        self.n, self.batch, self.rank, self.world, self.seed = n, batch, rank, world, seed
        self.per_rank = n // world
        if self.per_rank < batch:
            raise ValueError(f"{n} images over {world} ranks is less than one batch of {batch}")
        self.epoch = 0
        self._start_epoch()

    def _start_epoch(self):
        g = self.torch.Generator().manual_seed(self.seed + self.epoch)
        perm = self.torch.randperm(self.n, generator=g)
        self.indices = perm[self.rank:self.per_rank * self.world:self.world]
        self.pos = 0

    def next(self):
        if self.pos + self.batch > self.per_rank:
            self.epoch += 1
            self._start_epoch()
        idx = self.indices[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return idx


# ---------------------------------------------------------------------------------------------
# Measurement helpers
# ---------------------------------------------------------------------------------------------

def peak_rss_mb():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def versions():
    import torch
    out = {"torch": torch.__version__, "python": platform.python_version(),
           "mkldnn": bool(torch.backends.mkldnn.is_available())}
    try:
        import re
        m = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
        if m:
            out["onednn"] = m.group(1)
    except Exception:  # the config string is informative only
        pass
    return out


def set_threads(n):
    import torch
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set (only allowed once, before any parallel work)


def train_steps(args, shape, rank=0, world=1, ddp=False):
    """Build model + data, run warm-up then timed steps; return this rank's measurements."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(args.seed)
    rss_import = peak_rss_mb()
    model = build_torch_model(args.model, shape, not args.vgg_no_conv_bias)
    model.train()
    if ddp:
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)  # broadcasts rank 0's parameters
        if args.ddp_hook == "fp16":
            # DDP's own compression: buckets cast to fp16 for the all-reduce, back to fp32 after.
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    x_all, y_all = load_data(args, shape)
    batches = ShardedBatches(x_all.shape[0], args.batch_size, rank, world, args.seed)

    import contextlib
    # --autocast bf16: PyTorch's CPU mixed precision (conv/linear in bf16, fp32 master
    # weights and optimizer), the peer of ringtrain --precision bf16.
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.autocast == "bf16" \
        else contextlib.nullcontext

    def step():
        idx = batches.next()
        x = x_all.index_select(0, idx)  # copy the batch, as ringtrain's Dataset::get does
        y = y_all.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces (mean) gradient buckets during backward
        opt.step()
        return loss

    for _ in range(args.warmup):
        loss = step()
    if ddp:
        torch.distributed.barrier()
    step_s = []
    t0 = time.perf_counter()
    c0 = time.process_time()  # CPU seconds of all our threads: unaffected by time slicing
    for _ in range(args.steps):
        s0 = time.perf_counter()
        loss = step()
        step_s.append(time.perf_counter() - s0)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    final_loss = float(loss.item())
    if ddp:
        torch.distributed.barrier()
    if args.final_eval > 0:
        final_eval(args, model, shape, rank, world)
    return {"rank": rank, "elapsed_s": elapsed, "cpu_s": cpu, "step_s": step_s,
            "loss": final_loss,
            "peak_rss_mb": peak_rss_mb(), "rss_after_import_mb": rss_import}


def final_eval(args, model, shape, rank, world):
    """Untimed evaluation of this rank's shard of args.final_eval test images, as ringtrain
    does at the end of every run; it counts towards peak RSS on both sides."""
    import torch
    g = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn((args.final_eval, *shape), generator=g)[rank::world]
    model.eval()
    with torch.no_grad():
        for i in range(0, x.shape[0], args.batch_size):
            model(x[i:i + args.batch_size])
    model.train()


def step_stats(step_s):
    q = sorted(step_s)
    pick = lambda f: q[min(len(q) - 1, int(f * len(q)))]
    return {"step_ms_median": 1e3 * statistics.median(q), "step_ms_p10": 1e3 * pick(0.10),
            "step_ms_p90": 1e3 * pick(0.90)}


def result_record(args, shape, per_rank, world):
    desc = describe(args.model, shape, not args.vgg_no_conv_bias)
    elapsed = max(r["elapsed_s"] for r in per_rank)  # synchronous steps: the slowest rank
    images = world * args.batch_size * args.steps
    rec = {"framework": "pytorch", "mode": "ddp-gloo" if world > 1 or args.ddp else "single",
           "ddp_hook": args.ddp_hook, "autocast": args.autocast,
           "model": args.model, "shape": desc["shape"], "dataset": args.dataset,
           "world_size": world, "batch_size": args.batch_size,
           "global_batch_size": world * args.batch_size, "threads_per_rank": args.threads,
           "warmup_steps": args.warmup, "steps": args.steps,
           "images_per_s": images / elapsed, "wall_s": elapsed,
           # images per CPU-second over all ranks: what the run would reach uncontended if
           # it is compute bound; its gap to images_per_s shows how loaded the machine was.
           "images_per_cpu_s": images / sum(r["cpu_s"] for r in per_rank) * world,
           **step_stats(per_rank[0]["step_s"]),
           "peak_rss_mb": max(r["peak_rss_mb"] for r in per_rank),
           "ranks": [{"rank": r["rank"], "peak_rss_mb": round(r["peak_rss_mb"], 1),
                      "rss_after_import_mb": round(r["rss_after_import_mb"], 1),
                      "elapsed_s": r["elapsed_s"], "cpu_s": r["cpu_s"]}
                     for r in per_rank],
           "final_loss": per_rank[0]["loss"],
           "params": desc["params"], "train_flops_per_image": desc["train_flops_per_image"],
           "forward_flops_per_image": desc["forward_flops_per_image"],
           "synthetic_train": args.synthetic_train if args.dataset == "synthetic" else None,
           "versions": versions()}
    return rec


# ---------------------------------------------------------------------------------------------
# DDP: one process per rank, gloo over 127.0.0.1, one thread each.
# ---------------------------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(rank, world, args, shape):
    """Body of one DDP rank; rank 0 prints the gathered JSON line."""
    import torch.distributed as dist
    set_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mine = train_steps(args, shape, rank, world, ddp=True)
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            gathered.sort(key=lambda r: r["rank"])
            print(json.dumps(result_record(args, shape, gathered, world)), flush=True)
    finally:
        dist.destroy_process_group()


def run_ddp(args, shape):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        # Started by an external launcher (torchrun, or N processes with RANK/WORLD_SIZE and
        # MASTER_ADDR/MASTER_PORT set): this process is one rank.
        ddp_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, shape)
        return
    import torch.multiprocessing as mp
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(ddp_worker, args=(args.nproc, args, shape), nprocs=args.nproc, join=True)


# ---------------------------------------------------------------------------------------------
# Peak FP32: a large single-precision GEMM on one thread.
# ---------------------------------------------------------------------------------------------

def run_sgemm(args):
    """Time C = A B (N x N, f32) through the two GEMM engines a CPU framework here can use:
    the system BLAS behind torch.mm (OpenBLAS on Debian) and oneDNN's inner product (the
    engine ringtrain's layers use). The higher one is the machine's measured FP32 peak."""
    import torch
    set_threads(args.threads)
    n = args.sgemm
    g = torch.Generator().manual_seed(args.seed)
    a = torch.randn((n, n), generator=g)
    b = torch.randn((n, n), generator=g)
    c = torch.empty((n, n))
    engines = {"blas_mm": lambda: torch.mm(a, b, out=c)}
    if torch.backends.mkldnn.is_available():
        a_dnn, b_dnn = a.to_mkldnn(), b.to_mkldnn()
        # dst(n, n) = src(n, n) * weights(n, n)^T: a 2n^3-FLOP GEMM in oneDNN (brgemm/jit).
        engines["onednn_inner_product"] = lambda: torch._C._nn.mkldnn_linear(a_dnn, b_dnn, None)
    flops = 2.0 * n ** 3
    rec = {"framework": "pytorch", "mode": "sgemm", "n": n, "threads": args.threads,
           "repeats": args.sgemm_repeats, "engines": {}}
    for name, fn in engines.items():
        fn()  # warm-up: page faults, weight reorder, kernel JIT
        runs = []
        for _ in range(args.sgemm_repeats):
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        gf = sorted(flops / t / 1e9 for t in runs)
        rec["engines"][name] = {"gflops_best": gf[-1], "gflops_median": statistics.median(gf),
                                "gflops_min": gf[0]}
    best_engine = max(rec["engines"], key=lambda k: rec["engines"][k]["gflops_best"])
    rec["peak_engine"] = best_engine
    rec["gflops_best"] = rec["engines"][best_engine]["gflops_best"]
    rec["gflops_per_core_best"] = rec["gflops_best"] / args.threads
    rec["versions"] = versions()
    print(json.dumps(rec), flush=True)


def parse_shape(text):
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) <= 0:
        raise argparse.ArgumentTypeError(f"shape '{text}' is not CxHxW")
    return dims


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(NATURAL_SHAPE), default="lenet5")
    p.add_argument("--dataset", choices=["synthetic", "fashion-mnist"], default="synthetic")
    p.add_argument("--synthetic-shape", type=parse_shape, default=None,
                   help="CxHxW (default: the model's natural shape)")
    p.add_argument("--synthetic-train", type=int, default=None,
                   help="images held in memory (default: enough for one epoch of all steps)")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=100, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--final-eval", type=int, default=0, metavar="N",
                   help="after timing, evaluate N synthetic test images (sharded over ranks)")
    p.add_argument("--ddp", action="store_true", help="DistributedDataParallel over gloo")
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn with --ddp")
    p.add_argument("--ddp-hook", choices=["none", "fp16"], default="none",
                   help="DDP communication hook: fp16 = fp16_compress_hook")
    p.add_argument("--autocast", choices=["none", "bf16"], default="none",
                   help="bf16: train under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--vgg-no-conv-bias", action="store_true",
                   help="vgg11 convolutions without bias (BN follows each)")
    p.add_argument("--describe", action="store_true",
                   help="print params and FLOPs per image (no torch needed) and exit")
    p.add_argument("--sgemm", type=int, default=0, metavar="N",
                   help="time an N^3 sgemm instead of training (peak FP32)")
    p.add_argument("--sgemm-repeats", type=int, default=5)
    args = p.parse_args(argv)

    shape = args.synthetic_shape or NATURAL_SHAPE[args.model]
    if args.dataset == "fashion-mnist":
        shape = (1, 28, 28)
    if args.describe:
        print(json.dumps(describe(args.model, shape, not args.vgg_no_conv_bias)))
        return 0
    # One thread per process unless told otherwise; set before torch spins up OpenMP.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    if args.sgemm:
        run_sgemm(args)
        return 0
    world = args.nproc if args.ddp else 1
    if args.ddp and "WORLD_SIZE" in os.environ:
        world = int(os.environ["WORLD_SIZE"])
    if args.synthetic_train is None:
        args.synthetic_train = (args.warmup + args.steps) * args.batch_size * world
    if args.ddp:
        run_ddp(args, shape)
    else:
        set_threads(args.threads)
        mine = train_steps(args, shape)
        print(json.dumps(result_record(args, shape, [mine], 1)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
