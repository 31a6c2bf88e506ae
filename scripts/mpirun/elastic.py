#!/usr/bin/python3
"""Elastic launches for `run.sh --elastic` (run.sh checks the options and execs this).

Runs run.sh (without --elastic) on the hosts that answer, and when mpirun ends because a
rank failed, asks every host of the user's hostfile whether it still answers (through the
remote agent mpirun uses), writes the answering ones into <run-dir>/elastic-hostfile and
relaunches with `--resume auto` and the same --run-dir at the largest rank count p that
divides --logical-shards S, fits the answering hosts' slots and lies in [--min-np, --max-np].
Each change goes to <run-dir>/membership.jsonl; the final summary.json gets a `membership`
section. docs/run-directory.md describes both files; `run.sh --help` the options.

Not relaunched: success (0), a usage error (2: it would fail the same way), a stop asked of
this launcher (SIGTERM/SIGINT: passed on, the run checkpoints and exits 75), a launch that
failed before its first step while the same hosts answer, fewer than --min-np ranks left,
and more than --max-restarts relaunches.

usage (from run.sh): elastic.py --run-sh PATH --hostfile FILE --min-np A [--max-np B]
    [--ppn P] [--agent CMD] [--probe-timeout S] [--max-restarts R]
    [--launcher-args N ARG...] -- <ringtrain train arguments>
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

# Python puts this script's directory (scripts/mpirun) first on the module path: the hosts
# and options are elastic_hosts.py's, each launch's records elastic_launch.py's.
from elastic_hosts import EXIT_USAGE, answering, choose_np, read_hostfile, say, train_option, usage_error
from elastic_launch import Launch, forward_stderr, rounded, utc

ELASTIC_SIGKILL_TIMEOUT = 2
EXIT_STOPPED = 75  # ringtrain's "stopped by a signal, resume me" (src/run/StopSignals.h)


class Elastic:
    def __init__(self, a, train_args):
        self.a = a
        self.train_args = train_args
        self.run_dir = train_option(train_args, "--run-dir")
        self.shards = int(train_option(train_args, "--logical-shards") or 0)
        self.all_hosts = read_hostfile(a.hostfile)
        self.slots = dict(self.all_hosts)
        self.work_hostfile = os.path.join(self.run_dir, "elastic-hostfile")
        self.membership = os.path.join(self.run_dir, "membership.jsonl")
        self.rank0_log = os.path.join(self.run_dir, "rank-0.jsonl")
        self.child = None
        self.stop_signal = None
        self.launches = []
        self.pending = None  # a restart record waiting for its launch's first step
        self.changes = []

    # ---- placement
    def per_host(self, hosts):
        return self.a.ppn if self.a.ppn else min(self.slots[h] for h in hosts)

    def placement(self, hosts):
        """(p, ranks per host, hosts used) on the answering `hosts`, or (None, r, []) when no
        rank count in [min-np, max-np] fits (and divides S)."""
        if not hosts:
            return None, 0, []
        r = self.per_host(hosts)
        p = choose_np(len(hosts) * r, self.shards, self.a.min_np, self.a.max_np)
        if p is None:
            return None, r, []
        return p, r, hosts[:(p + r - 1) // r]

    def write_hostfile(self, hosts, r):
        tmp = self.work_hostfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("# written by run.sh --elastic: the answering hosts of " + self.a.hostfile + "\n")
            for h in hosts:
                f.write(f"{h} slots={r}\n")
        os.replace(tmp, self.work_hostfile)

    # ---- the membership log
    def log_line(self, record):
        with open(self.membership, "a") as f:
            f.write(json.dumps(record) + "\n")

    def finish_pending(self, launch):
        """The restart record of `launch` once its first step is known (or it ended without one)."""
        rec = self.pending
        if rec is None:
            return
        first = launch.first_step()
        if first is None and launch.status is None:
            return
        if first is not None:
            resumed = int(first["step"]) - 1
            rec["resumed_from_step"] = resumed
            # The failed launch got at least as far as the state it left to resume from.
            rec["failed_step"] = max(rec["failed_step"] or 0, resumed)
            rec["steps_replayed"] = rec["failed_step"] - resumed
            rec["first_step_at"] = rounded(first["unix_s"])
            rec["first_step_utc"] = utc(first["unix_s"])
            since = rec["failed_at"] if rec["failed_at"] is not None else rec["detected_at"]
            rec["seconds_lost"] = rounded(first["unix_s"] - since, 2)
        self.log_line(rec)
        self.changes.append(rec)
        self.pending = None
        if first is not None:
            say(f"restart {rec['restart']}: first step {first['step']} at np {rec['np_after']}, "
                f"{rec['steps_replayed']} step(s) replayed, {rec['seconds_lost']} s lost since the failure")

    # ---- running
    def on_signal(self, signum, _frame):
        self.stop_signal = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)  # run.sh passes it to the ranks (SIGUSR2)

    def command(self, launch, r):
        cmd = [self.a.run_sh, "-np", str(launch.np), "--hostfile", self.work_hostfile, "--ppn", str(r)]
        cmd += self.sigkill_timeout() + self.a.launcher_args + ["--"] + self.train_args
        if launch.number > 1:
            cmd += ["--resume", "auto"]  # the last --resume counts (CLI11 TakeLast)
        return cmd

    def sigkill_timeout(self):
        """When a rank dies, Open MPI signals the others SIGTERM odls_base_sigkill_timeout
        seconds later and SIGKILL as long again: run.sh's 10 s (time for a checkpoint on a stop
        passed to mpirun) make a failed launch end ~20 s after the failure, 2 s in ~4 s. A stop
        asked of this launcher reaches the ranks directly (SIGUSR2), untouched by it. Unless the
        caller chose a value."""
        given = any(a == "odls_base_sigkill_timeout" for a in self.a.launcher_args)
        if given or os.environ.get("OMPI_MCA_odls_base_sigkill_timeout"):
            return []
        return ["--mca", "odls_base_sigkill_timeout", str(ELASTIC_SIGKILL_TIMEOUT)]

    def run_launch(self, launch, r):
        self.write_hostfile(launch.hosts, r)
        say(f"launch {launch.number}: np {launch.np} on {', '.join(launch.hosts)}")
        # Its own process group: a Ctrl-C in the terminal reaches only this launcher, which
        # passes it on as run.sh's stop (SIGUSR2 to the ranks), not also mpirun, whose own
        # handling would kill the ranks odls_base_sigkill_timeout (2 s) into their checkpoint.
        # No stdin: mpirun would read the terminal from a background group and be stopped.
        # stderr passes through a thread that reads the stall watchdog's names from it (every
        # rank's stderr reaches this launcher through mpirun, whichever node the rank is on).
        self.child = subprocess.Popen(self.command(launch, r), process_group=0, stdin=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        reader = threading.Thread(target=forward_stderr, args=(self.child.stderr, launch), daemon=True)
        reader.start()
        while True:
            try:
                launch.status = self.child.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                self.finish_pending(launch)
        reader.join(timeout=5)
        launch.ended = time.time()
        self.child = None
        self.finish_pending(launch)
        return launch.status

    def restart_record(self, failed, hosts, p):
        step, failed_at = failed.last_step()
        prev = set(failed.hosts)
        return {"type": "restart", "restart": len(self.launches), "detected_at": rounded(failed.ended),
                "detected_utc": utc(failed.ended), "exit_status": failed.status,
                "hosts_out": [h for h in failed.hosts if h not in hosts],
                "hosts_in": [h for h in hosts if h not in prev], "hosts": hosts,
                "np_before": failed.np, "np_after": p, "failed_step": step,
                "failed_at": rounded(failed_at), "failed_utc": utc(failed_at),
                "stalled": [{"rank": x["rank"], "host": x["host"]} for x in failed.stalled],
                "resumed_from_step": None, "steps_replayed": None, "first_step_at": None,
                "first_step_utc": None, "seconds_lost": None}

    def next_launch(self, failed):
        """The launch after `failed`, or an exit status when there is none."""
        a = self.a
        if self.stop_signal is not None:
            return EXIT_STOPPED if failed.status in (0, None) else failed.status
        if failed.status == EXIT_USAGE:
            say("exit status 2 (a usage error): not relaunching; it would fail the same way")
            return EXIT_USAGE
        if len(self.launches) - 1 >= a.max_restarts:
            say(f"{a.max_restarts} restart(s) done (--max-restarts): not relaunching")
            return failed.status
        stall = ""
        if failed.stalled:
            stall = " after a stall timeout; stalled rank(s): " + ", ".join(
                f"rank {x['rank']} on {x['host']} [{x['detail']}]" for x in failed.stalled)
        say(f"launch {failed.number} ended with exit status {failed.status}{stall}: asking the hosts which answer")
        hosts = answering([h for h, _ in self.all_hosts], a.agent, a.probe_timeout)
        if self.stop_signal is not None:
            return EXIT_STOPPED
        gone = [h for h, _ in self.all_hosts if h not in hosts]
        say(f"answering: {', '.join(hosts) or 'none'}" + (f"; not answering: {', '.join(gone)}" if gone else ""))
        p, r, used = self.placement(hosts)
        if p is None:
            need = f" that divides --logical-shards {self.shards}" if self.shards else ""
            say(f"error: {len(hosts)} answering host(s) have room for {len(hosts) * r if hosts else 0} rank(s), "
                f"and no rank count from --min-np {a.min_np} to --max-np {a.max_np}{need} fits: not relaunching")
            return failed.status
        if failed.first_step() is None and used == failed.hosts and p == failed.np:
            say(f"launch {failed.number} failed before its first step and the same hosts answer: "
                "not relaunching (it would fail the same way)")
            return failed.status
        launch = Launch(len(self.launches) + 1, used, p, self.rank0_log)
        self.pending = self.restart_record(failed, used, p)
        return launch, r

    def run(self):
        p, r, used = self.placement([h for h, _ in self.all_hosts])
        if p is None:
            usage_error(f"no rank count from --min-np {self.a.min_np} to --max-np {self.a.max_np} fits "
                        f"'{self.a.hostfile}'" + (f" and divides --logical-shards {self.shards}" if self.shards else ""))
        if "--dry-run" in self.a.launcher_args:
            # Nothing written: the first launch's line, with the user's hostfile in place of
            # <run-dir>/elastic-hostfile (which would list the same hosts).
            say(f"dry run: launch 1 would be np {p} on {', '.join(used)} ({self.work_hostfile})")
            launch = Launch(1, used, p, self.rank0_log)
            cmd = self.command(launch, r)
            cmd[cmd.index(self.work_hostfile)] = self.a.hostfile
            return subprocess.call(cmd)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.on_signal)
        os.makedirs(self.run_dir, exist_ok=True)
        if not self.shards:
            say("note: no --logical-shards: each launch takes the largest rank count that fits, and the "
                "results then depend on it (docs/logical-shards.md)")
        launch = Launch(1, used, p, self.rank0_log)
        self.log_line({"type": "start", "time": rounded(launch.started), "utc": utc(launch.started),
                       "hosts": used, "np": p, "min_np": self.a.min_np, "max_np": self.a.max_np,
                       "logical_shards": self.shards or None, "hostfile": os.path.abspath(self.a.hostfile)})
        while True:
            self.launches.append(launch)
            status = self.run_launch(launch, r)
            if status == 0:
                break
            nxt = self.next_launch(launch)
            if isinstance(nxt, int):
                return self.end(nxt)
            launch, r = nxt
        return self.end(0)

    def end(self, status):
        last = self.launches[-1]
        self.log_line({"type": "end", "time": rounded(time.time()), "utc": utc(time.time()),
                       "exit_status": status, "launches": len(self.launches), "np": last.np, "hosts": last.hosts})
        self.add_to_summary(last)
        if status == 0 and len(self.launches) > 1:
            say(f"finished after {len(self.launches) - 1} restart(s), at np {last.np} on {', '.join(last.hosts)}")
        return status

    def add_to_summary(self, last):
        """summary.json of the final launch (written by rank 0 at its end) gets `membership`."""
        path = os.path.join(self.run_dir, "summary.json")
        try:
            if os.path.getmtime(path) < last.started:
                return  # an earlier run's: the final launch wrote none
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError):
            return
        first = self.launches[0]
        summary["membership"] = {
            "launches": len(self.launches), "restarts": len(self.launches) - 1,
            "np_initial": first.np, "np_final": last.np, "hosts_initial": first.hosts, "hosts_final": last.hosts,
            "steps_replayed": sum(c["steps_replayed"] or 0 for c in self.changes),
            "seconds_lost": rounded(sum(c["seconds_lost"] or 0.0 for c in self.changes), 2),
            "changes": self.changes, "log": "membership.jsonl"}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)


def parse(argv):
    # Ours, then `--launcher-args N` and N options for run.sh, then `--` and ringtrain's.
    if "--launcher-args" in argv:
        i = argv.index("--launcher-args")
        n = int(argv[i + 1])
        ours, launcher_args, rest = argv[:i], argv[i + 2:i + 2 + n], argv[i + 2 + n:]
    else:
        cut = argv.index("--") if "--" in argv else len(argv)
        ours, launcher_args, rest = argv[:cut], [], argv[cut:]
    if not rest or rest[0] != "--":
        usage_error("no ringtrain arguments after --")
    train_args = rest[1:]
    p = argparse.ArgumentParser(prog="elastic.py", add_help=False)
    p.add_argument("--run-sh", required=True)
    p.add_argument("--hostfile", required=True)
    p.add_argument("--min-np", type=int, default=1)
    p.add_argument("--max-np", type=int, default=0)
    p.add_argument("--ppn", type=int, default=0)
    p.add_argument("--agent", default="")
    p.add_argument("--probe-timeout", type=float, default=5.0)
    p.add_argument("--max-restarts", type=int, default=10)
    a = p.parse_args(ours)
    a.launcher_args = launcher_args
    if not train_args or train_args[0] != "train":
        usage_error("--elastic runs `train` (the ringtrain arguments must start with it)")
    if not train_option(train_args, "--run-dir"):
        usage_error("--elastic needs train's --run-dir: every launch resumes in the same run directory")
    if train_option(train_args, "--mode") not in (None, "sync"):
        # Its servers (rank 0 among them) take no steps: no first-step event to resume by.
        usage_error("--elastic relaunches synchronous training only (not --mode async)")
    shards = train_option(train_args, "--logical-shards") or "0"
    if not shards.isdigit():
        usage_error(f"--logical-shards wants a non-negative integer, got '{shards}'")
    hosts = read_hostfile(a.hostfile)
    if not hosts:
        usage_error(f"hostfile '{a.hostfile}' names no host")
    if a.max_np == 0:
        a.max_np = sum(n for _, n in hosts) if not a.ppn else a.ppn * len(hosts)
    if a.min_np > a.max_np:
        usage_error(f"--min-np {a.min_np} is above --max-np {a.max_np}")
    return a, train_args


def main(argv):
    a, train_args = parse(argv)
    return Elastic(a, train_args).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
