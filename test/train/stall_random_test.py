#!/usr/bin/python3
"""SIGSTOP one rank of an np N lenet5 job at random moments (steps, metric sums, evaluation,
checkpoints): every stall message of the ranks that waited must name exactly the stopped rank
and its host, and no message may name a rank that was not stopped.

With --checkpoint-write the last stop lands inside rank 0's write of a checkpoint file, where
the test hook RINGTRAIN_TEST_CHECKPOINT_HOLD_MS (Checkpoint.h) holds it: the others' timeout
must name rank 0 as last seen writing that checkpoint.

Each launch stops one rank several times: with --stall-warning 1 the others warn, naming it,
without ending the job; the rank is then resumed (SIGCONT) and stopped again later; the last
stop runs into --stall-timeout and ends the job with errors naming it. Ranks are found as the
children of the mpirun this test started (never by a pattern over the machine's processes).

usage: stall_random_test.py BINARY [--np N] [--launches L] [--stops S] [--seed X] [--channel auto]
    [--async] [--bench]   (train --mode async; BINARY is allreduce_bench) [--checkpoint-write]
"""
import argparse
import glob
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NAMED = re.compile(r"rank (\d+) on (\S+) \[")
WHERE = re.compile(r"at step \d+ \(([a-z ]+)\).*? in ([a-z0-9 ()-]+?) \(")
LAST_SEEN = re.compile(r"last seen: (?:step \d+, )?([a-z ]+?)[,\]]")
HOLD_S = 6.0  # --checkpoint-write: how long the hook holds each checkpoint write (< --stall-timeout)
STALL = re.compile(r"^(?:ringtrain|allreduce_bench): \[rank (\d+)\] (warning|error): (?:stall timeout: )?.*?stalled rank\(s\): (.*)$")


def rank_of(pid, binary):
    """The MPI rank of process `pid` if it runs `binary`, else None (also once it has ended)."""
    try:
        if os.path.realpath(f"/proc/{pid}/exe") != os.path.realpath(binary):
            return None
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return None
    for e in env:
        if e.startswith(b"OMPI_COMM_WORLD_RANK="):
            return int(e.split(b"=", 1)[1])
    return None


def rank_pids(launcher, binary):
    """{rank: pid} of the children of `launcher` running `binary`."""
    try:
        children = open(f"/proc/{launcher}/task/{launcher}/children").read().split()
    except OSError:
        return {}
    return {r: int(c) for c in children if (r := rank_of(c, binary)) is not None}


def cluster_rank_pids(cluster_id, nodes, binary):
    """{rank: (pid, node)} of the ranks in an emulated cluster's namespaces (cluster.sh):
    the processes of our own namespaces only."""
    out = {}
    tag = f"rt{cluster_id}" if cluster_id else "rt"
    for i in range(nodes):
        node = f"{tag}-node{i}"
        pids = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True).stdout.split()
        out.update({r: (int(c), node) for c in pids if (r := rank_of(c, binary)) is not None})
    return out


def steps_logged(run_dir, last_rank):
    """Step records of the last rank (a worker in async mode too)."""
    try:
        with open(os.path.join(run_dir, f"rank-{last_rank}.jsonl"), "rb") as f:
            return f.read().count(b'"type":"step"')
    except OSError:
        return 0


def read(path):
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def stall_lines(lines):
    return [m for m in (STALL.match(l) for l in lines) if m]


def stop_in_checkpoint_write(run_dir, log, number, victim, pid, others):
    """SIGSTOPs `victim` (rank 0, the writer) while the test hook holds it inside a checkpoint
    write: once a .tmp file has appeared (seen within 1 s of the write's start: a hold met near
    its end could end before the stop) and every other rank has warned naming it as last seen
    writing that checkpoint (so each one's news of it says so). Returns the checkpoint's step."""
    def age(path):  # since the write put its header in the .tmp and began its hold
        try:
            return time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            return HOLD_S
    end = time.time() + 60
    while not (young := [t for t in glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*.rtck.tmp")) if age(t) < 1.0]):
        if time.time() > end:
            sys.exit(f"FAIL: launch {number}: no checkpoint write began in 60 s:\n" + "\n".join(read(log)))
        time.sleep(0.02)
    tmp = young[0]
    step = int(re.search(r"ckpt-0*(\d+)\.rtck\.tmp$", tmp).group(1))
    seen = re.compile(rf"rank {victim} on \S+ \[[^]]*last seen: step {step}, writing checkpoint,")
    deadline = time.time() - age(tmp) + HOLD_S - 1.5
    while True:
        warned = {int(m.group(1)) for m in stall_lines(read(log)) if m.group(2) == "warning" and seen.search(m.group(3))}
        if warned >= set(others):
            break
        if time.time() > deadline:
            sys.exit(f"FAIL: launch {number}: {HOLD_S - 1.5:.1f} s into the write of checkpoint {step}, ranks "
                     f"{sorted(set(others) - warned)} had not warned naming rank {victim} writing it:\n"
                     + "\n".join(read(log)))
        time.sleep(0.05)
    os.kill(pid, signal.SIGSTOP)
    if not os.path.exists(tmp):  # a stopped writer cannot rename its .tmp
        sys.exit(f"FAIL: launch {number}: the write of checkpoint {step} had ended before the stop")
    return step


def one_launch(a, work, number, victim, rng):
    run_dir = os.path.join(work, f"run{number}")
    log = os.path.join(work, f"log{number}")
    stall = ["--stall-warning", "1", "--stall-timeout", str(a.timeout), "--stall-channel", a.channel]
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1", "-np", str(a.np), a.binary]
    if a.cluster is not None:  # emulated nodes: cluster.sh run (run.sh on its hostfile)
        mpirun = [a.cluster_sh, "run", "--nodes", str(a.nodes), "-np", str(a.np), "--bin", a.binary, "--"]
    if a.bench:  # allreduce_bench: long enough to outlast the stops
        cmd = mpirun + ["--algo", "ring,mpi,rab", "--sizes", "64K,1M", "--warmup", "1", "--iters", "20000",
                        "--repeats", "1"] + stall
    else:
        cmd = mpirun + ["train", "--dataset", "synthetic", "--synthetic-shape", "1x28x28", "--synthetic-train", "1920",
           "--synthetic-test", "12000", "--model", "lenet5", "--batch-size", "16", "--epochs", "1000",
           "--checkpoint-every-steps", "10", "--keep-checkpoints", "2", "--log-every", "1", "--quiet", "--no-tensorboard",
           "--run-dir", run_dir] + stall + (["--mode", "async", "--servers", "1"] if a.async_mode else [])
    if a.checkpoint_write:
        cmd[1:1] = ["-x", f"RINGTRAIN_TEST_CHECKPOINT_HOLD_MS={HOLD_S * 1000:.0f}"]
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        end = time.time() + 120
        while p.poll() is None and time.time() < end:
            if (steps_logged(run_dir, a.np - 1) >= 5) if not a.bench else any(l.startswith("#") for l in read(log)):
                break
            time.sleep(0.1)
        if a.cluster is not None:
            pid, a.victim_host = cluster_rank_pids(a.cluster, a.nodes, a.binary).get(victim, (None, None))
        else:
            pid = rank_pids(p.pid, a.binary).get(victim)
        if pid is None:
            sys.exit(f"FAIL: launch {number}: no rank {victim} to stop:\n" + "\n".join(read(log)))
        others = [r for r in range(a.np) if r != victim]
        for stop in range(a.stops):
            if a.checkpoint_write and stop == a.stops - 1:
                a.held_step = stop_in_checkpoint_write(run_dir, log, number, victim, pid, others)
                break
            time.sleep(rng.uniform(0.2, 1.5))
            before = len(read(log))
            os.kill(pid, signal.SIGSTOP)
            if stop == a.stops - 1:
                break  # the last stop runs into --stall-timeout
            # Resumed once every other rank has warned, or 3.5 s after the stop: the others may
            # have waited for the stopped rank's evaluation or checkpoint before it stopped,
            # so their timeout can come that much sooner than --stall-timeout after the stop.
            deadline = time.time() + min(3.5, a.timeout - 4.0)
            while time.time() < deadline:
                warned = {int(m.group(1)) for m in stall_lines(read(log)[before:]) if m.group(2) == "warning"}
                if warned >= set(others):
                    break
                time.sleep(0.05)
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                sys.exit(f"FAIL: launch {number}: rank {victim} ended while stopped:\n" + "\n".join(read(log)))
        try:
            p.wait(timeout=a.timeout + 60)
        except subprocess.TimeoutExpired:
            sys.exit(f"FAIL: launch {number}: job still running {a.timeout + 60} s after the last stop")
    finally:
        if p.poll() is None:
            ranks = ([q for q, _ in cluster_rank_pids(a.cluster, a.nodes, a.binary).values()] if a.cluster is not None
                     else rank_pids(p.pid, a.binary).values())
            for q in ranks:
                os.kill(q, signal.SIGKILL)
            p.kill()
            p.wait()
    return read(log), p.returncode


def check(lines, code, victim, host, number, stops, held_step=None):
    """Failures of one launch's messages. `held_step`: the last stop was inside the write of
    that step's checkpoint, which is where every timeout naming the victim must say it was."""
    bad = []
    if code == 0:
        bad.append("mpirun exited 0 after a stall")
    found = stall_lines(lines)
    warnings = [m for m in found if m.group(2) == "warning" and int(m.group(1)) != victim]
    errors = [m for m in found if m.group(2) == "error" and int(m.group(1)) != victim]
    ending = False  # once a stall timeout has ended the job, ranks may wait on ranks that exited
    for m in found:
        named = NAMED.findall(m.group(3))
        by = int(m.group(1))
        if ending and not named and "have exited (the job is ending)" in m.group(3):
            pass
        elif by == victim:  # the stopped rank, resumed: it may name nobody, never another
            if named:
                bad.append(f"the stopped rank named {named}: {m.group(0)}")
        elif named != [(str(victim), host)]:
            bad.append(f"expected exactly rank {victim} on {host}: {m.group(0)}")
        ending = ending or m.group(2) == "error"
    if held_step is not None:  # named as stopped (silent), where it was, and no stale bucket in the wait
        where = rf"\[silent for \S+ s; last seen: step {held_step}, writing checkpoint,"
        bad += [f"not named as {where!r}, or a bucket named: {m.group(0)}" for m in errors
                if NAMED.findall(m.group(3)) and (not re.search(where, m.group(3)) or "bucket" in m.group(0))]
    if not errors:
        bad.append(f"no stall timeout error from the ranks that waited for rank {victim}")
    if len(warnings) < stops - 1:
        bad.append(f"{len(warnings)} warnings for {stops - 1} resumed stops")
    phases = sorted({" / ".join(w.groups()) for w in (WHERE.search(m.group(0)) for m in found) if w})
    seen = sorted({w.group(1) for w in (LAST_SEEN.search(m.group(3)) for m in found) if w})
    print(f"launch {number}: rank {victim} stopped {stops} times: {len(warnings)} warnings, {len(errors)} errors; "
          f"waits in: {', '.join(phases)}; the stopped rank last seen in: {', '.join(seen)}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--stops", type=int, default=7)
    ap.add_argument("--timeout", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--channel", default="auto")
    ap.add_argument("--async", dest="async_mode", action="store_true", help="train --mode async --servers 1")
    ap.add_argument("--bench", action="store_true", help="the binary is allreduce_bench")
    ap.add_argument("--host", default=None, help="the host name expected in the messages (default: this one's)")
    ap.add_argument("--cluster", type=int, default=None, metavar="ID",
                    help="launch on the emulated cluster RINGTRAIN_CLUSTER_ID=ID that is up (cluster.sh; root)")
    ap.add_argument("--nodes", type=int, default=2, help="with --cluster: its node count")
    ap.add_argument("--checkpoint-write", action="store_true",
                    help="stop rank 0 last inside a checkpoint write (a test hook holds it there)")
    a = ap.parse_args()
    if a.checkpoint_write and (a.bench or a.async_mode or a.cluster is not None):
        ap.error("--checkpoint-write: the synchronous trainer on this host only (rank 0 writes the checkpoints)")
    a.held_step = None
    a.victim_host = None
    a.cluster_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/mpirun/cluster.sh")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    host = a.host or socket.gethostname()
    work = tempfile.mkdtemp(prefix="ringtrain_stall_random.")
    failures = []
    try:
        # Rank 0 (the side channel's hub) first, then the last rank, then any but rank 0.
        victims = ([0, a.np - 1] + [rng.randrange(1, a.np) for _ in range(a.launches)])[:a.launches]
        if a.checkpoint_write:
            victims = [0] * a.launches  # the checkpoints' writer
        for number, victim in enumerate(victims, 1):
            t0 = time.time()
            lines, code = one_launch(a, work, number, victim, rng)
            print(f"launch {number}: {time.time() - t0:.0f} s")
            bad = check(lines, code, victim, a.victim_host or host, number, a.stops, a.held_step)
            if bad:
                failures += [f"launch {number}: {b}" for b in bad]
                print("\n".join(lines), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
