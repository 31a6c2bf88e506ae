#!/usr/bin/env python3
"""--snapshot-every K against K = 0: the step time with RAM snapshots, interleaved runs.

Each round runs every model once without snapshots and once with --snapshot-every K (the
order alternates between rounds), under mpirun on this host, and reads rank 0's step records
(--log-every 1): the step time is (t of the last record - t of the record after the warm-up)
/ the steps between them, so it holds everything the loop does per step, the snapshot's
copy, its thread's share of the cores and the copies' MPI traffic included. Prints a
markdown table: per model the median step time of each setting over the rounds (each
round's value in brackets) and the median of the per-round ratios K / 0, with `uptime`'s
load before and after (on a shared machine the load moves single runs; the ratio of two
runs of one round is steadier than either). Because a loaded machine can hide a few percent
in that noise, it also prints the snapshots' own cost from summary.json, which load hardly
moves: the main thread's CPU seconds on them (`step_path_cpu_s`, on the step's path) plus
the snapshot thread's (`thread_cpu_s`) per step, as a share of the K = 0 step time: the
overhead if every cycle of the snapshot thread were taken from the training (an upper bound
on one host whose cores the ranks fill; with a spare core only the main thread's part), and
how many snapshots the optimizer update captured (`captured_in_update`: then the capture's
CPU is in the update's, the optimizer phase, and in neither figure) and how many optimizer
updates waited for the snapshot thread's copy of the parameters (`fence_waits`: when the
update did not capture, the copy runs during the next step's forward and backward).

  scripts/bench/snapshot_overhead.py --models lenet5,mlp --np 2 --every 10 --rounds 3
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


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="lenet5,mlp")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--every", type=int, default=10, help="--snapshot-every K of the snapshot runs")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=60, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bin", default=os.environ.get("RINGTRAIN_BIN",
                                                   os.path.join(ROOT, "build", "apps", "ringtrain")))
    p.add_argument("--mpirun-args", default="--bind-to none --oversubscribe")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for the K > 0 runs' ranks (mpirun -x), e.g. "
                        "RINGTRAIN_TEST_SNAPSHOT_SKIP=crc to measure what a part of a snapshot costs; repeatable")
    return p.parse_args(argv)


def run_once(args, model, every, run_dir):
    """Seconds per step of one run (rank 0's step records)."""
    env = [x for e in (args.env if every else []) for x in ("-x", e)]
    cmd = (["mpirun", "-np", str(args.np)] + args.mpirun_args.split() + env +
           ["-x", f"OMP_NUM_THREADS={args.threads}", args.bin, "train", "--model", model,
            "--dataset", "synthetic", "--synthetic-shape", "1x28x28", "--synthetic-train", "16384",
            "--synthetic-test", "64", "--batch-size", str(args.batch_size), "--threads", str(args.threads),
            "--max-steps", str(args.warmup + args.steps), "--eval-every", "0", "--log-every", "1",
            "--no-tensorboard", "--overlap", "off", "--quiet", "--run-dir", run_dir,
            "--snapshot-every", str(every)])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"snapshot_overhead.py: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    run = rundata.Run(run_dir)
    steps = run.of_type(0, "step")
    first = next(r for r in steps if r["step"] == args.warmup)
    last = steps[-1]
    summary = run.summary_file
    snap = summary.get("snapshots")
    cost = ((snap["step_path_cpu_s"] / summary["steps"], snap["thread_cpu_s"] / summary["steps"])
            if snap else (0.0, 0.0))
    return (last["t"] - first["t"]) / (last["step"] - first["step"]), cost, snap


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None):
    args = parse_args(argv)
    models = args.models.split(",")
    work = tempfile.mkdtemp(prefix="ringtrain-snapbench-")
    times = {(m, k): [] for m in models for k in (0, args.every)}
    costs = {m: [] for m in models}
    snaps = {}
    load_before = uptime()
    try:
        for rnd in range(args.rounds):
            for m in models:
                order = (0, args.every) if rnd % 2 == 0 else (args.every, 0)
                for k in order:
                    s, cost, snap = run_once(args, m, k, os.path.join(work, f"{m}-k{k}-r{rnd}"))
                    times[(m, k)].append(s)
                    if k:
                        costs[m].append(cost)
                        snaps[m] = snap
                    print(f"round {rnd + 1} {m} K={k}: {1e3 * s:.2f} ms/step", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = uptime()
    print(f"{args.bin}{''.join(' ' + e for e in args.env)}\n")
    print(f"np {args.np}, --threads {args.threads}, --batch-size {args.batch_size}, {args.steps} timed steps "
          f"after {args.warmup}, {args.rounds} interleaved rounds\n")
    print(f"| model | ms/step K=0 | ms/step K={args.every} | ratio K={args.every} / K=0 (median of rounds) |")
    print("|---|---|---|---|")
    for m in models:
        a, b = times[(m, 0)], times[(m, args.every)]
        ratios = [y / x for x, y in zip(a, b)]
        cell = lambda v: f"{1e3 * statistics.median(v):.2f} ({', '.join(f'{1e3 * x:.2f}' for x in v)})"
        print(f"| {m} | {cell(a)} | {cell(b)} | {statistics.median(ratios):.3f} "
              f"[{min(ratios):.3f}-{max(ratios):.3f}] ({', '.join(f'{r:.3f}' for r in ratios)}) |")
    print(f"\n| model | snapshot bytes | written / skipped / captured in the update / optimizer waits on the copy (last run) "
          f"| CPU ms per step: main thread (step path) "
          f"+ snapshot thread, median of runs | as share of the K=0 step: main / main + thread |")
    print("|---|---|---|---|---|")
    for m in models:
        main_ms = statistics.median(c[0] for c in costs[m])
        thread_ms = statistics.median(c[1] for c in costs[m])
        step = statistics.median(times[(m, 0)])
        waits = snaps[m].get("fence_waits", "-")  # "-": a binary from before the copy moved to the thread
        captured = snaps[m].get("captured_in_update", "-")  # "-": from before the capture in the update
        print(f"| {m} | {snaps[m]['bytes']} | {snaps[m]['written']} / {snaps[m]['skipped']} / {captured} / {waits} | "
              f"{1e3 * main_ms:.3f} + {1e3 * thread_ms:.3f} | "
              f"{100 * main_ms / step:.2f}% / {100 * (main_ms + thread_ms) / step:.2f}% |")
    print(f"\nload before: {load_before}\nload after:  {load_after}")


if __name__ == "__main__":
    main()
