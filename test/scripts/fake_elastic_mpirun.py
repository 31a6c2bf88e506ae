#!/usr/bin/python3
"""A stand-in for mpirun in test_elastic.sh: each launch does what the next line of
$FAKE_ELASTIC_DIR/plan says, as if ranks had trained and failed, and records its command line.

A plan line holds words: `steps=A-B` (rank-0.jsonl of --run-dir gets the first-step event of
step A, i.e. resumed from A-1, and step records A..B), `down=h1,h2` / `up=h` (the fake agent
then fails / answers for those hosts: a node lost or back), `summary` (writes summary.json,
as a finished run does), `wait` (waits for SIGUSR2, the stop run.sh passes on, then exits 75),
`stall=R@H` (rank 0 prints the stall watchdog's timeout error naming rank R on host H, as
when a stall ends a job), `exit=C` (the exit status, default 0).
"""
import json
import os
import signal
import sys
import time

state = os.environ["FAKE_ELASTIC_DIR"]
argv = sys.argv[1:]
n = 1
while os.path.exists(os.path.join(state, f"argv-{n}")):
    n += 1
hostfile = argv[argv.index("--hostfile") + 1]
with open(os.path.join(state, f"argv-{n}"), "w") as f:
    f.write(" ".join(argv) + "\n")
with open(os.path.join(state, f"hosts-{n}"), "w") as f:
    f.write(open(hostfile).read())
train = argv[argv.index("train"):]
run_dirs = [train[i + 1] for i, a in enumerate(train) if a == "--run-dir"]
if not run_dirs:  # from train's --config, as ringtrain would take it
    import tomllib
    with open(train[train.index("--config") + 1], "rb") as f:
        run_dirs = [tomllib.load(f)["run-dir"]]
run_dir = run_dirs[-1]
with open(os.path.join(state, "plan")) as f:
    plan = f.read().splitlines()
words = plan[n - 1].split() if n <= len(plan) else ["exit=99"]
status = 0
os.makedirs(run_dir, exist_ok=True)
log_path = os.path.join(run_dir, "rank-0.jsonl")
if os.path.exists(log_path):  # as ringtrain does on resume: the torn last line goes
    data = open(log_path, "rb").read()
    open(log_path, "wb").write(data[:data.rfind(b"\n") + 1])
for w in words:
    key, _, value = w.partition("=")
    if key == "steps":
        a, b = (int(x) for x in value.split("-"))
        with open(log_path, "a") as log:
            t0 = 100.0 + a
            log.write(json.dumps({"type": "event", "t": t0, "message": f"first step of this launch: step {a}",
                                  "step": a, "unix_s": time.time()}) + "\n")
            for s in range(a, b + 1):
                log.write(json.dumps({"type": "step", "t": t0 + 0.01 * (s - a), "step": s, "steps": 1}) + "\n")
            log.write('{"type":"step","t":')  # a torn last line, as a killed rank leaves
        # The steps take the time their records say (0.01 s each), so this launch ends after
        # its last step: a relaunch's first step can never come before it, however fast.
        time.sleep(0.01 * (b - a))
    elif key in ("down", "up"):
        os.makedirs(os.path.join(state, "down"), exist_ok=True)
        for h in value.split(","):
            p = os.path.join(state, "down", h)
            if key == "down":
                open(p, "w").close()
            elif os.path.exists(p):
                os.remove(p)
    elif key == "summary":
        with open(os.path.join(run_dir, "summary.json"), "w") as s:
            json.dump({"model": "fake", "steps": 1}, s)
    elif key == "wait":
        got = []
        signal.signal(signal.SIGUSR2, lambda *_: got.append(1))
        open(os.path.join(state, "waiting"), "w").close()
        while not got:
            time.sleep(0.05)
        status = 75
    elif key == "stall":
        r, _, h = value.partition("@")
        print(f"ringtrain: [rank 0] error: stall timeout: no progress for 3 s at step 9 (training), in all-reduce "
              f"of metrics (MPI_Allreduce), waiting for every rank; stalled rank(s): rank {r} on {h} [silent for "
              f"3.1 s; last seen: step 9, evaluation, in broadcast (MPI_Bcast) waiting for rank 0 for 0.2 s]; "
              f"ending the job (--stall-timeout 3)", file=sys.stderr, flush=True)
    elif key == "exit":
        status = int(value)
sys.exit(status)
