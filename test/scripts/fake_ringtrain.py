#!/usr/bin/python3
"""A stand-in for `ringtrain train` under mpirun: writes a fabricated run directory.

Each rank writes its rank-<r>.jsonl, rank 0 the rest (fake_run.py's cost model). It parses
the flags sweep.sh passes and fails on purpose (exit 1, message on stderr, no summary.json)
when FAKE_RINGTRAIN_FAIL_BATCH names the per-rank batch size, so tests can check that a
sweep records the failure and goes on; FAKE_RINGTRAIN_SLEEP=S sleeps S seconds first (a
hung run). FAKE_RINGTRAIN_ARGS_LOG, if set, gets each rank-0
argument vector appended as one JSON line.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_run  # noqa: E402


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] != "train":
        print("fake_ringtrain: only 'train' is implemented", file=sys.stderr)
        return 2
    p = argparse.ArgumentParser(prog="fake_ringtrain train")
    p.add_argument("--model", default="lenet5")
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--global-batch-size", type=int)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--allreduce", default="ring")
    p.add_argument("--mode", default="sync", choices=["sync", "async"])
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--max-staleness", type=int, default=-1)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--checkpoint-dir")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--quiet", action="store_true")
    a, _unknown = p.parse_known_args(argv[1:])

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    if rank == 0 and os.environ.get("FAKE_RINGTRAIN_ARGS_LOG"):
        with open(os.environ["FAKE_RINGTRAIN_ARGS_LOG"], "a") as f:
            f.write(json.dumps({"argv": argv, "size": size,
                                "omp": os.environ.get("OMP_NUM_THREADS")}) + "\n")
    plan = fake_run.Plan(ranks=size, epochs=a.epochs, batch_size=a.batch_size,
                         allreduce=a.allreduce, checkpoint=a.checkpoint_every is not None,
                         model=a.model, dataset=a.dataset, max_steps=a.max_steps,
                         seed=os.path.basename(os.path.normpath(a.run_dir)),
                         mode=a.mode, servers=a.servers, max_staleness=a.max_staleness)
    if os.environ.get("FAKE_RINGTRAIN_SLEEP"):
        time.sleep(float(os.environ["FAKE_RINGTRAIN_SLEEP"]))  # a hung run, for --timeout
    fail = os.environ.get("FAKE_RINGTRAIN_FAIL_BATCH")
    if fail and int(fail) == a.batch_size:
        # Dies half-way through epoch 1: a torn rank log, no config/metrics/summary.
        recs = plan.rank_records[rank]
        plan.rank_records[rank] = recs[:len(recs) // (2 * plan.epochs)]
        fake_run.write_rank(plan, a.run_dir, rank)
        if rank == 0:
            print(f"ringtrain: [rank {rank}] error: simulated out-of-memory at batch "
                  f"{a.batch_size}", file=sys.stderr)
        return 1
    fake_run.write_rank(plan, a.run_dir, rank)
    if rank == 0:
        fake_run.write_root(plan, a.run_dir)
        if not a.quiet:
            print(f"fake_ringtrain: {plan.total_steps} steps, "
                  f"accuracy {plan.metrics[-1]['test_accuracy']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
