"""The grid of a sweep (scripts/mpirun/sweep.py): which combinations of its options run, under
which names, with which launcher and train command. Split from sweep.py, which parses the
options and drives the runs (sweep_run.py).
"""
import os
import sys

PROG = os.environ.get("RINGTRAIN_SWEEP_PROG", "sweep.py")


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
