"""Training against PyTorch on one host: images/s and peak RSS, np 1 (and np N against DDP).

Per model (and --precision), ringtrain and the PyTorch peer (benchlib/torch_peer.py: the same
layers, SGD with momentum 0.9, lr 0.01) train on the same synthetic data held in memory (the
model's natural shape; at most --data-mb of pixels), the same batch per rank, warm-up and timed
steps, one thread per rank (OMP_NUM_THREADS=1), and evaluate the same number of images at the
end (untimed; it counts towards peak RSS on both sides). With --np N also ringtrain under
`mpirun -np N --bind-to none` against DDP over gloo with N processes on this host. bf16:
ringtrain --precision bf16 against PyTorch under torch.autocast("cpu", dtype=torch.bfloat16),
except mobilenetv2, whose autocast backward fails in PyTorch 1.13 (ReLU6's backward has no bf16
kernel): its bf16 row is against PyTorch in fp32, and the report says so.
The sides run interleaved in every round (ABBA); ratios are paired within each round:
medians [min-max]. ringtrain's images/s: rank 0's step records after the warm-up.
Without the peer (Debian's python3-torch, see --install-peer) ringtrain's figures alone.
"% of peak": a rank's training FLOP rate (the table's MFLOP/img, which needs the peer for graph
models) over one core's peak, the best of oneDNN's one-thread sgemm (apps/peak_gflops) run before
and after the rounds; fp32 rows only.

  bench.py train --models logreg,lenet5,mlp,vgg11                 # np 1, 1 thread
  bench.py train --models lenet5,mlp,vgg11 --np 2                 # and np 2 against DDP (gloo)
  bench.py train --models lenet5,mlp --precision fp32,bf16        # bf16 compute (AVX512-BF16 CPUs)
  bench.py train --models resnet20,resnet18,resnet50,mobilenetv2  # graph models against torchvision's
  bench.py train --models resnet50 --torch-format channels_last   # PyTorch in channels-last memory format
Graph models (benchlib/torch_graphs.py): torchvision 0.14's resnet18/resnet50/mobilenet_v2 with 10
classes at 224x224, and a CIFAR resnet20 at 32x32 built as ringtrain's; the same parameter counts.
"""
import math
import os
import tempfile

from benchlib import peer, plot, ringtrain
from benchlib.cluster import host_launch
from benchlib.proc import app, check, last_json, load, log
from benchlib.rounds import add_options, cell, flat, interleave, paired, rate, values
from benchlib.table import Table, conditions, emit
from benchlib.torch_peer import NATURAL_SHAPE, describe

# Per-rank batch and timed steps per model: a few seconds of work each at one thread.
# The graph models' batches are the targets' (resnet50 16, resnet18 and mobilenetv2 32 at 224x224,
# resnet20 128 at 32x32); their steps take seconds each, so few.
BATCH = {"logreg": 64, "lenet5": 64, "mlp": 32, "vgg11": 32, "svhn-cnn": 64, "alexnet": 32, "resnet20": 128,
         "resnet18": 32, "resnet50": 16, "mobilenetv2": 32}
STEPS = {"logreg": 600, "lenet5": 200, "mlp": 150, "vgg11": 20, "svhn-cnn": 200, "alexnet": 20, "resnet20": 20,
         "resnet18": 5, "resnet50": 4, "mobilenetv2": 5}
WARMUP = {"logreg": 20, "lenet5": 10, "mlp": 10, "vgg11": 3, "svhn-cnn": 10, "alexnet": 3, "resnet20": 3,
          "resnet18": 2, "resnet50": 2, "mobilenetv2": 2}
# Models whose backward under torch.autocast(bf16) fails in PyTorch 1.13 ("hardshrink_backward_cpu" not
# implemented for 'BFloat16': ReLU6 = hardtanh(0, 6)). Their bf16 rows are against PyTorch in fp32.
TORCH_NO_BF16 = {"mobilenetv2"}


def add_arguments(p, models="logreg,mlp,lenet5"):
    p.add_argument("--models", default=models, help="from " + ",".join(sorted(NATURAL_SHAPE)))
    p.add_argument("--batch", default="", help="per-rank batch overrides, e.g. mlp=64,vgg11=16")
    p.add_argument("--steps", type=int, help="timed steps of every model (default per model)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default per model)")
    p.add_argument("--precision", default="fp32", help="fp32 and/or bf16, comma-separated")
    p.add_argument("--data-mb", type=float, default=32.0, help="cap on the synthetic set's pixels (MB)")
    p.add_argument("--torch-format", choices=["default", "channels_last"], default="default",
                   help="PyTorch's memory format for the model and its inputs")
    p.add_argument("--bin", default=ringtrain.default_bin())
    add_options(p)
    peer.add_options(p)
    if models.startswith("logreg"):  # this suite's own options, not train-nodes'
        p.add_argument("--np", type=int, default=1, help="with N > 1 also np N against DDP")
        p.add_argument("--peak-bin", default=app("peak_gflops"), help="the sgemm peak's program")
        p.add_argument("--no-peak", action="store_true", help="skip the sgemm peak (no %% of peak column)")


def works(args):
    """{"model precision": Work} of the options; a usage error names a bad model or precision."""
    models, precisions = [m for m in args.models.split(",") if m], [x for x in args.precision.split(",") if x]
    bad = [m for m in models if m not in NATURAL_SHAPE] + [x for x in precisions if x not in ("fp32", "bf16")]
    if bad or args.np < 1 or args.rounds < 1:
        args.parser.error(f"unknown model or precision {bad}" if bad else "--np and --rounds must be >= 1")
    batches = {k: int(v) for k, _, v in (x.partition("=") for x in args.batch.split(",") if x)}
    return {f"{m} {x}": Work(args, m, x, batches) for x in precisions for m in models}


class Work:
    """One model and precision, the same for both frameworks and every rank count."""

    def __init__(self, args, model, precision, batches):
        self.model, self.precision, self.torch_format = model, precision, args.torch_format
        self.shape = NATURAL_SHAPE[model]
        self.batch = batches.get(model, BATCH.get(model, 32))
        self.steps, self.warmup = args.steps or STEPS.get(model, 100), args.warmup or WARMUP.get(model, 5)
        image_bytes = 4 * math.prod(self.shape)
        global_batch = self.batch * args.np
        cap = max(1, int(args.data_mb * 2**20 / image_bytes) // global_batch)
        self.n_train = global_batch * min(self.warmup + self.steps, cap)
        self.n_test = global_batch

    def ringtrain_argv(self, binary, np_, run_dir, extra=()):
        epochs = -(-(self.warmup + self.steps) // (self.n_train // (self.batch * np_)))
        return ringtrain.train_argv(binary, self.model, self.steps, self.warmup, self.batch, run_dir,
                                    "x".join(map(str, self.shape)), self.n_train,
                                    ["--precision", self.precision, "--epochs", str(epochs),
                                     "--eval-batch-size", str(self.batch), *extra], self.n_test)

    def peer_bf16(self):
        return self.precision == "bf16" and self.model not in TORCH_NO_BF16

    def peer_argv(self, extra=()):
        return [peer.PYTHON, peer.WORKER, "--model", self.model, "--batch-size", str(self.batch), "--steps",
                str(self.steps), "--warmup", str(self.warmup), "--synthetic-train", str(self.n_train), "--final-eval",
                str(self.n_test), "--autocast", "bf16" if self.peer_bf16() else "none",
                "--memory-format", self.torch_format, *extra]


def sgemm_peak(args):
    """One core's fp32 peak in GFLOP/s (apps/peak_gflops, one thread), or None with --no-peak or
    without the program."""
    binary = args.peak_bin
    if args.no_peak or not os.path.exists(binary):
        if not args.no_peak:
            log(f"no {binary}: no % of peak")
        return None
    got = last_json(check([binary, "--threads", "1", "--json"], {"OMP_NUM_THREADS": "1"}, args.timeout))
    log(f"sgemm peak, one thread: {got['gflops']:.1f} GFLOP/s (cpu/wall {got['cpu_per_wall']:.2f})")
    return got["gflops"]


def share_of_peak(runs, np_, flops, peak):
    """Each run's training FLOP rate per rank as a share of `peak` (GFLOP/s), in percent."""
    return [100 * r["images_per_s"] / np_ * flops / 1e9 / peak for r in runs if r.get("images_per_s")]


def run(args):
    work = works(args)
    nps = [1] if args.np == 1 else [1, args.np]
    frameworks = ["ringtrain"] + (["pytorch"] if peer.ready(args) else [])
    sides = [f"{f} np{n}" for n in nps for f in frameworks]
    load_before = load()

    def measure(item, side, rnd):
        w, (framework, np_) = work[item], side.split(" np")
        np_ = int(np_)
        if framework == "pytorch":
            cmd = w.peer_argv(["--ddp", "--nproc", str(np_)] if np_ > 1 else [])
            return last_json(check(cmd, {"OMP_NUM_THREADS": "1"}, args.timeout))
        run_dir = os.path.join(work_dir, f"{item.replace(' ', '-')}-np{np_}-r{rnd}")
        argv = w.ringtrain_argv(args.bin, np_, run_dir)
        mpirun = "--bind-to none" + (" --oversubscribe" if np_ > (os.cpu_count() or 1) else "")
        return ringtrain.timed_run(host_launch(np_, argv, 1, mpirun), run_dir, w.warmup, w.batch,
                                   timeout=args.timeout)

    peaks = [sgemm_peak(args)]
    with tempfile.TemporaryDirectory(prefix="bench-train-") as work_dir:  # the runs' directories go with it
        results = interleave(args.rounds, list(work), sides, measure)
    peaks.append(sgemm_peak(args))
    peak = max(peaks) if None not in peaks else None
    peak_text = "" if peak is None else (f"; one core's peak: oneDNN sgemm 2048^3, one thread, best of before and "
                                         f"after the rounds: {peak:.1f} GFLOP/s ({peaks[0]:.1f}, {peaks[1]:.1f})")
    text = [conditions(f"one host, one thread per rank, {args.rounds} interleaved rounds, medians [min-max]; "
                       f"ratios paired within each round; {args.bin}{peak_text}", load_before), ""]
    ratio_plot = ([], [])
    for np_ in nps:
        t = Table("model", "precision", "batch/rank", "steps", "train MFLOP/img", "ringtrain img/s", "PyTorch img/s",
                  "ringtrain / PyTorch", "% of peak ringtrain; PyTorch", "ringtrain RSS MB", "PyTorch RSS MB", "RSS ratio",
                  *(["scaling eff. ringtrain / PyTorch"] if np_ > 1 else []), "img/s / fp32 ringtrain; PyTorch")
        for item, w in work.items():
            rt, pt = results[(item, f"ringtrain np{np_}")], results.get((item, f"pytorch np{np_}"), [])
            eff = [cell([b["images_per_s"] / (np_ * a["images_per_s"]) for a, b in
                         zip(results.get((item, f"{f} np1"), []), results.get((item, f"{f} np{np_}"), []))], 2)
                   for f in ("ringtrain", "pytorch")]
            fp32 = f"{w.model} fp32"
            vs32 = "" if w.precision == "fp32" or fp32 not in work else "; ".join(
                cell(paired(results.get((item, f"{f} np{np_}"), []), results.get((fp32, f"{f} np{np_}"), []),
                            "images_per_s"), 2) for f in frameworks)
            ratio = paired(rt, pt, "images_per_s")
            ratio_plot[0].append(f"{item} np{np_}")
            ratio_plot[1].append(ratio)
            flops = describe(w.model, w.shape)["train_flops_per_image"]  # None without torch (graph models)
            of_peak = "" if flops is None or peak is None or w.precision != "fp32" else "; ".join(
                cell(share_of_peak(runs, np_, flops, peak), 0) for runs in (rt, pt) if runs)
            t.add(w.model, w.precision, w.batch, w.steps, "" if flops is None else f"{flops / 1e6:.2f}",
                  rate(values(rt, "images_per_s")), rate(values(pt, "images_per_s")), cell(ratio, 2), of_peak,
                  cell(values(rt, "peak_rss_mb"), 0), cell(values(pt, "peak_rss_mb"), 0),
                  cell(paired(rt, pt, "peak_rss_mb"), 2), *([" / ".join(eff)] if np_ > 1 else []), vs32)
        text += ["## " + ("one process" if np_ == 1 else f"np {np_}: ringtrain under mpirun against DDP (gloo), "
                          "global images/s"), "", t.markdown(), ""]
        fp32_peer = sorted(w.model for w in work.values() if w.precision == "bf16" and not w.peer_bf16())
        if fp32_peer and "pytorch" in frameworks:
            text += [f"bf16 rows of {', '.join(fp32_peer)}: PyTorch runs fp32 (its autocast bf16 backward fails in "
                     "PyTorch 1.13: ReLU6's backward has no bf16 kernel).", ""]
    if args.plot:
        plot.ratios(args.plot, "ringtrain / PyTorch, images/s", *ratio_plot, "ratio")
    emit(args, "\n".join(text), flat(results))
    return 0
