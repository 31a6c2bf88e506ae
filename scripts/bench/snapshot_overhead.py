#!/usr/bin/env python3
"""--snapshot-every K against K = 0: the step time with RAM snapshots, interleaved runs.

Each round runs every model once without snapshots and once with --snapshot-every K (the
order alternates between rounds), for every --bin given (two binaries, e.g. a branch's and
main's, are then measured in the same rounds), under mpirun on this host or, with --cluster
NODES, across emulated nodes: scripts/mpirun/cluster.sh up --nodes NODES --slots 1
--link-rate RATE --mtu MTU (cluster id RINGTRAIN_CLUSTER_ID, 31 unless set; one rank per
node, so --np is NODES), each run through `cluster.sh run --np NODES --map-by slot`, and
`cluster.sh down` at the end (also after a failure; a cluster of that id already up is an
error, not reused). It reads rank 0's step records (--log-every 1): the step time is (t of
the last record - t of the record after the warm-up) / the steps between them, so it holds
everything the loop does per step, the snapshot's copy, its thread's share of the cores and
the copies' MPI traffic included; and the all-reduce's share of it (the records' mean
allreduce_s over the same steps: across nodes, where a snapshot's traffic to the next node
shares the link with the all-reduce, that is where it shows). Prints a markdown table: per
model (and binary) the median step time of each setting over the rounds (each round's value
in brackets) and the median of the per-round ratios K / 0, with `uptime`'s load before and
after (on a shared machine the load moves single runs; the ratio of two runs of one round is
steadier than either). Because a loaded machine can hide a few percent
in that noise, it also prints the snapshots' own cost from summary.json, which load hardly
moves: the main thread's CPU seconds on them at the snapshot steps (`step_path_cpu_s`, on the
step's path) plus the snapshot thread's (`thread_cpu_s`) per step, as a share of the K = 0
step time: the overhead if every cycle of the snapshot thread were taken from the training (an upper bound
on one host whose cores the ranks fill; with a spare core only the main thread's part), and
how many snapshots the optimizer update captured (`captured_in_update`: then the capture's
CPU is in the update's, the optimizer phase, and in neither figure), how many optimizer
updates waited for the snapshot thread's copy of the parameters (`fence_waits`: when the
update did not capture, the copy runs during the next step's forward and backward), and
rank 0's traffic with its neighbour nodes: its snapshots that the next node's own snapshot
of the step was found to replicate (`replicated_on_next_node`, "-" for binaries from before
the digests), those it sent whole, and the whole copies it received. Last, an estimate
within each run that the ranks' changing schedules on an oversubscribed host do not move:
rank 0's mean step over its mean step 3 or more after a snapshot step, minus 1, with the
same positions of the K=0 runs as its null (the median over rounds and the quartiles).
Needs root for --cluster (network namespaces).

  scripts/bench/snapshot_overhead.py --models lenet5,mlp --np 2 --every 10 --rounds 3
  scripts/bench/snapshot_overhead.py --cluster 2 --rounds 8 --bin build/apps/ringtrain --bin /tmp/main/ringtrain
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "plot"))
import rundata  # noqa: E402  (the one reader of ringtrain run directories)


CLUSTER = os.path.join(ROOT, "scripts", "mpirun", "cluster.sh")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="lenet5,mlp")
    p.add_argument("--np", type=int, default=None,
                   help="ranks (default 2 on this host; with --cluster, NODES: one rank per node)")
    p.add_argument("--every", type=int, default=10, help="--snapshot-every K of the snapshot runs")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=60, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bin", action="append", default=[],
                   help="the ringtrain binary; repeatable: every binary runs in every round "
                        "(default: $RINGTRAIN_BIN, else build/apps/ringtrain)")
    p.add_argument("--mpirun-args", default="--bind-to none --oversubscribe",
                   help="mpirun options on this host (not with --cluster: cluster.sh run sets its own)")
    p.add_argument("--cluster", type=int, default=0, metavar="NODES",
                   help="run across NODES emulated nodes (scripts/mpirun/cluster.sh, one rank per node; root)")
    p.add_argument("--link-rate", default="1gbit", help="with --cluster: each node's link rate (tc)")
    p.add_argument("--mtu", type=int, default=1500, help="with --cluster: the links' MTU")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the K > 0 runs' ranks (mpirun -x), e.g. "
                        "RINGTRAIN_TEST_SNAPSHOT_SKIP=crc to measure what a part of a snapshot costs; repeatable")
    args = p.parse_args(argv)
    if not args.bin:
        args.bin = [os.environ.get("RINGTRAIN_BIN", os.path.join(ROOT, "build", "apps", "ringtrain"))]
    if len(set(args.bin)) != len(args.bin):
        p.error("--bin: each binary once")
    if args.cluster < 0 or args.cluster == 1:
        p.error(f"--cluster {args.cluster}: give the number of emulated nodes, 2 or more")
    if args.cluster and args.np not in (None, args.cluster):
        p.error(f"--np {args.np}: with --cluster {args.cluster} there is one rank per node, so np is {args.cluster}")
    if args.np is None:
        args.np = args.cluster or 2
    return args


def cluster_env():
    """The environment of cluster.sh: its own cluster id (31 unless RINGTRAIN_CLUSTER_ID is set)."""
    return {**os.environ, "RINGTRAIN_CLUSTER_ID": os.environ.get("RINGTRAIN_CLUSTER_ID") or "31"}


def cluster_up(args):
    cmd = [CLUSTER, "up", "--nodes", str(args.cluster), "--slots", "1", "--link-rate", args.link_rate,
           "--mtu", str(args.mtu)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=cluster_env())
    if done.returncode != 0:
        sys.exit(f"snapshot_overhead.py: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr.strip()}")
    print(done.stdout.strip(), file=sys.stderr)


def cluster_down():
    subprocess.run([CLUSTER, "down"], capture_output=True, text=True, env=cluster_env())


def launcher(args, env):
    """The command that starts args.np ranks, up to the program: mpirun here or cluster.sh run."""
    if args.cluster:
        return [CLUSTER, "run", "--np", str(args.np), "--map-by", "slot", "--"] + env
    return ["mpirun", "-np", str(args.np)] + args.mpirun_args.split() + env + ["-x", f"OMP_NUM_THREADS={args.threads}"]


def run_once(args, binary, model, every, run_dir):
    """Seconds per step of one run (rank 0's step records), the all-reduce's seconds per step
    over the same steps, the snapshots' CPU per step and summary.json's snapshot stats."""
    env = [x for e in (args.env if every else []) for x in ("-x", e)]
    cmd = (launcher(args, env) +
           [binary, "train", "--model", model,
            "--dataset", "synthetic", "--synthetic-shape", "1x28x28", "--synthetic-train", "16384",
            "--synthetic-test", "64", "--batch-size", str(args.batch_size), "--threads", str(args.threads),
            "--max-steps", str(args.warmup + args.steps), "--eval-every", "0", "--log-every", "1",
            "--no-tensorboard", "--overlap", "off", "--quiet", "--run-dir", run_dir,
            "--snapshot-every", str(every)])
    run_env = {**(cluster_env() if args.cluster else os.environ), "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=run_env)
    if done.returncode != 0:
        sys.exit(f"snapshot_overhead.py: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    run = rundata.Run(run_dir)
    steps = run.of_type(0, "step")
    first = next(r for r in steps if r["step"] == args.warmup)
    last = steps[-1]
    timed = [r for r in steps if r["step"] > first["step"]]
    allreduce = sum(r.get("allreduce_s", 0.0) for r in timed) / (last["step"] - first["step"])
    summary = run.summary_file
    snap = summary.get("snapshots")
    cost = ((snap["step_path_cpu_s"] / summary["steps"], snap["thread_cpu_s"] / summary["steps"])
            if snap else (0.0, 0.0))
    return (last["t"] - first["t"]) / (last["step"] - first["step"]), allreduce, cost, snap, within_run(args, steps, first)


def within_run(args, steps, first):
    """The steps a snapshot touches against the others of the same run: the mean time of
    every timed step over the mean of those at least 3 steps after a snapshot step (step %
    K >= 3; the snapshot step, whose update captures the state, and the two after it, which
    its thread's sealing and the digests overlap, are left out), minus 1. For a K = 0 run
    the same positions of its steps: the null, what this estimate reads where no snapshot
    is taken. Step times that move together over a whole run (on an oversubscribed host the
    ranks fall into faster and slower schedules that last tens of steps) cancel here; they
    do not in the ratio of two runs. What it cannot see: a cost spread evenly over every
    step. None when K < 5 or no step qualifies."""
    every = args.every
    if every < 5:
        return None
    durations = [(b["step"], b["t"] - a["t"]) for a, b in zip(steps, steps[1:])
                 if a["step"] >= first["step"] and b["step"] == a["step"] + 1]
    away = [d for s, d in durations if s % every >= 3]
    if not durations or not away:
        return None
    return statistics.mean(d for _, d in durations) / statistics.mean(away) - 1.0


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def measure(args, models, work):
    """Every round: each model, each binary, K = 0 and K = every, in an order reversed on
    odd rounds. Returns {(model, bin, k): [seconds per step]}, the same for the all-reduce,
    {(model, bin): [snapshot CPU per step]} and {(model, bin): last summary snapshot stats}."""
    keys = [(m, b, k) for m in models for b in args.bin for k in (0, args.every)]
    times = {key: [] for key in keys}
    allreduce = {key: [] for key in keys}
    costs = {(m, b): [] for m in models for b in args.bin}
    within = {key: [] for key in keys}
    snaps = {}
    for rnd in range(args.rounds):
        for m in models:
            order = [(b, k) for b in args.bin for k in (0, args.every)]
            for i, (b, k) in enumerate(order if rnd % 2 == 0 else list(reversed(order))):
                s, ar, cost, snap, local = run_once(args, b, m, k,
                                                    os.path.join(work, f"{m}-b{args.bin.index(b)}-k{k}-r{rnd}"))
                times[(m, b, k)].append(s)
                if local is not None:
                    within[(m, b, k)].append(local)
                allreduce[(m, b, k)].append(ar)
                if k:
                    costs[(m, b)].append(cost)
                    snaps[(m, b)] = snap
                print(f"round {rnd + 1} {m} {b} K={k}: {1e3 * s:.2f} ms/step, all-reduce {1e3 * ar:.2f}",
                      file=sys.stderr)
    return times, allreduce, costs, snaps, within


def report(args, models, times, allreduce, costs, snaps, within):
    where = (f"{args.cluster} emulated nodes x 1 rank (cluster.sh, {args.link_rate}, MTU {args.mtu})"
             if args.cluster else f"np {args.np} on this host")
    print(f"{where}, --threads {args.threads}, --batch-size {args.batch_size}, {args.steps} timed steps "
          f"after {args.warmup}, {args.rounds} interleaved rounds{''.join(' ' + e for e in args.env)}\n")
    print(f"| model | binary | ms/step K=0 | ms/step K={args.every} | ratio K={args.every} / K=0 (median of rounds) "
          f"| all-reduce ms/step K=0 / K={args.every} (medians) |")
    print("|---|---|---|---|---|---|")
    cell = lambda v: f"{1e3 * statistics.median(v):.2f} ({', '.join(f'{1e3 * x:.2f}' for x in v)})"
    for m in models:
        for b in args.bin:
            a, c = times[(m, b, 0)], times[(m, b, args.every)]
            ratios = [y / x for x, y in zip(a, c)]
            print(f"| {m} | {b} | {cell(a)} | {cell(c)} | {statistics.median(ratios):.3f} "
                  f"[{min(ratios):.3f}-{max(ratios):.3f}] ({', '.join(f'{r:.3f}' for r in ratios)}) | "
                  f"{1e3 * statistics.median(allreduce[(m, b, 0)]):.2f} / "
                  f"{1e3 * statistics.median(allreduce[(m, b, args.every)]):.2f} |")
    print(f"\n| model | binary | snapshot bytes | written / skipped / captured in the update / optimizer waits on the "
          f"copy / replicated on the next node / sent to it whole / received whole (rank 0, last run) | CPU ms per step: main thread (step path) "
          f"+ snapshot thread, median of runs | as share of the K=0 step: main / main + thread |")
    print("|---|---|---|---|---|---|")
    for m in models:
        for b in args.bin:
            snap = snaps[(m, b)]
            main_ms = statistics.median(c[0] for c in costs[(m, b)])
            thread_ms = statistics.median(c[1] for c in costs[(m, b)])
            step = statistics.median(times[(m, b, 0)])
            counts = [snap.get(key, "-") for key in  # "-": a binary from before that count
                      ("written", "skipped", "captured_in_update", "fence_waits", "replicated_on_next_node",
                       "sent_to_next_node", "received_from_previous_node")]
            print(f"| {m} | {b} | {snap['bytes']} | {' / '.join(str(c) for c in counts)} | "
                  f"{1e3 * main_ms:.3f} + {1e3 * thread_ms:.3f} | "
                  f"{100 * main_ms / step:.2f}% / {100 * (main_ms + thread_ms) / step:.2f}% |")
    if any(within.values()):
        print(f"\nWithin each run (rank 0): the mean step over the mean of the steps 3 or more after a "
              f"snapshot step (step % {args.every} >= 3), minus 1; K=0: the same positions, where no snapshot "
              f"is taken (the estimate's null). Median over the rounds [interquartile range].\n")
        print(f"| model | binary | K={args.every} | K=0 (null) |")
        print("|---|---|---|---|")
        def spread(v):
            if not v:
                return "-"
            q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0], v[0], v[0]]
            return f"{100 * statistics.median(v):+.2f}% [{100 * q[0]:+.2f}%, {100 * q[2]:+.2f}%]"
        for m in models:
            for b in args.bin:
                print(f"| {m} | {b} | {spread(within[(m, b, args.every)])} | {spread(within[(m, b, 0)])} |")


def main(argv=None):
    args = parse_args(argv)
    models = args.models.split(",")
    work = tempfile.mkdtemp(prefix="ringtrain-snapbench-")
    load_before = uptime()
    if args.cluster:
        cluster_up(args)
    try:
        results = measure(args, models, work)
    finally:
        if args.cluster:
            cluster_down()
        shutil.rmtree(work, ignore_errors=True)
    load_after = uptime()
    report(args, models, *results)
    print(f"\nload before: {load_before}\nload after:  {load_after}")


if __name__ == "__main__":
    main()
