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
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROG = os.environ.get("RINGTRAIN_SWEEP_PROG", "sweep.py")
# Seconds between the SIGTERM of --timeout and the SIGKILL (time for the checkpoint).
KILL_AFTER_S = 10
# The exit status of a run killed by --timeout (GNU timeout's).
TIMEOUT_RC = 124

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


def is_async(slot):
    return slot == "async" or slot.startswith("ssp")


def slots(args):
    """The "algo" slot of a run: a sync run's all-reduce, or an asynchronous run's mode
    (async, sspK), which has no all-reduce; in order, without repeats."""
    out = []
    for mode in args.modes:
        for s in (args.allreduce if mode == "sync" else [mode]):
            if s not in out:
                out.append(s)
    return out


def placement(args, np_, ppn):
    """(ppn given to the launcher or None, ppn in the run's name), or None (with a note)
    when this host alone cannot place np_ ranks at ppn per node."""
    if ppn is None:  # the launcher's default: every rank on this host unless multi-node
        return None, ("auto" if args.multi_node else np_)
    eff = min(ppn, np_)  # more slots per node than ranks: the same placement
    if not args.multi_node and eff < np_:
        print(f"{PROG}: note: skipping np={np_} ppn={ppn} (needs --hostfile or a cluster "
              f"--launcher with {-(-np_ // eff)} nodes)", file=sys.stderr)
        return None
    return eff, eff


def per_rank_batch(p, args, b, np_, slot):
    """(per-rank batch, name prefix); strong scaling refuses a remainder (exit 2)."""
    if args.scaling == "weak":
        return b, "b"
    # Asynchronous runs: the workers (not the servers) share the global batch.
    parts, what = (np_ - args.servers, "workers") if is_async(slot) else (np_, "ranks")
    if b % parts:
        p.error(f"strong scaling: global batch {b} is not divisible by {parts} {what}")
    return b // parts, "gb"


def plan(p, args):
    """Every valid combination as a dict, in a stable order (repeat-major with --interleave)."""
    runs, seen = [], set()
    for slot in slots(args):
        for ckpt in args.checkpoint:
            for np_ in args.ranks:
                if is_async(slot) and np_ <= args.servers:
                    print(f"{PROG}: note: skipping {slot} at np={np_} (needs more ranks than "
                          f"--servers {args.servers})", file=sys.stderr)
                    continue
                for ppn in args.ppn:
                    placed = placement(args, np_, ppn)
                    if placed is None:
                        continue
                    for b in args.batch_sizes:
                        per_rank, prefix = per_rank_batch(p, args, b, np_, slot)
                        for rep in range(1, args.repeats + 1):
                            name = f"{prefix}{b}-np{np_}-ppn{placed[1]}-{slot}-ckpt{ckpt}-r{rep}"
                            if name in seen:
                                continue
                            seen.add(name)
                            runs.append({"name": name, "b": b, "per_rank": per_rank, "np": np_,
                                         "ppn": placed[0], "slot": slot, "ckpt": ckpt, "rep": rep})
    if not runs:
        p.error("the grid is empty (see the notes above)")
    if args.interleave:
        runs.sort(key=lambda r: r["rep"])  # stable: grid order within a repeat
    return runs


def command(args, run, run_dir):
    """The launcher and train command of one run."""
    cmd = args.launcher_argv + ["-np", str(run["np"])]
    if run["ppn"] is not None:
        cmd += ["--ppn", str(run["ppn"])]
    cmd += args.launch_opts + ["--", "train", "--model", args.model, "--dataset", args.dataset,
                               "--epochs", str(args.epochs), "--batch-size", str(run["per_rank"]),
                               "--run-dir", run_dir] + (["--data-dir", args.data_dir] if args.data_dir else [])
    slot = run["slot"]
    if is_async(slot):
        cmd += ["--mode", "async", "--servers", str(args.servers)]
        if slot.startswith("ssp"):
            cmd += ["--max-staleness", slot[3:]]
    else:
        cmd += ["--allreduce", slot]
    if run["ckpt"] == "on":
        cmd += ["--checkpoint-every", str(args.checkpoint_every),
                "--checkpoint-dir", os.path.join(run_dir, "checkpoints")]
    return cmd + args.train_extra


def dry_run(args, runs):
    print(f"{PROG}: {len(runs)} run(s) into {args.out} ({args.scaling} scaling)")
    for i, run in enumerate(runs, 1):
        run_dir = os.path.join(args.out, run["name"])
        done = os.path.isfile(os.path.join(run_dir, "summary.json"))
        print(f"[{i}/{len(runs)}] {run['name']}{' (done, would be skipped)' if done else ''}")
        print(f"    {shlex.join(command(args, run, run_dir))}")


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


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


class Launch:
    """One child launcher in its own session; SIGINT/SIGTERM to the sweep are passed to it
    (run.sh turns them into a checkpoint-and-stop of every rank) and end the sweep after it."""

    interrupted = False
    current = None

    @classmethod
    def on_signal(cls, signum, _frame):
        cls.interrupted = True
        if cls.current is not None and cls.current.poll() is None:
            cls.current.send_signal(signum)

    @classmethod
    def run(cls, cmd, log_path, timeout):
        """(exit status, timed out) of cmd, its output in log_path. --timeout sends SIGTERM
        to the launcher's process group (as timeout(1) does), SIGKILL KILL_AFTER_S later."""
        with open(log_path, "w") as log:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                log.write(f"{PROG}: error: cannot start {cmd[0]}: {e}\n")
                return 127, False
        cls.current = proc
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_AFTER_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return TIMEOUT_RC, True
        finally:
            cls.current = None


def status_of(rc, run_dir, timed_out):
    if Launch.interrupted:
        return "interrupted"
    if timed_out:
        return "timeout"
    if rc != 0:
        return "failed"
    if not os.path.isfile(os.path.join(run_dir, "summary.json")):
        return "incomplete"  # exit 0 but no summary: the trainer did not finish its run
    return "ok"


def run_record(args, run, cmd, status, rc, wall, started):
    """sweep-run.json: the run's parameters and outcome (scripts/plot/sweepdata.py reads it)."""
    asynchronous = is_async(run["slot"])
    workers = run["np"] - args.servers if asynchronous else run["np"]  # one round
    ppn = run["ppn"]
    if ppn is None and not args.multi_node:
        ppn = run["np"]  # every rank on this host
    return {"name": run["name"], "model": args.model, "dataset": args.dataset,
            "batch_size": run["b"], "scaling": args.scaling, "per_rank_batch": run["per_rank"],
            "global_batch": run["per_rank"] * workers, "np": run["np"], "ppn": ppn,
            "allreduce": None if asynchronous else run["slot"], "checkpoint": run["ckpt"],
            "mode": "async" if asynchronous else "sync",
            "servers": args.servers if asynchronous else None,
            "max_staleness": (int(run["slot"][3:]) if run["slot"].startswith("ssp") else -1)
            if asynchronous else None,
            "repeat": run["rep"], "status": status, "exit_code": rc,
            "launcher_wall_s": round(wall, 3), "started": started, "log": "launch.log",
            "command": shlex.join(cmd)}


def log_excerpt(log_path):
    """The last error lines of a failed run's log, else its last lines."""
    try:
        with open(log_path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    errors = [ln for ln in lines if re.search(r"error|exception", ln, re.I)]
    return errors[-3:] if errors else lines[-5:]


def set_aside(out, run_dir, name):
    """An earlier failed attempt goes to DIR/.attempts for the post-mortem."""
    attempts = os.path.join(out, ".attempts")
    os.makedirs(attempts, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    os.rename(run_dir, os.path.join(attempts, f"{name}.{stamp}.{os.getpid()}"))


def run_one(args, run, i, total):
    """Runs one combination unless done; True unless it did not succeed."""
    name = run["name"]
    run_dir = os.path.join(args.out, name)
    if os.path.isfile(os.path.join(run_dir, "summary.json")):
        print(f"[{i}/{total}] {name}: done, skipped", flush=True)
        return True
    if os.path.exists(run_dir):
        set_aside(args.out, run_dir, name)
    os.makedirs(run_dir)
    cmd = command(args, run, run_dir)
    print(f"[{i}/{total}] {name}: running", flush=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.monotonic()
    log_path = os.path.join(run_dir, "launch.log")
    rc, timed_out = Launch.run(cmd, log_path, args.timeout)
    wall = time.monotonic() - t0
    status = status_of(rc, run_dir, timed_out)
    write_json(os.path.join(run_dir, "sweep-run.json"),
               run_record(args, run, cmd, status, rc, wall, started))
    if status == "ok":
        print(f"[{i}/{total}] {name}: ok ({wall:.3f} s)", flush=True)
        return True
    print(f"[{i}/{total}] {name}: {status} (exit {rc}, {wall:.3f} s); log: {log_path}",
          file=sys.stderr)
    for ln in log_excerpt(log_path):
        print(f"    {ln}", file=sys.stderr)
    return False


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
