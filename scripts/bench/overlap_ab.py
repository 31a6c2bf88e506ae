#!/usr/bin/env python3
"""ringtrain with --overlap on against --overlap off on one host, at np N (mpirun).

The same work as train_throughput.sh (models, batch, steps, warm-up and synthetic data of
compare.py), both settings interleaved ABBA in every repeat; reported per model: images/s
medians [min-max], the paired ratio on/off, and rank 0's mean CPU % and share of the all-reduce
that backward hid. It answers whether the communication thread pays on a machine where the
ranks already fill every core (no network to progress beside compute).

  scripts/bench/overlap_ab.py --models lenet5,mlp,vgg11 --np 2 --repeats 5
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def run_side(cargs, work, np_, run_root, overlap):
    """One ringtrain run; images/s from rank 0's step records after warm-up."""
    run_dir = os.path.join(run_root, f"{work.model}-{overlap}-{time.time_ns()}")
    argv = compare.ringtrain_command(cargs.bin, work, np_, run_dir) + ["--overlap", overlap]
    cmd = compare.ringtrain_launch(argv, np_, cargs.mpirun_args)
    rc, out, err, _ = compare.run(cmd, {"OMP_NUM_THREADS": "1", **compare.MPI_ROOT_ENV}, cargs.timeout)
    run = compare.rundata.Run(run_dir)
    if rc != 0 or not run.summary_file:
        raise SystemExit(f"overlap_ab: {' '.join(cmd)}: exit {rc}: {compare.tail(err or out)}")
    rec = compare.ringtrain_throughput(run, work, np_) or {"images_per_s": run.summary().get("images_per_s")}
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
    args = p.parse_args()
    if args.np < 2:
        print("overlap_ab: --np must be >= 2 (one rank has nothing to overlap)", file=sys.stderr)
        return 2
    # compare.py's defaults for everything else (batch, steps, warm-up, data, mpirun flags).
    cargs = compare.parse_args(["--models", args.models, "--np", str(args.np), "--bin", args.bin])
    works = [compare.Work(m, cargs.batch_map[m], compare.DEFAULT_STEPS[m], compare.DEFAULT_WARMUP[m],
                          args.np, cargs) for m in cargs.models]
    load_before = os.getloadavg()
    results = {(w.model, s): [] for w in works for s in ("on", "off")}
    run_root = tempfile.mkdtemp(prefix="ringtrain-overlap-ab-")
    try:
        for rep in range(args.repeats):
            order = ("on", "off") if rep % 2 == 0 else ("off", "on")
            for w in works:
                for side in order:
                    rec = run_side(cargs, w, args.np, run_root, side)
                    compare.log(f"[{rep + 1}/{args.repeats}] {w.model} np {args.np} overlap {side}: "
                                f"{rec['images_per_s']:,.1f} images/s")
                    results[(w.model, side)].append(rec)
    finally:
        shutil.rmtree(run_root, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; np {args.np} on one host "
          f"({os.cpu_count()} cores); {args.repeats} interleaved repeats, medians [min-max]; load "
          f"average before {load_before[0]:.2f}, after {load_after[0]:.2f}\n")
    print("| model | batch/rank | steps | overlap on img/s | overlap off img/s | on / off (paired) "
          "| rank 0 CPU % on / off | hidden comm (on) |")
    print("|---|---|---|---|---|---|---|---|")
    for w in works:
        on, off = results[(w.model, "on")], results[(w.model, "off")]
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
