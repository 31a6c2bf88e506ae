"""One recipe, two command lines: ringtrain's `train` from an image folder (or packed shards of
it) and benchlib/torch_folder_peer.py's DDP + ImageFolder + DataLoader, with the same model,
crop, flip, normalisation, batch, SGD, schedule, loader threads = DataLoader workers and
compute threads per rank; launched on this host (mpirun / torch spawn) or one rank per
emulated node (cluster.sh run / torch_ranks). Both sides are timed from launch to exit."""
import json
import os
import time

from . import peer
from .cluster import Cluster, host_launch, torch_ranks
from .proc import BenchError, last_json, run, tail
from .ringtrain import default_bin

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_folder_peer.py")


def add_recipe_options(p, model, size, batch, crop_scale, epochs):
    g = p.add_argument_group("the recipe (both sides)")
    g.add_argument("--dataset", choices=("folder", "packed"), default="folder",
                   help="ringtrain's input: the folder, or packed shards of it (--packed-dir; "
                        "PyTorch reads the folder either way, as its users do)")
    g.add_argument("--data-dir", help="DIR/train/<class>, DIR/val/<class> (default: written by make_image_folder)")
    g.add_argument("--packed-dir", help="with --dataset packed: ringtrain's --data-dir")
    g.add_argument("--model", default=model)
    g.add_argument("--size", type=int, default=size, help="crop side")
    g.add_argument("--crop-scale", default=crop_scale, help="random-resized crop's area fraction MIN,MAX")
    g.add_argument("--batch", type=int, default=batch, help="per rank")
    g.add_argument("--lr", type=float, default=0.1)
    g.add_argument("--weight-decay", type=float, default=5e-4)
    g.add_argument("--epochs", type=int, default=epochs, help="cap, and the cosine schedule's length")
    g.add_argument("--np", type=int, default=2, help="ranks (one per node with --where nodes)")
    g.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    g.add_argument("--loader-threads", type=int, default=1,
                   help="ringtrain's --loader-threads = the DataLoader's num_workers, per rank")
    g.add_argument("--precision", default="fp32",
                   help="fp32 and/or bf16, comma-separated (bf16: ringtrain --precision bf16 --compress bf16 "
                        "against autocast(bf16); needs a CPU with native bf16)")
    g.add_argument("--where", default="host,nodes", help="host (np ranks here) and/or nodes (emulated)")
    g.add_argument("--nodes-link-rate", dest="link_rate", default="1gbit")
    g.add_argument("--mtu", type=int, default=1500)
    g.add_argument("--bin", default=default_bin())
    g.add_argument("--dry-run", action="store_true", help="print every command of one round, run nothing")
    peer.add_options(p)


class Recipe:
    """The options of a folder suite as the two command lines. mean/std: a gray folder's."""

    def __init__(self, args, channels, mean=None, std=None):
        self.a, self.channels, self.mean, self.std = args, channels, mean, std
        if args.dataset == "packed" and not args.packed_dir:
            args.parser.error("--dataset packed needs --packed-dir (ringtrain pack's output of --data-dir)")
        bad = [w for w in args.where.split(",") if w not in ("host", "nodes")] + \
            [x for x in args.precision.split(",") if x not in ("fp32", "bf16")]
        if bad or args.np < 1:
            args.parser.error(f"unknown --where or --precision {bad}" if bad else "--np must be >= 1")

    def ringtrain_argv(self, run_dir, precision, extra=()):
        a = self.a
        data = a.packed_dir if a.dataset == "packed" else a.data_dir
        norm = ["--mean", self.mean, "--std", self.std] if self.mean else []
        wide = ["--precision", "bf16", "--compress", "bf16"] if precision == "bf16" else []
        return [a.bin, "train", "--model", a.model, "--dataset", a.dataset, "--data-dir", data,
                "--crop", f"random-resized:{a.size}", "--crop-scale", a.crop_scale, *norm,
                "--batch-size", str(a.batch), "--lr", str(a.lr), "--momentum", "0.9", "--weight-decay",
                str(a.weight_decay), "--lr-schedule", "cosine", "--epochs", str(a.epochs),
                "--loader-threads", str(a.loader_threads), "--threads", str(a.threads), *wide,
                "--no-tensorboard", "--quiet", "--run-dir", run_dir, *extra]

    def peer_argv(self, precision, extra=()):
        a = self.a
        norm = ["--mean", self.mean, "--std", self.std] if self.mean else []
        return [peer.PYTHON, PEER, "--data-dir", a.data_dir, "--model", a.model, "--channels", str(self.channels),
                "--size", str(a.size), "--crop-scale", a.crop_scale, *norm, "--batch-size", str(a.batch),
                "--lr", str(a.lr), "--weight-decay", str(a.weight_decay), "--epochs", str(a.epochs),
                "--workers", str(a.loader_threads), "--threads", str(a.threads),
                "--autocast", "bf16" if precision == "bf16" else "none", "--ddp", "--nproc", str(a.np), *extra]

    def ringtrain_cmd(self, where, argv):
        if where == "nodes":
            return Cluster.launch(self.a.np, argv)
        mpirun = "--bind-to none" + (" --oversubscribe" if self.a.np > (os.cpu_count() or 1) else "")
        return host_launch(self.a.np, argv, self.a.threads, mpirun)

    def run_ringtrain(self, where, argv, run_dir):
        """(summary.json, seconds from launch to exit)."""
        t0 = time.perf_counter()
        rc, out, err = run(self.ringtrain_cmd(where, argv), {"OMP_NUM_THREADS": str(self.a.threads)}, self.a.timeout)
        wall = time.perf_counter() - t0
        path = os.path.join(run_dir, "summary.json")
        if rc != 0 or not os.path.exists(path):
            raise BenchError(f"{' '.join(argv)}: exit {rc}: {tail(err or out)}")
        with open(path) as f:
            return json.load(f), wall

    def run_peer(self, where, argv):
        """(rank 0's JSON line, seconds from launch to exit)."""
        if where == "nodes":
            out, wall = torch_ranks(self.a.np, argv, self.a.timeout)
            return last_json(out), wall
        t0 = time.perf_counter()
        rc, out, err = run(argv, {"OMP_NUM_THREADS": str(self.a.threads)}, self.a.timeout)
        wall = time.perf_counter() - t0
        if rc != 0:
            raise BenchError(f"{' '.join(argv)}: exit {rc}: {tail(err or out)}")
        return last_json(out), wall

    def dry_run(self, items, ringtrain_argv, peer_argv, with_peer):
        """Every command of one round, as the suite would run them; nothing runs."""
        for where, precision in items:
            print(f"# {where} {precision}")
            print(" ".join(self.ringtrain_cmd(where, ringtrain_argv(where, precision))))
            if with_peer:
                argv = peer_argv(precision)
                print(("# one per node, in its namespace (RANK, WORLD_SIZE, MASTER_ADDR set): " if where == "nodes"
                       else "") + " ".join(argv))
        return 0

    def items(self):
        """(where, precision) pairs to measure; bf16 only on a CPU with native bf16 (else a note)."""
        from .folders import native_bf16
        precisions = self.a.precision.split(",")
        if "bf16" in precisions and not native_bf16() and not self.a.dry_run:
            from .proc import log
            log("bf16 left out: this CPU has no native bf16 (no avx512_bf16 / amx_bf16 flag); ringtrain refuses "
                "--precision bf16 here and PyTorch's autocast would only emulate it. Run it on a CPU that has it.")
            precisions = [x for x in precisions if x != "bf16"]
        if not precisions:
            raise BenchError("nothing left to measure (every --precision was left out)")
        return [(w, x) for w in self.a.where.split(",") for x in precisions]
