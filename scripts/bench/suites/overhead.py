"""What a feature costs per step: RAM snapshots, exact sums, overlap, the stall watchdog, or one build against another.

Per model, every side of --feature runs once per round for every --bin, interleaved (ABBA); each
side's ratio is the median of the per-round ratios of rank 0's step time to the first side of its
binary (builds: of the first binary). Sides:
  snapshot  --snapshot-every 0 | --every K (with --overlap off; --env goes to the K > 0 runs only);
            also the snapshots' own CPU from summary.json (main thread on the step's path + the
            snapshot thread, per step, as a share of the K = 0 step: load hardly moves it), its
            counts (rank 0, last run) and a within-run estimate: the mean step over the mean of
            the steps 3 or more after a snapshot step, minus 1 (K = 0: the same positions, its null)
  exact     fp32 buckets | --logical-shards np (the exact int64 sum, one shard per rank) |
            --logical-shards 4np at --batch-size B/4: the same global batch np x B in all three;
            --overlap stays at its default (auto; the exact runs never overlap)
  overlap   --overlap off | on (np >= 2)
  watchdog  --stall-warning 0 --stall-timeout 0 (no thread, no channel) | the defaults (thread + TCP channel)
  builds    each --bin at its own defaults (give two or more)
Per run, after --warmup (benchlib/ringtrain.measure): step ms, all-reduce ms, of it in MPI and in
the exact sum's conversion, the rest, MB sent, CPU %, hidden comm. Conditions: mpirun -np NP on
this host (--bind-to none --oversubscribe, --threads T), synthetic data (1x28x28; 3x32x32 for
vgg11; 3x224x224, at most 64 MB of it, for resnet18/50 and mobilenetv2; --shape for all), no evaluation, no
TensorBoard; or --cluster N: N emulated nodes (root), one rank each.

  bench.py overhead --feature snapshot --models lenet5,mlp --np 2 --every 10 --rounds 15
  bench.py overhead --feature exact --rounds 3 [--cluster 2 --link-rate 1gbit]
  bench.py overhead --feature builds --bin build/apps/ringtrain --bin /tmp/main/build/apps/ringtrain
"""
import contextlib
import os
import re
import statistics
import tempfile

from benchlib import plot, ringtrain
from benchlib.cluster import Cluster, host_launch
from benchlib.proc import load
from benchlib.rounds import add_options, cell, flat, interleave
from benchlib.table import Table, conditions, emit

DEFAULT_STEPS = {"lenet5": 60, "mlp": 60, "vgg11": 25}  # about 1-2 minutes a round on one host
SHARDS_PER_RANK = 4
SNAPSHOT_COUNTS = ("written", "skipped", "captured_in_update", "fence_waits", "replicated_on_next_node",
                   "sent_to_next_node", "received_from_previous_node")


def add_arguments(p):
    p.add_argument("--feature", choices=["snapshot", "exact", "overlap", "watchdog", "builds"], required=True)
    p.add_argument("--models", default="lenet5,mlp,vgg11")
    p.add_argument("--np", type=int, help="ranks on this host (default 2; with --cluster one per node)")
    p.add_argument("--batch-size", type=int, default=32, help="per rank (exact: B/4 per shard at 4np shards)")
    p.add_argument("--steps", default="", help="timed steps: N for every model or model=N,... "
                   f"(default {','.join(f'{k}={v}' for k, v in DEFAULT_STEPS.items())}, 60 otherwise)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before the timed ones")
    p.add_argument("--every", type=int, default=10, help="snapshot: K of --snapshot-every")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shape", metavar="CxHxW", help="synthetic images of this shape for every model (default: each "
                   "model's own, above), e.g. 3x32x32 for resnet18/50's 1x1 last stage")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="snapshot: for the K > 0 runs' ranks, e.g. RINGTRAIN_TEST_SNAPSHOT_SKIP=crc")
    p.add_argument("--bin", action="append", default=[], help="repeatable: every binary runs every side")
    p.add_argument("--cluster", type=int, default=0, metavar="NODES", help="emulated nodes (root), one rank each")
    p.add_argument("--link-rate", default="1gbit", help="with --cluster: each node's link rate (tc)")
    p.add_argument("--mtu", type=int, default=1500, help="with --cluster: the links' MTU")
    add_options(p)


def settle(args):
    """Check and complete the parsed options (a usage error exits 2 naming the flag)."""
    err = args.parser.error
    args.bin = args.bin or [ringtrain.default_bin()]
    if args.cluster == 1 or args.cluster < 0:
        err("--cluster needs at least 2 nodes")
    if args.cluster and args.np not in (None, args.cluster):
        err(f"--np {args.np}: with --cluster {args.cluster} there is one rank per node")
    args.np = args.cluster or args.np or 2
    if args.feature in ("exact", "overlap", "watchdog") and args.np < 2:
        err("--np must be at least 2 (one rank has no all-reduce to compare)")
    if args.feature == "exact" and (args.batch_size < SHARDS_PER_RANK or args.batch_size % SHARDS_PER_RANK):
        err(f"--batch-size {args.batch_size} is not divisible by {SHARDS_PER_RANK} (the S={SHARDS_PER_RANK}np runs "
            "keep the global batch)")
    if args.shape is not None and not re.fullmatch(r"[1-9]\d*x[1-9]\d*x[1-9]\d*", args.shape):
        err(f"--shape {args.shape}: expected CxHxW, e.g. 3x32x32")
    if args.feature == "builds" and len(args.bin) < 2:
        err("--feature builds needs two --bin")
    if len(set(args.bin)) != len(args.bin) or args.rounds < 1 or args.warmup < 1:
        err("--bin: each binary once; --rounds and --warmup at least 1")
    args.models = [m for m in args.models.split(",") if m]
    steps = {m: DEFAULT_STEPS.get(m, 60) for m in args.models}
    for item in filter(None, args.steps.split(",")):
        name, _, n = item.rpartition("=")
        if name and name not in steps:
            err(f"--steps names '{name}', which is not in --models")
        if not n.isdigit() or int(n) < 1:
            err(f"--steps{' ' + name if name else ''}: expected a positive integer (got '{n}')")
        steps.update({name: int(n)} if name else dict.fromkeys(steps, int(n)))
    args.steps = steps
    return args


def cases(args):
    """(label, batch per rank, extra flags, environment) of each side of one binary."""
    b, np_ = args.batch_size, args.np
    if args.feature == "snapshot":
        env = dict(e.split("=", 1) for e in args.env)
        return [("K=0", b, ["--overlap", "off", "--snapshot-every", "0"], {}),
                (f"K={args.every}", b, ["--overlap", "off", "--snapshot-every", str(args.every)], env)]
    if args.feature == "exact":
        many = SHARDS_PER_RANK * np_
        return [("fp32", b, [], {}), (f"S={np_}", b, ["--logical-shards", str(np_)], {}),
                (f"S={many}", b // SHARDS_PER_RANK, ["--logical-shards", str(many)], {})]
    if args.feature == "overlap":
        return [("off", b, ["--overlap", "off"], {}), ("on", b, ["--overlap", "on"], {})]
    off = ["--stall-warning", "0", "--stall-timeout", "0"]
    return [("off", b, off, {}), ("on", b, [], {})] if args.feature == "watchdog" else [("defaults", b, [], {})]


def train_argv(args, binary, model, batch, extra, run_dir):
    shape = args.shape or ringtrain.shape_of(model)
    return ringtrain.train_argv(binary, model, args.steps[model], args.warmup, batch, run_dir, shape,
                                ringtrain.synthetic_count(shape, batch * args.np),
                                extra=["--threads", str(args.threads), *extra])


def within_run(steps, every):
    """Mean step over the mean of those 3 or more after a snapshot step, minus 1 (None if K < 5)."""
    d = [(b[0], b[1] - a[1]) for a, b in zip(steps, steps[1:]) if b[0] == a[0] + 1]
    away = [x for s, x in d if s % every >= 3]
    return statistics.mean(x for _, x in d) / statistics.mean(away) - 1.0 if every >= 5 and away else None


def quartiles(v):  # median [first quartile, third]
    q = statistics.quantiles(v, n=4) if len(v) > 1 else v * 3
    return f"{100 * statistics.median(v):+.2f}% [{100 * q[0]:+.2f}%, {100 * q[2]:+.2f}%]" if v else ""


def report(args, results, sides, base_of):
    snap = args.feature == "snapshot"
    t = Table("model", "side", "step ms", "ratio", "all-reduce ms", "in MPI ms", "conversion ms", "rest ms",
              "MB sent / step / rank", "CPU %", "hidden comm",
              *(["snapshot CPU ms/step main + thread", "share of the K=0 step", "written/skipped/captured/fence "
                 "waits/replicated/sent/received", "within run"] if snap else []))
    labels, ratios = [], []
    for m in args.models:
        for side in sides:
            runs, base = results[(m, side)], results[(m, base_of[side])]
            ratio = [r["step_ms"] / b["step_ms"] for r, b in zip(runs, base)]
            if side != base_of[side]:
                labels.append(f"{m} {side}")
                ratios.append(ratio)
            col = lambda k, d=1: cell([r[k] for r in runs if r.get(k) is not None], d)  # noqa: E731
            extra = []
            if snap:
                s = runs[-1].get("snapshots")
                main = statistics.median([(r["snapshots"] or {}).get("step_path_cpu_s", 0) / r["total_steps"] for r in runs])
                thread = statistics.median([(r["snapshots"] or {}).get("thread_cpu_s", 0) / r["total_steps"] for r in runs])
                step = statistics.median(b["step_ms"] for b in base) / 1e3
                extra = [f"{1e3 * main:.3f} + {1e3 * thread:.3f}", f"{100 * main / step:.2f}% / "
                         f"{100 * (main + thread) / step:.2f}%", "/".join(str(s.get(k, "-")) for k in SNAPSHOT_COUNTS)
                         if s else "", quartiles([x for x in (within_run(r["_steps"], args.every) for r in runs)
                                                  if x is not None])]
            t.add(m, side, col("step_ms"), "1" if side == base_of[side] else cell(ratio, 3), col("allreduce_ms"),
                  col("mpi_ms"), col("convert_ms"), col("rest_ms"), col("mb_sent", 3), col("cpu_percent", 0),
                  col("hidden_comm", 2), *extra)
    if args.plot:
        plot.ratios(args.plot, f"{args.feature}: step time against the baseline", labels, ratios, "step time ratio")
    return t.markdown()


def run(args):
    settle(args)
    tag = lambda i: f"bin{i} " if len(args.bin) > 1 else ""  # noqa: E731
    sides, how, base_of = [], {}, {}
    for i, binary in enumerate(args.bin):
        for label, batch, extra, env in cases(args):
            sides.append(tag(i) + label)
            how[sides[-1]] = (binary, batch, extra, env)
            base_of[sides[-1]] = sides[0] if args.feature == "builds" else tag(i) + cases(args)[0][0]
    load_before = load()

    def measure(model, side, rnd):
        binary, batch, extra, env = how[side]
        run_dir = os.path.join(tmp, f"{model}-{side.replace(' ', '-').replace('=', '')}-r{rnd}")
        xenv = [x for k, v in env.items() for x in ("-x", f"{k}={v}")]
        argv = train_argv(args, binary, model, batch, extra, run_dir)
        cmd = (Cluster.launch(args.np, xenv + argv) if args.cluster else
               host_launch(args.np, xenv + argv if args.np > 1 else argv, args.threads))
        return ringtrain.timed_run(cmd, run_dir, args.warmup, batch, {**env, "OMP_NUM_THREADS": str(args.threads)},
                                   args.timeout)

    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp, \
            Cluster(args.cluster, args.link_rate, args.mtu, ["--slots", "1"]) if args.cluster else contextlib.nullcontext():
        results = interleave(args.rounds, args.models, sides, measure)
    where = (f"{args.cluster} emulated nodes, one rank each, {args.link_rate}, MTU {args.mtu}" if args.cluster
             else f"np {args.np} on this host") + (
        f"; --threads {args.threads}; --batch-size {args.batch_size}"
        + (f"; images {args.shape}" if args.shape else "") + "; timed steps "
        f"{', '.join(f'{m} {n}' for m, n in args.steps.items())} after {args.warmup}; {args.rounds} interleaved "
        f"rounds, medians [min-max]; ratio: step ms / the baseline's of the same round, median of the rounds; "
        + "; ".join(f"bin{i} {b}" for i, b in enumerate(args.bin)))
    emit(args, "\n".join([conditions(where, load_before), "", report(args, results, sides, base_of)]), flat(results))
    return 0
