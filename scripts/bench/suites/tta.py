"""Time to accuracy from a folder of images: ringtrain against PyTorch DDP + torchvision's DataLoader.

Fashion-MNIST written as a folder of PNGs (build/test/images/make_image_folder, once, into
data/bench/ unless --data-dir names one), resnet20 at 28x28 trained from it with
random-resized crops (area --crop-scale, 0.35-1) and horizontal flips, evaluated after every
epoch until the test accuracy reaches --target (0.92) or --epochs (the cap, also the cosine
schedule's length) run out. The same recipe on both sides (benchlib/folder_runs.py): SGD
momentum 0.9, lr 0.1 per-step cosine, weight decay on conv/linear weights, batch per rank,
--loader-threads = DataLoader workers, one compute thread per rank, the same normalisation.
PyTorch: DDP over gloo, torchvision ImageFolder + DistributedSampler + DataLoader, resnet20
written layer for layer as ringtrain's (the parameter counts are checked equal first).
--where host: np ranks on this host; nodes: one rank per emulated node (cluster.sh: links at
--nodes-link-rate 1gbit, --mtu 1500; root). Sides interleaved (ABBA) per round; reported: the wall time
from launch to exit (what a user waits for: start-up, data scan, training and evaluations),
the training time to the target as each side measures it, epochs and accuracy, the share of
training spent waiting for batches, and the paired ratios ringtrain / PyTorch. A side that
misses the target gets no ratio there; the lines under the table compare, from each side's
per-epoch test accuracy, the training time to the best accuracy both sides reached.
--no-peer: ringtrain alone (no torch needed); --dry-run: the commands only.

  bench.py tta --rounds 3 --out tta/ --plot tta/ratio.png            # host and 2 nodes, fp32
  bench.py tta --where nodes --precision fp32,bf16                   # bf16: native-bf16 CPUs
  bench.py tta --train-images 2048 --val-images 512 --epochs 2 --target 0.5 --rounds 1   # a try-out
"""
import os
import subprocess
import tempfile

from benchlib import folder_runs, folders, peer, plot
from benchlib.cluster import Cluster
from benchlib.proc import BenchError, last_json, load
from benchlib.rounds import add_options, cell, flat, interleave, paired, values
from benchlib.ringtrain import rundata
from benchlib.table import Table, conditions, emit


def add_arguments(p):
    folder_runs.add_recipe_options(p, "resnet20", 28, 128, "0.35,1", 30)
    p.add_argument("--target", type=float, default=0.92, help="test accuracy to reach")
    p.add_argument("--train-images", type=int, default=60000, help="of Fashion-MNIST's 60000, when writing the folder")
    p.add_argument("--val-images", type=int, default=10000, help="of its 10000 test images")
    add_options(p, rounds=3)


def check_params(args, recipe):
    """The peer's resnet20 must have ringtrain's parameter count (same layers, same shapes)."""
    shape = f"{recipe.channels}x{args.size}x{args.size}"
    classes = folders.describe(args.data_dir)[2]
    out = subprocess.run([args.bin, "models", "--model", args.model, "--input", shape, "--classes", str(classes)],
                         capture_output=True, text=True)
    ours = next((int(l.split()[2]) for l in out.stdout.splitlines() if l.startswith(args.model + " ")), None)
    got = subprocess.run([peer.PYTHON, folder_runs.PEER, "--print-params", "--model", args.model, "--channels",
                          str(recipe.channels), "--classes", str(classes)], capture_output=True, text=True)
    theirs = last_json(got.stdout).get("params") if got.returncode == 0 else None
    if ours is None or ours != theirs:
        raise BenchError(f"{args.model}: ringtrain has {ours} parameters, the PyTorch peer {theirs} "
                         f"({(out.stderr or got.stderr).strip()[-300:]})")
    return ours


def run(args):
    if args.data_dir is None:
        args.data_dir = folders.default_dir("fashion", args.train_images, args.val_images)
    recipe = folder_runs.Recipe(args, 1, folders.FASHION_MEAN, folders.FASHION_STD)
    folders.ensure("fashion", args.data_dir, args.train_images, args.val_images, dry_run=args.dry_run)
    items = recipe.items()
    with_peer = args.dry_run and not args.no_peer or peer.ready(args, ("torch", "torchvision"))
    target = ["--target-accuracy", str(args.target)]

    def ringtrain_argv(where, precision, run_dir="RUN_DIR"):
        return recipe.ringtrain_argv(run_dir, precision, target)

    if args.dry_run:
        return recipe.dry_run(items, ringtrain_argv, lambda x: recipe.peer_argv(x, target), with_peer)
    params = check_params(args, recipe) if with_peer else None
    sides = ["ringtrain"] + (["pytorch"] if with_peer else [])
    load_before = load()

    def measure(item, side, rnd):
        where, precision = item.split()
        if side == "pytorch":
            got, wall = recipe.run_peer(where, recipe.peer_argv(precision, target))
            return {"wall_s": wall, "train_s_to_target": got.get("time_to_target_s"), "accuracy": got.get(
                "final_test_accuracy"), "epochs": got.get("epochs_completed"), "peak_rss_mb": got.get("peak_rss_mb"),
                    "data_share": got.get("data_wait_share"), "curve": curve_text(got.get("curve") or [])}
        run_dir = os.path.join(tmp, f"{where}-{precision}-r{rnd}")
        s, wall = recipe.run_ringtrain(where, ringtrain_argv(where, precision, run_dir), run_dir)
        return {"wall_s": wall, "train_s_to_target": s.get("time_to_target_s"), "accuracy":
                s.get("final_test_accuracy"), "epochs": s.get("epochs_completed"),
                "peak_rss_mb": max((r.get("peak_rss_mb") or 0 for r in s.get("ranks") or []), default=None),
                "data_share": rundata.phase_share(s, "data"), "curve": curve_text(metrics_curve(run_dir))}

    names = [f"{w} {x}" for w, x in items]
    with tempfile.TemporaryDirectory(prefix="bench-tta-") as tmp:
        if any(w == "nodes" for w, _ in items):
            with Cluster(args.np, args.link_rate, args.mtu):
                results = interleave(args.rounds, names, sides, measure)
        else:
            results = interleave(args.rounds, names, sides, measure)
    return report(args, results, names, sides, params, load_before)


def metrics_curve(run_dir):
    """[seconds since training started, test accuracy] after each epoch, from ringtrain's metrics.csv."""
    rows = rundata.Run(run_dir).epoch_series()
    return [[float(r["elapsed_s"]), float(r["test_accuracy"])] for r in rows
            if r.get("test_accuracy") is not None and r.get("elapsed_s") is not None]


def curve_text(points):  # "s:accuracy s:accuracy ...", one cell of results.csv
    return " ".join(f"{t:.1f}:{a:.4f}" for t, a in points)


def first_at(curve, level):
    """Seconds to the first epoch whose test accuracy is >= level, from a curve_text."""
    return next((float(t) for t, a in (p.split(":") for p in curve.split()) if float(a) >= level), None)


def common_level(a, b):
    """Each round's (level, a's seconds, b's seconds) to the best accuracy both runs reached:
    the time-to-accuracy comparison that still exists when one side or both miss the target."""
    best = lambda r: max((float(p.split(":")[1]) for p in r.get("curve", "").split()), default=None)  # noqa: E731
    out = []
    for x, y in zip(a, b):
        if best(x) is not None and best(y) is not None:
            level = min(best(x), best(y))
            out.append((level, first_at(x["curve"], level), first_at(y["curve"], level)))
    return out


def reached(runs):
    """The runs that reached the target, with their wall time as the time to it."""
    return [dict(r, wall_to_target_s=r["wall_s"]) if r.get("train_s_to_target") is not None else {} for r in runs]


def report(args, results, names, sides, params, load_before):
    t = Table("where", "precision", "side", "reached", "wall s to target (launch to exit)", "train s to target",
              "epochs", "final accuracy", "wall ratio ringtrain / PyTorch (paired)", "train-time ratio (paired)",
              "data wait share", "peak RSS MB")
    labels, ratio_lists = [], []
    for item in names:
        where, precision = item.split()
        rt = reached(results[(item, "ringtrain")])
        for side in sides:
            runs = results[(item, side)]
            ok = reached(runs)
            wall_ratio = paired(rt, reached(results.get((item, "pytorch"), [])), "wall_to_target_s") \
                if side == "ringtrain" else []
            train_ratio = paired(rt, reached(results.get((item, "pytorch"), [])), "train_s_to_target") \
                if side == "ringtrain" else []
            t.add(where, precision, side, f"{sum(1 for r in ok if r)}/{len(runs)}", cell(values(ok, "wall_to_target_s"), 1),
                  cell(values(runs, "train_s_to_target"), 1), cell(values(runs, "epochs"), 0),
                  cell(values(runs, "accuracy"), 4), cell(wall_ratio, 2), cell(train_ratio, 2),
                  cell(values(runs, "data_share"), 3), cell(values(runs, "peak_rss_mb"), 0))
            if wall_ratio:
                labels.append(item)
                ratio_lists.append(wall_ratio)
    if args.plot:
        plot.ratios(args.plot, f"time to {args.target}: ringtrain / PyTorch DDP (wall)", labels, ratio_lists,
                    "wall-time ratio")
    n_train, n_val, classes = folders.describe(args.data_dir)
    where = (f"{args.model} at {args.size}x{args.size} from {args.data_dir} ({n_train} train / {n_val} val PNGs, "
             f"{classes} classes; {args.dataset} for ringtrain), crop scale {args.crop_scale} + flip, batch {args.batch} "
             f"per rank x {args.np} ranks, lr {args.lr} cosine over {args.epochs} epochs (the cap), target "
             f"{args.target}; {args.threads} compute thread(s) and {args.loader_threads} loader thread(s) / "
             f"DataLoader worker(s) per rank; nodes: {args.np} emulated at {args.link_rate}, MTU {args.mtu}; "
             f"parameters {params if params else 'not compared (no peer)'}; {args.rounds} interleaved rounds, "
             f"medians [min-max]; {args.bin}")
    lines = [f"- {item}, round {i + 1}: both reached {level:.4f}; training time to it ringtrain {a:.1f} s, "
             f"PyTorch {b:.1f} s, ratio {a / b:.2f}" for item in names if "pytorch" in sides
             for i, (level, a, b) in enumerate(common_level(results[(item, "ringtrain")], results[(item, "pytorch")]))]
    common = ["", "Time to the best test accuracy both sides reached (from each side's per-epoch curve, "
              "seconds since its training started):", *lines] if lines else []
    emit(args, "\n".join([conditions(where, load_before), "", t.markdown(), *common]), flat(results))
    return 0
