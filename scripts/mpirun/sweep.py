#!/usr/bin/python3
"""Run a grid of ringtrain trainings (batch sizes x ranks x processes per node x training mode
and all-reduce x checkpointing x repeats), one run directory each, then tabulate and plot them.

  sweep.sh --batch-sizes 32,64,128 --ranks 1,2 --epochs 3 --out sweeps/bs
  sweep.sh --ranks 1,2,4 --batch-sizes 256 --scaling strong --out sweeps/strong -- --lr 0.1
  sweep.sh --ranks 3 --modes sync,async,ssp2 --allreduce ring,ps --out sweeps/modes

A failed run is recorded (status, exit code, log) and the sweep goes on; re-running the same
command skips the runs that finished (summary.json present) and retries the rest.
scripts/mpirun/sweep.sh is this script; options take `--opt value` or `--opt=value`.
"""
import argparse
import datetime
import os
import re
import shlex
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Python puts this script's directory (scripts/mpirun) first on the module path: the grid
# is sweep_plan.py's, the launching and recording of each run sweep_run.py's.
from sweep_plan import PROG, command, plan
from sweep_run import Launch, run_one, write_json


EPILOG = """\
Each run lives in DIR/<name>/ (name from its parameters, e.g. b64-np2-ppn2-ring-ckptoff-r1;
an asynchronous run has its mode where a sync run has its all-reduce: b64-np3-ppn1-ssp2-...)
with the trainer's files plus launch.log (its output) and sweep-run.json (parameters,
status, exit code, wall time). At the end scripts/plot/sweep_report.py writes
DIR/results.csv, DIR/report.md and DIR/plots/. Exit status: 0 if every run succeeded,
1 if any failed, 2 for a usage error, 130 when interrupted (re-run to continue)."""


def posint(text):
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return int(text)


def comma_list(pattern, convert=str):
    """An argparse type: a non-empty comma list, every item matching pattern."""
    def parse(text):
        items = text.split(",")
        for item in items:
            if not re.fullmatch(pattern, item):
                raise argparse.ArgumentTypeError(f"'{item}' is not valid")
        return [convert(i) for i in items]
    return parse


def parser():
    p = argparse.ArgumentParser(prog=PROG, usage=f"{PROG} [options] [-- extra train flags]",
                                description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    posints = comma_list(r"[1-9][0-9]*", int)
    g = p.add_argument_group("grid (comma-separated lists; every combination runs)")
    g.add_argument("--batch-sizes", type=posints, default=[64], metavar="LIST",
                   help="batch sizes (default 64); per rank (weak) or global (strong)")
    g.add_argument("--ranks", type=posints, default=[1], metavar="LIST", help="rank counts (default 1)")
    g.add_argument("--ppn", type=posints, default=[None], metavar="LIST",
                   help="processes per node (default: all ranks on one node, or spread over the "
                        "hostfile); combinations that cannot be placed are skipped")
    g.add_argument("--allreduce", type=comma_list(r"ring|mpi|ps|rd"), default=["ring"],
                   metavar="LIST", help="ring, mpi, ps, rd (default ring): the all-reduce of sync runs")
    g.add_argument("--modes", type=comma_list(r"sync|async|ssp(0|[1-9][0-9]*)"), default=["sync"],
                   metavar="LIST",
                   help="sync, async, ssp<K> (default sync). sync: one run per --allreduce; "
                        "async: --mode async (no staleness bound); sspK: --mode async "
                        "--max-staleness K (ssp0 is synchronous through the servers). "
                        "Asynchronous runs need at least --servers + 1 ranks (others are "
                        "skipped) and ignore --allreduce")
    g.add_argument("--servers", type=posint, default=1, metavar="S",
                   help="parameter-server ranks of async/ssp runs (default 1)")
    g.add_argument("--checkpoint", type=comma_list(r"on|off"), default=["off"], metavar="LIST",
                   help="on, off (default off)")
    g.add_argument("--scaling", choices=("weak", "strong"), default="weak",
                   help="weak: per-rank batch = the batch size; strong: global batch = the batch "
                        "size, per-rank = batch / ranks (must divide) (default weak)")
    g.add_argument("--repeats", type=posint, default=1, metavar="R",
                   help="repeat every combination R times (default 1)")
    g.add_argument("--interleave", action="store_true",
                   help="run repeat 1 of every combination, then repeat 2, ...: timings compared "
                        "across combinations then share the background load")
    t = p.add_argument_group("training (everything after -- is appended to every `ringtrain train`)")
    t.add_argument("--model", default="lenet5", help="(default lenet5; any of `ringtrain models`)")
    t.add_argument("--dataset", default="fashion-mnist", help="(default fashion-mnist; folder and packed need --data-dir)")
    t.add_argument("--data-dir", metavar="DIR", help="the dataset's --data-dir (e.g. DIR/train/<class> of a folder)")
    t.add_argument("--epochs", type=posint, default=1, metavar="E", help="(default 1)")
    t.add_argument("--checkpoint-every", type=posint, default=1, metavar="N",
                   help="with --checkpoint on (default 1)")
    add_launch_options(p)
    o = p.add_argument_group("output")
    o.add_argument("--out", metavar="DIR", help="sweep directory (default sweeps/<date>-<time>)")
    o.add_argument("--dry-run", action="store_true", help="list the runs and their commands, run nothing")
    o.add_argument("--no-report", action="store_true", help="do not write results.csv / report.md at the end")
    o.add_argument("--run-reports", action="store_true",
                   help="also write each run's report.md and plots/ (run_report.py)")
    return p


def add_launch_options(p):
    g = p.add_argument_group("placement and launch (passed to run.sh)")
    g.add_argument("--hostfile", metavar="FILE")
    g.add_argument("--threads", type=posint, metavar="T")
    g.add_argument("--bin", metavar="PATH")
    g.add_argument("--mca", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    g.add_argument("--mpirun-arg", action="append", default=[], metavar="ARG")
    g.add_argument("--launcher", metavar='"CMD ARGS"',
                   help="launcher taking run.sh's options (default scripts/mpirun/run.sh), e.g. "
                        '"scripts/mpirun/cluster.sh run --nodes 3 --link-rate 1gbit"')
    g.add_argument("--timeout", type=posint, metavar="SEC",
                   help="stop a run after SEC seconds (SIGTERM, SIGKILL 10 s later) and record "
                        "it as timed out")


# Options whose value may start with '-' (--mpirun-arg --oversubscribe): argparse would take
# such a value for an option, so they are joined into --opt=value before parsing.
DASH_VALUES = ("--mpirun-arg", "--launcher", "--bin", "--out", "--hostfile", "--model", "--dataset", "--data-dir")


def parse_args(argv):
    """(options, extra train flags): everything after the first `--` goes to the trainer."""
    ours, extra = argv, []
    joined, i = [], 0
    while i < len(ours):
        tok = ours[i]
        if tok == "--":
            extra = ours[i + 1:]
            break
        if tok in DASH_VALUES and i + 1 < len(ours):
            joined.append(f"{tok}={ours[i + 1]}")
            i += 2
            continue
        joined.append(tok)
        i += 1
    p = parser()
    args = p.parse_args(joined)
    for flag, value in (("--model", args.model), ("--dataset", args.dataset),
                        ("--launcher", args.launcher), ("--out", args.out)):
        if value is not None and not value.strip():
            p.error(f"{flag} needs a value")
    if args.dataset in ("folder", "packed") and not args.data_dir:  # else every run would fail alike
        p.error(f"--dataset {args.dataset} needs --data-dir DIR")
    args.train_extra = extra
    args.launch_opts = launch_options(args)
    args.launcher_argv = shlex.split(args.launcher) if args.launcher else [os.path.join(HERE, "run.sh")]
    # A --hostfile or another --launcher (e.g. cluster.sh run) places ranks on nodes.
    args.multi_node = bool(args.hostfile or args.launcher)
    args.out = args.out or os.path.join("sweeps", datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    return p, args


def launch_options(args):
    opts = []
    if args.hostfile:
        opts += ["--hostfile", args.hostfile]
    if args.threads:
        opts += ["--threads", str(args.threads)]
    if args.bin:
        opts += ["--bin", args.bin]
    for name, value in args.mca:
        opts += ["--mca", name, value]
    for a in args.mpirun_arg:
        opts += ["--mpirun-arg", a]
    return opts

def dry_run(args, runs):
    print(f"{PROG}: {len(runs)} run(s) into {args.out} ({args.scaling} scaling)")
    for i, run in enumerate(runs, 1):
        run_dir = os.path.join(args.out, run["name"])
        done = os.path.isfile(os.path.join(run_dir, "summary.json"))
        print(f"[{i}/{len(runs)}] {run['name']}{' (done, would be skipped)' if done else ''}")
        print(f"    {shlex.join(command(args, run, run_dir))}")

def write_sweep_json(args, n_runs):
    # How the runs were launched (paths inside the repository shown relative to it), so a
    # report can say e.g. that they ran on an emulated cluster with 1 Gbit/s links.
    launch = " ".join(args.launcher_argv).replace(REPO + "/", "")
    write_json(os.path.join(args.out, "sweep.json"), {
        "scaling": args.scaling, "model": args.model, "dataset": args.dataset, "data_dir": args.data_dir or "",
        "epochs": args.epochs, "repeats": args.repeats, "modes": " ".join(args.modes),
        "servers": args.servers, "hostfile": args.hostfile or "",
        "train_extra": " ".join(args.train_extra), "launcher": launch,
        "launch_options": " ".join(args.launch_opts), "runs": n_runs})

def main(argv):
    p, args = parse_args(argv)
    runs = plan(p, args)
    if args.dry_run:
        dry_run(args, runs)
        return 0
    os.makedirs(args.out, exist_ok=True)
    write_sweep_json(args, len(runs))
    signal.signal(signal.SIGINT, Launch.on_signal)
    signal.signal(signal.SIGTERM, Launch.on_signal)
    failures = 0
    for i, run in enumerate(runs, 1):
        failures += not run_one(args, run, i, len(runs))
        if Launch.interrupted:
            print(f"{PROG}: interrupted; re-run the same command to continue", file=sys.stderr)
            break
    if not args.no_report:
        report = [sys.executable, os.path.join(REPO, "scripts", "plot", "sweep_report.py")]
        report += ["--run-reports"] if args.run_reports else []
        if subprocess.run(report + [args.out]).returncode != 0:
            print(f"{PROG}: warning: the report failed", file=sys.stderr)
    if Launch.interrupted:
        return 130
    if failures:
        print(f"{PROG}: {failures} of {len(runs)} run(s) did not succeed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
