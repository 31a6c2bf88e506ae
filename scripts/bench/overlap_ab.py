#!/usr/bin/env python3
"""Two ringtrain settings interleaved on one host, at np N (mpirun): A/B throughput.

By default the two sides are --overlap on and --overlap off of one binary. It answers whether
the communication thread pays on a machine where the ranks already fill every core (no network
to progress beside compute). With --against BIN the sides are two binaries, each at its own
default settings: --bin ("new") against BIN ("base"), e.g. the build of an older commit, which
answers whether a change made training slower without trusting a record taken on another day.

The same work as train_throughput.sh (models, batch, steps, warm-up and synthetic data of
compare.py), both sides interleaved ABBA in every repeat; reported per model: images/s
medians [min-max], the paired ratio A/B, rank 0's mean CPU % and the share of the all-reduce
that backward hid (where the binary records it).

  scripts/bench/overlap_ab.py --models lenet5,mlp,vgg11 --np 2 --repeats 5
  scripts/bench/overlap_ab.py --np 2 --repeats 5 --against /tmp/old/build/apps/ringtrain
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


_TRAIN_HELP = {}
DROPPED = set()


def known_flags(binary, argv):
    """argv without the switches (flags without a value) that an older binary's `train --help`
    does not list, e.g. --no-tensorboard from before event files existed: such a binary does
    that work in neither case. An unknown flag with a value would change the work: refused."""
    if binary not in _TRAIN_HELP:
        out = subprocess.run([binary, "train", "--help"], capture_output=True, text=True,
                                     timeout=60, env={**os.environ, **compare.MPI_ROOT_ENV})
        _TRAIN_HELP[binary] = out.stdout
    help_text = _TRAIN_HELP[binary]
    kept = []
    for i, tok in enumerate(argv):
        if tok.startswith("--") and tok not in help_text:
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            if has_value:
                raise SystemExit(f"overlap_ab: {binary} does not know {tok} {argv[i + 1]}; "
                                 "the two sides would not do the same work")
            DROPPED.add(f"{tok} (unknown to {binary})")
            continue
        kept.append(tok)
    return kept


def run_side(cargs, work, np_, run_root, side):
    """One ringtrain run of side (label, binary, extra argv); images/s from rank 0's step
    records after warm-up."""
    label, binary, extra = side
    run_dir = os.path.join(run_root, f"{work.model}-{label}-{time.time_ns()}")
    argv = known_flags(binary, compare.ringtrain_command(binary, work, np_, run_dir)) + extra
    cmd = compare.ringtrain_launch(argv, np_, cargs.mpirun_args)
    rc, out, err, _ = compare.run(cmd, {"OMP_NUM_THREADS": "1", **compare.MPI_ROOT_ENV}, cargs.timeout)
    run = compare.rundata.Run(run_dir)
    if rc != 0 or not run.summary_file:
        raise SystemExit(f"overlap_ab: {' '.join(cmd)}: exit {rc}: {compare.tail(err or out)}")
    rec = run.throughput_after_warmup(work.warmup, work.batch, np_) or {
        "images_per_s": run.summary().get("images_per_s")}
    totals = run.rank_totals(0)
    rec["hidden"] = totals.get("hidden_comm_share")
    ranks = run.summary().get("ranks", [])
    rec["cpu"] = ranks[0].get("mean_cpu_percent") if ranks else None
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="lenet5,mlp,vgg11")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--bin", default=os.path.join(compare.ROOT, "build", "apps", "ringtrain"))
    p.add_argument("--against", metavar="BIN",
                   help="compare --bin (new) with this binary (base), both at default settings, "
                        "instead of --overlap on with off")
    args = p.parse_args()
    if args.against:
        if not os.access(args.against, os.X_OK):
            print(f"overlap_ab: --against {args.against}: not an executable file", file=sys.stderr)
            return 2
        sides = (("new", args.bin, []), ("base", args.against, []))
        if args.np < 1:
            print("overlap_ab: --np must be >= 1", file=sys.stderr)
            return 2
    else:
        sides = (("on", args.bin, ["--overlap", "on"]), ("off", args.bin, ["--overlap", "off"]))
        if args.np < 2:
            print("overlap_ab: --np must be >= 2 (one rank has nothing to overlap)", file=sys.stderr)
            return 2
    a, b = sides[0][0], sides[1][0]
    # compare.py's defaults for everything else (batch, steps, warm-up, data, mpirun flags).
    cargs = compare.parse_args(["--models", args.models, "--np", str(args.np), "--bin", args.bin])
    works = [compare.Work(m, cargs.batch_map[m], compare.DEFAULT_STEPS[m], compare.DEFAULT_WARMUP[m],
                          args.np, cargs) for m in cargs.models]
    load_before = os.getloadavg()
    results = {(w.model, side[0]): [] for w in works for side in sides}
    run_root = tempfile.mkdtemp(prefix="ringtrain-overlap-ab-")
    try:
        for rep in range(args.repeats):
            order = sides if rep % 2 == 0 else sides[::-1]
            for w in works:
                for side in order:
                    rec = run_side(cargs, w, args.np, run_root, side)
                    compare.log(f"[{rep + 1}/{args.repeats}] {w.model} np {args.np} {side[0]}: "
                                f"{rec['images_per_s']:,.1f} images/s")
                    results[(w.model, side[0])].append(rec)
    finally:
        shutil.rmtree(run_root, ignore_errors=True)
    load_after = os.getloadavg()
    for label, binary, extra in sides:
        print(f"{label}: {' '.join([binary] + extra)}")
    for d in sorted(DROPPED):
        print(f"dropped: {d}")
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; np {args.np} on one host "
          f"({os.cpu_count()} cores); {args.repeats} interleaved repeats, medians [min-max]; load "
          f"average before {load_before[0]:.2f}, after {load_after[0]:.2f}\n")
    print(f"| model | batch/rank | steps | {a} img/s | {b} img/s | {a} / {b} (paired) "
          f"| rank 0 CPU % {a} / {b} | hidden comm ({a}) |")
    print("|---|---|---|---|---|---|---|---|")
    for w in works:
        on, off = results[(w.model, a)], results[(w.model, b)]
        ratio = compare.spread([a["images_per_s"] / b["images_per_s"] for a, b in zip(on, off)])
        cpu = [statistics.median([r["cpu"] for r in side if r.get("cpu") is not None] or [float("nan")])
               for side in (on, off)]
        print(f"| {w.model} | {w.batch} | {w.steps} | "
              f"{compare.fmt_spread(compare.spread([r['images_per_s'] for r in on]), 0)} | "
              f"{compare.fmt_spread(compare.spread([r['images_per_s'] for r in off]), 0)} | "
              f"{compare.fmt_spread(ratio, 3)} | {cpu[0]:.0f} / {cpu[1]:.0f} | "
              f"{compare.fmt_spread(compare.spread([r['hidden'] for r in on if r.get('hidden') is not None]), 2)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
