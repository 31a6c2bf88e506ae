"""One run of a sweep (scripts/mpirun/sweep.py): launching it under --timeout, passing a stop
on to it, and recording its outcome in sweep-run.json. Split from sweep.py, which parses the
options and plans the grid (sweep_plan.py).
"""
import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

# Python puts this script's directory (scripts/mpirun) first on the module path.
from sweep_plan import PROG, command, is_async

# Seconds between the SIGTERM of --timeout and the SIGKILL (time for the checkpoint).
KILL_AFTER_S = 10
# The exit status of a run killed by --timeout (GNU timeout's).
TIMEOUT_RC = 124


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


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
