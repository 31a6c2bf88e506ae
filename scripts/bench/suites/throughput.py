"""Training throughput at ImageNet shape from a folder of JPEGs: ringtrain against DDP + DataLoader.

resnet18 and resnet50 (--models) at 224x224, random-resized crops (0.08-1) and flips, from a
folder of photo-sized JPEGs. Unless --data-dir names a folder, build/test/images/make_image_folder
writes one into data/bench/ once, at 500x375 to 600x450, quality 90: with --photos real (the
default), crops of the nine colour photographs in Debian 12's python3-skimage, python3-sklearn
and python-matplotlib-data, one class each (~55 KB a file; ImageNet's average is ~110 KB); with
--photos synthetic, RGB ramps of 4 classes with grain (~170-220 KB). --dataset packed:
ringtrain reads --packed-dir (packed shards of the same folder), PyTorch the folder. Both sides train --warmup then --steps timed steps with the recipe
of benchlib/folder_runs.py (no evaluation in the window); reported: global images/s (ringtrain:
rank 0's step records after the warm-up; PyTorch: the slowest rank's timed loop), the share
of the step spent waiting for data, and the paired ratio ringtrain / PyTorch. --where host:
np ranks here; nodes: one per emulated node (root). bf16 needs a CPU with native bf16.

  bench.py throughput --models resnet18,resnet50 --rounds 3 --out thr/
  bench.py throughput --models resnet50 --where nodes --precision fp32,bf16 --dataset packed --packed-dir P
  bench.py throughput --models resnet18 --size 64 --batch 8 --steps 3 --warmup 1 --rounds 1 --train-images 64
"""
import os
import tempfile

from benchlib import folder_runs, folders, peer, plot, ringtrain
from benchlib.cluster import Cluster
from benchlib.proc import BenchError, load
from benchlib.rounds import add_options, cell, flat, interleave, paired, values
from benchlib.table import Table, conditions, emit


def add_arguments(p):
    folder_runs.add_recipe_options(p, "resnet18", 224, 32, "0.08,1", 1000)
    p.add_argument("--models", help="comma-separated, overrides --model (default resnet18,resnet50)",
                   default="resnet18,resnet50")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--train-images", type=int, default=1024, help="when writing the folder (16 steps of 32 x 2)")
    p.add_argument("--val-images", type=int, default=64)
    p.add_argument("--photo-size", default="500x375", help="smallest WxH of the written JPEGs (up to 1.2x)")
    p.add_argument("--photos", choices=("real", "synthetic"), default="real",
                   help="the written folder: crops of Debian's photographs, or ramps with grain")
    add_options(p, rounds=3)


def run(args):
    kind = "real" if args.photos == "real" else "photos"
    if args.data_dir is None:
        args.data_dir = folders.default_dir(kind, args.train_images, args.val_images, args.photo_size)
    recipe = folder_runs.Recipe(args, 3)
    folders.ensure(kind, args.data_dir, args.train_images, args.val_images, args.photo_size, args.dry_run)
    models = [m for m in args.models.split(",") if m]
    n_train = folders.describe(args.data_dir)[0] if not args.dry_run else args.train_images
    per_epoch = n_train // (args.batch * args.np)
    if not args.dry_run and per_epoch < 1:
        raise BenchError(f"{args.data_dir}: {n_train} training images make no batch of {args.batch} x {args.np}")
    args.epochs = -(-(args.warmup + args.steps) // max(per_epoch, 1))  # just enough epochs for the steps
    items = [(m, w, x) for m in models for w, x in recipe.items()]
    with_peer = args.dry_run and not args.no_peer or peer.ready(args, ("torch", "torchvision"))

    def ringtrain_argv(model, precision, run_dir="RUN_DIR"):
        args.model = model
        return recipe.ringtrain_argv(run_dir, precision, ["--max-steps", str(args.warmup + args.steps),
                                                          "--eval-every", "0", "--log-every", "1"])

    def peer_argv(model, precision):
        args.model = model
        return recipe.peer_argv(precision, ["--steps", str(args.steps), "--warmup", str(args.warmup)])

    if args.dry_run:
        for m in models:
            recipe.dry_run([(w, x) for mm, w, x in items if mm == m], lambda w, x, m=m: ringtrain_argv(m, x),
                           lambda x, m=m: peer_argv(m, x), with_peer)
        return 0
    sides = ["ringtrain"] + (["pytorch"] if with_peer else [])
    load_before = load()

    def measure(item, side, rnd):
        model, where, precision = item.split()
        if side == "pytorch":
            got, wall = recipe.run_peer(where, peer_argv(model, precision))
            return {"images_per_s": got["images_per_s"], "data_share": got.get("data_wait_share"), "wall_s": wall,
                    "peak_rss_mb": got.get("peak_rss_mb")}
        run_dir = os.path.join(tmp, f"{model}-{where}-{precision}-r{rnd}")
        _, wall = recipe.run_ringtrain(where, ringtrain_argv(model, precision, run_dir), run_dir)
        got = ringtrain.measure(run_dir, args.warmup, args.batch)
        if got is None:
            raise BenchError(f"{run_dir}: no step records after the warm-up")
        return {"images_per_s": got["images_per_s"], "data_share": got["data_ms"] / got["step_ms"], "wall_s": wall,
                "peak_rss_mb": got.get("peak_rss_mb")}

    names = [" ".join(i) for i in items]
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        if any(w == "nodes" for _, w, _ in items):
            with Cluster(args.np, args.link_rate, args.mtu):
                results = interleave(args.rounds, names, sides, measure)
        else:
            results = interleave(args.rounds, names, sides, measure)
    return report(args, results, names, sides, load_before)


def report(args, results, names, sides, load_before):
    t = Table("model", "where", "precision", "side", "images/s", "ratio ringtrain / PyTorch (paired)",
              "data wait share", "peak RSS MB")
    labels, ratio_lists = [], []
    for item in names:
        rt, pt = results[(item, "ringtrain")], results.get((item, "pytorch"), [])
        for side in sides:
            runs = results[(item, side)]
            ratio = paired(rt, pt, "images_per_s") if side == "ringtrain" else []
            t.add(*item.split(), side, cell(values(runs, "images_per_s"), 2), cell(ratio, 2),
                  cell(values(runs, "data_share"), 3), cell(values(runs, "peak_rss_mb"), 0))
            if ratio:
                labels.append(item)
                ratio_lists.append(ratio)
    if args.plot:
        plot.ratios(args.plot, "images/s at ImageNet shape: ringtrain / PyTorch DDP", labels, ratio_lists, "ratio")
    n_train, n_val, classes = folders.describe(args.data_dir)
    where = (f"{args.size}x{args.size} random-resized crops from {args.data_dir} ({n_train} train JPEGs, {classes} "
             f"classes; {args.dataset} for ringtrain), batch {args.batch} per rank x {args.np} ranks, {args.warmup} "
             f"warm-up + {args.steps} timed steps; {args.threads} compute thread(s) and {args.loader_threads} loader "
             f"thread(s) / DataLoader worker(s) per rank; nodes: {args.np} emulated at {args.link_rate}, MTU "
             f"{args.mtu}; {args.rounds} interleaved rounds, medians [min-max]; {args.bin}")
    emit(args, "\n".join([conditions(where, load_before), "", t.markdown()]), flat(results))
    return 0
