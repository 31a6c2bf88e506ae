"""One worker slowed: steps/s per worker of sync ps, SSP K=0 and async, interleaved per repeat.

The last rank sleeps --straggler-ms after each gradient. 1 server + 2 workers (3 ranks, one per
node by default) run scripts/mpirun/sweep.sh's modes sync (--allreduce ps), ssp0 and async,
interleaved in every repeat; --out DIR gets the sweep's results.csv and straggler.md: each
repeat's steps/s per worker and the ratios async / sync ps and async / SSP K=0 within it, with
`uptime` before and after. The default launcher is the emulated cluster, which must be up
(scripts/mpirun/cluster.sh up --nodes 3 --link-rate 1gbit); `--launcher scripts/mpirun/run.sh
--ppn 3` puts all three on this host. Flags after -- go to every `train`. Exit status 1 if a
run failed.

  bench.py straggler --repeats 3 --straggler-ms 20 --model lenet5 --epochs 1 --out bench/straggler
"""
import subprocess
import time

from benchlib.proc import ROOT


def add_arguments(p):
    p.add_argument("--out", default=f"straggler-{time.strftime('%Y%m%d-%H%M%S')}")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--straggler-ms", type=float, default=20)
    p.add_argument("--model", default="lenet5")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--launcher", default=f"{ROOT}/scripts/mpirun/cluster.sh run --nodes 3 --link-rate 1gbit")
    p.add_argument("--ppn", type=int, default=1)
    p.add_argument("--bin", help="the ringtrain binary (default: sweep.sh's)")
    p.add_argument("extra", nargs="*", help="after --: train flags for every run")


def run(args):
    uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout  # noqa: E731
    if min(args.repeats, args.epochs, args.ppn) < 1:
        args.parser.error("--repeats, --epochs and --ppn want a positive integer")
    before = uptime()
    ms = f"{args.straggler_ms:g}"
    rc = subprocess.run([f"{ROOT}/scripts/mpirun/sweep.sh", "--launcher", args.launcher, "--ranks", "3", "--ppn",
                         str(args.ppn), "--threads", "1", *(["--bin", args.bin] if args.bin else []), "--model",
                         args.model, "--epochs", str(args.epochs), "--modes", "sync,ssp0,async", "--allreduce", "ps",
                         "--repeats", str(args.repeats), "--interleave", "--timeout", "900", "--out", args.out, "--",
                         "--straggler-ms", ms, *args.extra]).returncode
    report = subprocess.run(["/usr/bin/python3", f"{ROOT}/scripts/plot/straggler_report.py", args.out, ms, before,
                             uptime()])
    return 1 if rc or report.returncode else 0
