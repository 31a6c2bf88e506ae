#!/usr/bin/python3
"""Fabricates ringtrain run directories (docs/run-directory.md) for testing the scripts.

The numbers come from a toy cost model (compute per image, all-reduce per step growing with
the rank count, a loss that falls per epoch and more slowly for larger global batches) so
the plots and tables have realistic shapes without the trainer. Deterministic per argument.

An asynchronous run (mode="async") has ranks 0..servers-1 as parameter servers (resource
records only) and the others as workers whose step records carry the staleness of their
gradients, bounded by max_staleness (K < 0: up to 3); summary.json gives the roles, each
worker's steps/s and the staleness histograms, as the trainer writes them.

usage: fake_run.py RUN_DIR [--ranks 2] [--epochs 3] [--batch-size 64] [--allreduce ring]
                           [--mode sync|async] [--servers 1] [--max-staleness -1]
                           [--checkpoint] [--minimal] [--incomplete]
"""
import argparse
import csv
import json
import math
import os
import random

DATASET_SIZE = 12000
TEST_SIZE = 1000


class Plan:
    """All numbers of one fabricated run, computed up front so that any rank can write any
    file (the fake trainer's rank 0 writes the summary of every rank)."""

    def __init__(self, ranks=2, epochs=3, batch_size=64, allreduce="ring", checkpoint=False,
                 model="lenet5", dataset="fashion-mnist", hosts=None, seed=1, max_steps=None,
                 mode="sync", servers=1, max_staleness=-1):
        self.ranks, self.epochs, self.batch = ranks, epochs, batch_size
        self.mode, self.servers, self.max_staleness = mode, servers, max_staleness
        self.workers = ranks - servers if mode == "async" else ranks
        self.allreduce, self.checkpoint = allreduce, checkpoint
        self.model, self.dataset = model, dataset
        self.hosts = hosts or ["node0"] * ranks
        self.global_batch = batch_size * ranks
        self.steps_per_epoch = max(1, DATASET_SIZE // self.global_batch)
        self.max_steps = max_steps
        self.rng = random.Random(f"{ranks}-{epochs}-{batch_size}-{allreduce}-{checkpoint}-{seed}"
                                 f"-{mode}-{max_staleness}")
        self.param_mb = 0.25  # gradient size in MB (lenet5 ~ 61k floats)
        self._simulate()
        if mode == "async":
            self._make_async()

    def _make_async(self):
        """Servers keep only their resource records; each worker's steps get a staleness."""
        top = self.max_staleness if self.max_staleness >= 0 else 3
        self.staleness = {}
        for r in range(self.ranks):
            if r < self.servers:
                self.rank_records[r] = [x for x in self.rank_records[r] if x["type"] == "resource"]
                continue
            hist = [0] * (top + 1)
            for x in self.rank_records[r]:
                if x["type"] == "step":
                    st = self.rng.randint(0, top)
                    hist[st] += 1
                    x.update({"role": "worker", "staleness": [st], "delay": [st]})
            self.staleness[r] = hist
            t = self.rank_totals[r]
            t["steps"] = sum(1 for x in self.rank_records[r] if x["type"] == "step")

    def _step_times(self, rank):
        compute = 0.001 * self.batch  # seconds per step on one rank
        n = self.ranks
        if n == 1:
            allreduce = 0.0
        elif self.mode == "async":  # push and pull, no waiting for the slowest worker
            allreduce = 0.002 * n
        elif self.allreduce == "ps":
            allreduce = 0.004 * n * (1.5 if rank == 0 else 1.0)
        else:
            allreduce = 0.004 * 2 * (n - 1) / n
        wait = 0.3 * allreduce * (0.5 if rank == 0 else 1.0)
        return {
            "data": 0.05 * compute, "forward": 0.35 * compute, "backward": 0.6 * compute,
            "allreduce": allreduce, "wait": wait, "optimizer": 0.02 * compute,
            "checkpoint": 0.0,
        }

    def _simulate(self):
        total_steps = self.steps_per_epoch * self.epochs
        if self.max_steps:
            total_steps = min(total_steps, self.max_steps)
        self.total_steps = total_steps
        self.rank_records = {r: [] for r in range(self.ranks)}
        self.metrics = []
        self.rank_totals = {}
        for r in range(self.ranks):
            base = self._step_times(r)
            t = 0.0
            phases = {k: 0.0 for k in list(base) + ["eval"]}
            sent = recv = 0
            recs = self.rank_records[r]
            next_sample = 1.0
            rss = 60.0 + 0.05 * self.batch + (5.0 if r == 0 else 0.0)
            peak = rss
            last_sent = 0
            last_t = 0.0
            for step in range(1, total_steps + 1):
                epoch = (step - 1) // self.steps_per_epoch
                jitter = 1.0 + 0.1 * (self.rng.random() - 0.5)
                st = {k: v * jitter for k, v in base.items()}
                if self.ranks > 1:
                    per_step = int(self.param_mb * 1e6 * (
                        2 * (self.ranks - 1) / self.ranks if self.allreduce != "ps"
                        else (self.ranks - 1 if r == 0 else 1)))
                    sent += per_step
                    recv += per_step
                loss = self.loss_at(epoch + (step - epoch * self.steps_per_epoch)
                                    / self.steps_per_epoch)
                last_of_epoch = step % self.steps_per_epoch == 0 or step == total_steps
                if last_of_epoch and self.checkpoint and r == 0:
                    st["checkpoint"] = 0.05
                dur = sum(v for k, v in st.items() if k != "wait")  # wait is inside allreduce
                t += dur
                for k, v in st.items():
                    phases[k] += v
                recs.append({"type": "step", "t": round(t, 4), "epoch": epoch + 1,
                             "step": step, **{k + "_s": round(v, 6) for k, v in st.items()},
                             "bytes_sent": sent, "bytes_received": recv,
                             "loss": round(loss, 5), "images": self.batch})
                while t >= next_sample:
                    rss = min(rss + 2.0, 60.0 + 0.12 * self.batch + (28.0 if r == 0 else 20.0))
                    peak = max(peak, rss)
                    dt = next_sample - last_t
                    mbps = (sent - last_sent) / 1e6 / dt if dt > 0 else 0.0
                    recs.append({"type": "resource", "t": round(next_sample, 3),
                                 "cpu_percent": round(95.0 - 10 * (r > 0)
                                                      + 4 * self.rng.random(), 1),
                                 "rss_mb": round(rss, 1), "peak_rss_mb": round(peak, 1),
                                 "net_send_mbps": round(mbps, 3),
                                 "net_recv_mbps": round(mbps, 3)})
                    last_sent, last_t = sent, next_sample
                    next_sample += 1.0
                if last_of_epoch:
                    e = epoch + 1
                    ev = 0.0002 * TEST_SIZE
                    t += ev
                    phases["eval"] += ev
                    acc = self.accuracy_at(e)
                    recs.append({"type": "eval", "t": round(t, 4), "epoch": e, "step": step,
                                 "test_loss": round(self.loss_at(e) * 1.05, 5),
                                 "test_accuracy": round(acc, 4), "seconds": round(ev, 4)})
                    if self.checkpoint and r == 0:
                        recs.append({"type": "checkpoint", "t": round(t, 4), "epoch": e,
                                     "step": step, "seconds": 0.05, "bytes": 250000,
                                     "path": f"checkpoints/ckpt-{e}.bin"})
                    if r == 0:
                        self.metrics.append({
                            "epoch": e, "step": step, "lr": 0.05,
                            "train_loss": round(self.loss_at(e - 0.5), 5),
                            "train_accuracy": round(self.accuracy_at(e) + 0.01, 4),
                            "test_loss": round(self.loss_at(e) * 1.05, 5),
                            "test_accuracy": round(acc, 4), "elapsed_s": round(t, 3),
                            "images_per_s": round(self.global_batch * self.steps_per_epoch
                                                  / max(t / e, 1e-9), 1)})
            self.rank_totals[r] = {
                "wall_s": t, "phases_s": phases, "sent": sent, "recv": recv,
                "peak": peak,
                "cpu": sum(x["cpu_percent"] for x in recs if x["type"] == "resource")
                / max(1, sum(1 for x in recs if x["type"] == "resource")),
            }

    def loss_at(self, epoch_progress):
        speed = 1.2 / math.sqrt(self.global_batch / 64.0)
        return 0.3 + 2.0 * math.exp(-speed * epoch_progress)

    def accuracy_at(self, epoch):
        return min(0.99, 0.95 - 0.6 * (self.loss_at(epoch) - 0.3))

    def config(self):
        c = {"model": self.model, "dataset": self.dataset, "world_size": self.ranks,
             "batch_size": self.batch, "global_batch_size": self.global_batch,
             "epochs": self.epochs, "allreduce": self.allreduce, "lr": 0.05,
             "hosts": self.hosts, "threads_per_rank": 1, "mode": self.mode,
             "versions": {"ringtrain": "0.1.0", "mpi": "Open MPI v4.1.4",
                          "onednn": "2.6.3"}}
        if self.mode == "async":
            c.update({"servers": self.servers, "max_staleness": self.max_staleness,
                      "workers": self.workers})
        return c

    def _rank_summary(self, r, v):
        out = {
            "rank": r, "host": self.hosts[r], "wall_s": round(v["wall_s"], 3),
            "images_per_s": round(self.batch * self.total_steps / v["wall_s"], 2),
            "phases_s": {k: round(x, 4) for k, x in v["phases_s"].items()},
            "peak_rss_mb": round(v["peak"], 1), "mean_cpu_percent": round(v["cpu"], 1),
            "mb_sent": round(v["sent"] / 1e6, 3), "mb_received": round(v["recv"] / 1e6, 3),
        }
        if self.mode == "async":
            busy = v["wall_s"] - v["phases_s"]["eval"]
            if r < self.servers:
                out.update({"role": "server", "updates": self.total_steps * self.workers,
                            "updates_per_s": round(self.total_steps * self.workers / busy, 3)})
            else:
                out.update({"role": "worker", "steps": v["steps"],
                            "steps_per_s": round(v["steps"] / busy, 3),
                            "staleness_histogram": _hist_json(self.staleness[r])})
        return out

    def summary(self):
        wall = max(v["wall_s"] for v in self.rank_totals.values())
        images = self.global_batch * self.total_steps
        s = {
            "model": self.model, "world_size": self.ranks, "wall_s": round(wall, 3),
            "images_per_s": round(images / wall, 2),
            "final_train_loss": self.metrics[-1]["train_loss"],
            "final_test_loss": self.metrics[-1]["test_loss"],
            "final_test_accuracy": self.metrics[-1]["test_accuracy"],
            "epochs_completed": len(self.metrics), "steps": self.total_steps,
            "time_to_target_s": None,
            "stopped_by": "max_steps" if self.max_steps and self.total_steps == self.max_steps
            else "epochs",
            "ranks": [self._rank_summary(r, v) for r, v in sorted(self.rank_totals.items())],
        }
        if self.mode == "async":
            total = [sum(self.staleness[r][i] for r in self.staleness)
                     for i in range(len(next(iter(self.staleness.values()))))]
            s.update({"mode": "async", "servers": self.servers, "workers": self.workers,
                      "max_staleness": self.max_staleness, "allreduce": "none",
                      "staleness_histogram": _hist_json(total)})
        return s


def _hist_json(counts):
    """The trainer's histogram form: {"0": n0, "1": n1, ...}, non-zero buckets only."""
    return {str(i): n for i, n in enumerate(counts) if n}


def write_rank(plan, run_dir, rank, minimal=False):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, f"rank-{rank}.jsonl"), "w") as f:
        for rec in plan.rank_records[rank]:
            if minimal:
                if rec["type"] == "resource":
                    continue  # an older trainer / --no-monitor: no resource samples
                rec = {k: v for k, v in rec.items() if k not in ("wait_s", "checkpoint_s")}
            f.write(json.dumps(rec) + "\n")


def write_root(plan, run_dir, minimal=False, incomplete=False):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(plan.config(), f, indent=1)
    with open(os.path.join(run_dir, "metrics.csv"), "w", newline="") as f:
        fields = list(plan.metrics[0].keys())
        if minimal:
            fields = [c for c in fields if c not in ("train_accuracy", "images_per_s")]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        rows = plan.metrics[:1] if incomplete else plan.metrics
        for m in rows:
            w.writerow(m)
    if not minimal and not incomplete:
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(plan.summary(), f, indent=1)


def write_run(run_dir, minimal=False, incomplete=False, **kw):
    plan = Plan(**kw)
    for r in range(plan.ranks):
        write_rank(plan, run_dir, r, minimal=minimal)
    write_root(plan, run_dir, minimal=minimal, incomplete=incomplete)
    return plan


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--allreduce", default="ring")
    p.add_argument("--mode", default="sync", choices=["sync", "async"])
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--max-staleness", type=int, default=-1)
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--minimal", action="store_true",
                   help="omit optional data: summary.json, resource samples, wait/checkpoint")
    p.add_argument("--incomplete", action="store_true",
                   help="a run that died after epoch 1: no summary.json")
    a = p.parse_args()
    write_run(a.run_dir, minimal=a.minimal, incomplete=a.incomplete, ranks=a.ranks,
              epochs=a.epochs, batch_size=a.batch_size, allreduce=a.allreduce,
              checkpoint=a.checkpoint, mode=a.mode, servers=a.servers,
              max_staleness=a.max_staleness)


if __name__ == "__main__":
    main()
