#!/usr/bin/env python3
"""The exact sum of --logical-shards against fp32 buckets: step time, all-reduce, bytes, ratio.

What it measures. Per model, three runs of the same global batch np x B (issue 23's "the exact
reduction's overhead"):
  fp32   `--batch-size B`: fp32 gradient buckets through the default --allreduce;
  S=np   `--logical-shards np --batch-size B`: the exact int64 sum, one shard per rank (the
         same samples per forward as fp32, so the difference is the reduction);
  S=4np  `--logical-shards 4np --batch-size B/4`: the exact sum with four shards per rank
         (the reduction plus the cost of four smaller forward/backward passes).
Rounds are interleaved (every model's three runs per round; the order of the three reverses
from one round to the next), and each run's directory is read through scripts/plot/rundata.py
(summary.json for the run's settings and completeness, rank-<r>.jsonl's step records, logged
every step, for the timings). Per run, over the steps after --warmup:
  step ms      rank 0's wall clock per step (t of its last step record - t of the record
               at the end of the warm-up, over the steps between): everything a step does;
  all-reduce   per step, mean over ranks of the step records' allreduce_s: the loss/stop
               agreement and the gradient sum; for the exact runs also the copy of each shard's
               gradient with its max |g|, the max all-reduce, the conversion to int64 and back,
               the int64 all-reduce and the batch-norm slots;
  in MPI       of it, wait_s: for fp32 the ring's blocked waits; for the exact runs the
               seconds inside the sum's MPI_Allreduce calls (MPI reduces inside them, as with
               --allreduce mpi);
  conversion   of it, convert_s (exact runs only): the exact sum's own work, i.e. keeping
               each shard's gradient and max |g|, the conversion to int64 and back, the
               batch-norm slots' average;
  rest         all-reduce - in MPI - conversion: the agreement, where the rank that finished
               its compute first waits for the other (load imbalance, large on a busy host),
               and for fp32 the ring's own float additions and copies;
  MB sent      rank 0's bytes_sent over the timed steps, per step, in 10^6 bytes;
  ratio        step ms / fp32's step ms of the same round; the median of those per-round
               ratios is the figure to quote (the two runs of a round share the machine's load).
Cells are medians over rounds with each round's value in brackets. `uptime` before and after.

Conditions. mpirun -np NP on this host (--bind-to none, --threads T and OMP_NUM_THREADS=T,
synthetic data (1x28x28; 3x32x32 for vgg11), no evaluation, no TensorBoard), or with --cluster N across N emulated
nodes from scripts/mpirun/cluster.sh (root: network namespaces, links shaped to --link-rate at
--mtu, one rank per node, mpirun over TCP on the emulated subnet; RINGTRAIN_CLUSTER_ID picks the
cluster; one this script brings up it takes down at exit, also on an error, Ctrl-C or SIGTERM;
one already up is used as it is). --overlap is left at its default (auto): the fp32 runs overlap
the bucket all-reduces with backward where auto turns it on (across nodes; on one host only if
each rank has a core to spare), while the exact runs never overlap (the trainer turns it off:
a bucket's scale needs the max over every local shard; the run notes it). So across nodes the
fp32 baseline hides part of its all-reduce behind backward and the exact sum hides none of its.

  scripts/bench/exact_overhead.py                                   # lenet5, mlp, vgg11; np 2; 3 rounds
  scripts/bench/exact_overhead.py --models mlp --rounds 1 --steps mlp=10 --warmup 2   # a smoke run
  RINGTRAIN_CLUSTER_ID=7 scripts/bench/exact_overhead.py --cluster 2 --link-rate 1gbit
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "plot"))
sys.path.insert(0, HERE)
import rundata  # noqa: E402  (the one reader of ringtrain run directories)
import cluster_bench  # noqa: E402  (cluster.sh up/status/down, as train_throughput.sh --cluster does)

CLUSTER = os.path.join(ROOT, "scripts", "mpirun", "cluster.sh")
# Timed steps per model by default: a round (3 runs of each model) of about 1-2 minutes on one
# host (vgg11 at batch 32 is ~0.3 s per step and rank in fp32).
DEFAULT_STEPS = {"lenet5": 60, "mlp": 60, "vgg11": 25}
# Synthetic input per model: 1x28x28 (Fashion-MNIST's, as docs/logical-shards.md's first
# measurement and snapshot_overhead.py: mlp has 1.53 M parameters there) where the model
# takes it; vgg11's five poolings need 32x32.
SHAPES = {"vgg11": "3x32x32", "alexnet": "3x32x32", "svhn-cnn": "3x32x32"}
SHARDS_PER_RANK = 4


class Stop(Exception):
    """SIGTERM or SIGHUP: unwind through the finally blocks (tear-down, clean-up)."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[1:]))
    p.add_argument("--models", default="lenet5,mlp,vgg11")
    p.add_argument("--np", type=int, default=2, help="ranks (one host); ignored with --cluster (one rank per node)")
    p.add_argument("--batch-size", type=int, default=32,
                   help=f"B: per rank for fp32 and S=np; B/{SHARDS_PER_RANK} per shard for S={SHARDS_PER_RANK}np")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", default="",
                   help="timed steps per run, one number for all models or model=N,... "
                        f"(default {','.join(f'{k}={v}' for k, v in DEFAULT_STEPS.items())}, 60 otherwise)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bin", default=os.environ.get("RINGTRAIN_BIN", os.path.join(ROOT, "build", "apps", "ringtrain")))
    p.add_argument("--mpirun-args", default="--bind-to none --oversubscribe", help="one host only")
    p.add_argument("--cluster", type=int, default=0, metavar="NODES",
                   help="across NODES emulated nodes (cluster.sh, root, RINGTRAIN_CLUSTER_ID), one rank each")
    p.add_argument("--link-rate", default="1gbit", help="--cluster: link rate (tc)")
    p.add_argument("--mtu", type=int, default=1500, help="--cluster: link MTU")
    p.add_argument("--keep-runs", default="", metavar="DIR", help="keep the run directories under DIR")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    args = p.parse_args(argv)
    if args.cluster == 1 or args.cluster < 0:
        p.error("--cluster needs at least 2 nodes")
    if args.cluster:
        args.np = args.cluster
    if args.np < 2:
        p.error("--np must be at least 2 (the exact sum's cost is its all-reduce)")
    if args.batch_size < SHARDS_PER_RANK or args.batch_size % SHARDS_PER_RANK:
        p.error(f"--batch-size {args.batch_size} is not divisible by {SHARDS_PER_RANK} (the S={SHARDS_PER_RANK}np "
                "runs keep the global batch)")
    if args.rounds < 1 or args.warmup < 1:
        p.error("--rounds and --warmup must be at least 1")
    args.models = [m for m in args.models.split(",") if m]
    try:
        args.steps = steps_per_model(args.steps, args.models)
    except ValueError as e:
        p.error(str(e))
    return args


def steps_per_model(text, models):
    """--steps: '' (defaults), 'N' (every model) or 'model=N,...' (defaults for the rest)."""
    steps = {m: DEFAULT_STEPS.get(m, 60) for m in models}
    if not text:
        return steps
    if "=" not in text:
        return {m: positive(text, "--steps") for m in models}
    for item in text.split(","):
        name, _, n = item.partition("=")
        if name not in steps:
            raise ValueError(f"--steps names '{name}', which is not in --models")
        steps[name] = positive(n, f"--steps {name}")
    return steps


def positive(text, what):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise ValueError(f"{what}: expected a positive integer (got '{text}')")
    return v


def cases(np_, batch):
    """(label, extra flags) of the three runs of a model: the same global batch np x B."""
    many = SHARDS_PER_RANK * np_
    return [("fp32", ["--batch-size", str(batch)]),
            (f"S={np_}", ["--logical-shards", str(np_), "--batch-size", str(batch)]),
            (f"S={many}", ["--logical-shards", str(many), "--batch-size", str(batch // SHARDS_PER_RANK)])]


def train_argv(args, model, steps, extra, run_dir):
    return ([args.bin, "train", "--model", model, "--dataset", "synthetic", "--synthetic-shape", shape_of(model),
             "--synthetic-train", "16384", "--synthetic-test", "64", "--threads", str(args.threads),
             "--max-steps", str(args.warmup + steps), "--eval-every", "0", "--log-every", "1",
             "--no-tensorboard", "--quiet", "--run-dir", run_dir] + extra)


def shape_of(model):
    return SHAPES.get(model, "1x28x28")


def launch_argv(args, argv):
    if args.cluster:
        return [CLUSTER, "run", "--np", str(args.np), "--"] + argv
    return (["mpirun", "-np", str(args.np)] + args.mpirun_args.split() +
            ["-x", f"OMP_NUM_THREADS={args.threads}"] + argv)


def run_command(cmd, timeout, threads):
    """(exit status, stderr) of cmd; on any exception (Ctrl-C, Stop, the timeout) the child is
    ended first (its own process group: mpirun and what it started), so nothing is left behind."""
    # OMP_NUM_THREADS: cluster.sh run passes it on to every node's ranks.
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_NUM_THREADS": str(threads)}
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        _, err = child.communicate(timeout=timeout)
        return child.returncode, err
    except subprocess.TimeoutExpired:
        end_group(child)
        return 124, f"timed out after {timeout:.0f} s"
    except BaseException:
        end_group(child)
        raise


def end_group(child):
    """SIGTERM to the child's process group (mpirun passes it on to its ranks), SIGKILL after 10 s."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass


def measure(run_dir, warmup):
    """One run's figures (module docstring) from its directory, or None if it has too few steps."""
    run = rundata.Run(run_dir)
    if not run.summary_file:
        return None
    out = {"shards": run.summary_file.get("logical_shards", 0), "allreduce_ms": [], "mpi_ms": [],
           "convert_ms": []}
    for r in run.ranks:
        steps = sorted((s for s in run.of_type(r, "step") if "step" in s), key=lambda s: s["step"])
        timed = [s for s in steps if s["step"] > warmup]
        start = [s for s in steps if s["step"] == warmup]
        if not timed or not start:
            return None
        n = timed[-1]["step"] - warmup
        out["allreduce_ms"].append(1e3 * sum(rundata.num(s.get("allreduce_s")) or 0.0 for s in timed) / n)
        out["mpi_ms"].append(1e3 * sum(rundata.num(s.get("wait_s")) or 0.0 for s in timed) / n)
        out["convert_ms"].append(1e3 * sum(rundata.num(s.get("convert_s")) or 0.0 for s in timed) / n)
        if r == 0:
            out["step_ms"] = 1e3 * (timed[-1]["t"] - start[0]["t"]) / n
            out["mb_sent"] = (timed[-1]["bytes_sent"] - start[0]["bytes_sent"]) / n / 1e6
    for key in ("allreduce_ms", "mpi_ms", "convert_ms"):
        out[key] = statistics.mean(out[key])
    out["rest_ms"] = out["allreduce_ms"] - out["mpi_ms"] - out["convert_ms"]
    return out


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def cell(values, digits=1):
    return f"{statistics.median(values):.{digits}f} ({', '.join(f'{v:.{digits}f}' for v in values)})"


def report(results, models, labels, meta):
    """The markdown table: results[(model, label)] is the list of rounds' measure() dicts."""
    lines = [meta, "",
             "| model | run | step ms | ratio to fp32 | all-reduce ms | in MPI ms | conversion ms | rest ms "
             "| MB sent / step / rank |", "|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        base = results[(m, labels[0])]
        for label in labels:
            rounds = results[(m, label)]
            ratios = [x["step_ms"] / b["step_ms"] for x, b in zip(rounds, base)]
            ratio = "1" if label == labels[0] else cell(ratios, 3)
            lines.append(f"| {m} | {label} | {cell([x['step_ms'] for x in rounds])} | {ratio} | "
                         f"{cell([x['allreduce_ms'] for x in rounds])} | {cell([x['mpi_ms'] for x in rounds])} | "
                         f"{cell([x['convert_ms'] for x in rounds]) if label != labels[0] else ''} | "
                         f"{cell([x['rest_ms'] for x in rounds])} | "
                         f"{statistics.median(x['mb_sent'] for x in rounds):.3f} |")
    return "\n".join(lines)


def on_signal(signum, _frame):
    raise Stop(f"signal {signum}")


def main(argv=None):
    args = parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    labels = [c[0] for c in cases(args.np, args.batch_size)]
    results = {(m, label): [] for m in args.models for label in labels}
    work = args.keep_runs or tempfile.mkdtemp(prefix="ringtrain-exactcost-")
    os.makedirs(work, exist_ok=True)
    started = False
    load_before = uptime()
    try:
        if args.cluster:
            cluster_bench.rate_bps(args.link_rate)
            started = cluster_bench.cluster_up(args.cluster, args.link_rate, args.mtu, log)
        for rnd in range(args.rounds):
            for m in args.models:
                order = cases(args.np, args.batch_size)
                for label, extra in (order if rnd % 2 == 0 else order[::-1]):
                    run_dir = os.path.join(work, f"{m}-{label.replace('=', '')}-r{rnd + 1}")
                    cmd = launch_argv(args, train_argv(args, m, args.steps[m], extra, run_dir))
                    rc, err = run_command(cmd, args.timeout, args.threads)
                    got = measure(run_dir, args.warmup) if rc == 0 else None
                    if got is None:
                        sys.exit(f"exact_overhead.py: {' '.join(cmd)} failed (exit {rc}):\n{err[-2000:]}")
                    results[(m, label)].append(got)
                    log(f"round {rnd + 1} {m} {label}: {got['step_ms']:.1f} ms/step, all-reduce "
                        f"{got['allreduce_ms']:.1f} ms ({got['mpi_ms']:.1f} in MPI, {got['convert_ms']:.1f} "
                        f"conversion), {got['mb_sent']:.3f} MB sent")
    except (KeyboardInterrupt, Stop) as e:
        sys.exit(f"exact_overhead.py: stopped ({e or 'Ctrl-C'})")
    finally:
        if started:
            cluster_bench.cluster_down()
        if not args.keep_runs:
            shutil.rmtree(work, ignore_errors=True)
    where = (f"{args.cluster} emulated nodes (cluster {os.environ.get('RINGTRAIN_CLUSTER_ID', '0') or '0'}), one "
             f"rank each, {args.link_rate} links, MTU {args.mtu}" if args.cluster else f"np {args.np} on one host")
    meta = (f"{where}; --threads {args.threads}; synthetic "
            f"{', '.join(f'{m} {shape_of(m)}' for m in args.models)}; global batch {args.np * args.batch_size} (fp32 and S={args.np}: "
            f"--batch-size {args.batch_size}; S={SHARDS_PER_RANK * args.np}: --batch-size "
            f"{args.batch_size // SHARDS_PER_RANK}); --overlap default (auto; never on for the exact runs); "
            f"timed steps {', '.join(f'{m} {n}' for m, n in args.steps.items())} after {args.warmup}; "
            f"{args.rounds} interleaved rounds, medians (each round's value)\n\n"
            f"load before: {load_before}\nload after:  {uptime()}")
    print(report(results, args.models, labels, meta))


if __name__ == "__main__":
    main()
