#!/usr/bin/env python3
"""The stall watchdog's cost: step time with the watchdog and its side channel on against off,
interleaved runs.

Each round runs `ringtrain train` once with the watchdog on (--stall-warning 60 --stall-timeout
600 --stall-channel auto: the defaults, the thread and the TCP side channel to rank 0) and once
off (--stall-warning 0 --stall-timeout 0: no thread, no channel), the order alternating between
rounds, under mpirun on this host. The step time of a run is rank 0's (t of its last step
record - t of the record after the warm-up) / the steps between them (--log-every 1), so it
holds everything the loop does per step. Prints each round's pair, the median of the per-round
ratios on / off with the quartiles, and `uptime` before and after: on a shared machine the load
moves single runs, and the ratio of the two runs of one round is steadier than either.

  scripts/bench/stall_overhead.py --rounds 10 --np 2 --model lenet5 --steps 400
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = {
    "on": ["--stall-warning", "60", "--stall-timeout", "600", "--stall-channel", "auto"],
    "off": ["--stall-warning", "0", "--stall-timeout", "0"],
}


def step_time(run_dir, warmup):
    ts = []
    with open(os.path.join(run_dir, "rank-0.jsonl")) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("type") == "step":
                ts.append(r["t"])
    if len(ts) <= warmup + 1:
        raise RuntimeError(f"{run_dir}: {len(ts)} step records, need more than {warmup + 1}")
    return (ts[-1] - ts[warmup]) / (len(ts) - 1 - warmup)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "apps", "ringtrain"))
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--model", default="lenet5")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--data", default="synthetic", help="synthetic (1x28x28) or fashion-mnist")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.steps <= a.warmup + 1:
        p.error("--rounds must be >= 1 and --steps > --warmup + 1")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    data = (["--dataset", "synthetic", "--synthetic-shape", "1x28x28", "--synthetic-train", "60000",
             "--synthetic-test", "64"] if a.data == "synthetic" else ["--dataset", a.data])
    work = tempfile.mkdtemp(prefix="stall_overhead.")
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    rows = []
    try:
        for r in range(a.rounds):
            order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
            got = {}
            for s in order:
                run_dir = os.path.join(work, f"r{r}-{s}")
                cmd = (["mpirun", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1", "-np", str(a.np),
                        a.bin, "train", "--model", a.model, "--batch-size", str(a.batch_size), "--max-steps",
                        str(a.steps), "--eval-every", "0", "--log-every", "1", "--quiet", "--no-tensorboard",
                        "--run-dir", run_dir] + data + SETTINGS[s])
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                got[s] = step_time(run_dir, a.warmup)
                shutil.rmtree(run_dir, ignore_errors=True)
            rows.append(got)
            print(f"round {r + 1}: on {got['on'] * 1e3:.3f} ms, off {got['off'] * 1e3:.3f} ms, "
                  f"on/off {got['on'] / got['off']:.4f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = sorted(g["on"] / g["off"] for g in rows)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    print(f"\n| model | np | rounds | on (median ms) | off (median ms) | on/off median [quartiles] |")
    print(f"|---|---|---|---|---|---|")
    print(f"| {a.model} | {a.np} | {a.rounds} | {statistics.median(g['on'] for g in rows) * 1e3:.3f} | "
          f"{statistics.median(g['off'] for g in rows) * 1e3:.3f} | {statistics.median(ratios):.4f} "
          f"[{q[0]:.4f}, {q[2]:.4f}] |")
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
