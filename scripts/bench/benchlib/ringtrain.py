"""ringtrain runs of a suite: the one place that knows the `train` command line of a timed run
and reads its run directory back (through scripts/plot/rundata.py, the one reader of them)."""
import os
import statistics
import subprocess
import sys

from .proc import MPI_ROOT_ENV, ROOT, BenchError, app, run, tail

sys.path.insert(0, os.path.join(ROOT, "scripts", "plot"))
import rundata  # noqa: E402

# Synthetic input per model: Fashion-MNIST's 1x28x28 where the model takes it; 32x32 colour
# where five poolings need it or the model is CIFAR-sized; ImageNet's 224x224 for the
# torchvision-shaped graph models (they take 32x32 at least, and are measured at 224).
SHAPES = {"vgg11": "3x32x32", "alexnet": "3x32x32", "svhn-cnn": "3x32x32", "resnet18": "3x224x224",
          "resnet50": "3x224x224", "mobilenetv2": "3x224x224"}


def shape_of(model):
    return SHAPES.get(model, "1x28x28")


def synthetic_count(shape, at_least, cap_mb=64, most=16384):
    """Training images of a synthetic set of `shape` ('CxHxW'): `most`, or as many as fit in cap_mb
    of pixels, but never fewer than at_least (one step's global batch)."""
    pixels = 1
    for d in shape.split("x"):
        pixels *= int(d)
    return max(at_least, min(most, cap_mb * 2**20 // pixels))


def default_bin():
    return os.environ.get("RINGTRAIN_BIN", app("ringtrain"))


def train_argv(binary, model, steps, warmup, batch, run_dir, shape=None, n_train=16384, extra=(), n_test=64):
    """A run of warmup + steps steps on synthetic data held in memory, a record every step (so the
    timed window opens exactly where the warm-up ends), no evaluation until the end."""
    return [binary, "train", "--model", model, "--dataset", "synthetic", "--synthetic-shape", shape or shape_of(model),
            "--synthetic-train", str(n_train), "--synthetic-test", str(n_test), "--batch-size", str(batch),
            "--max-steps", str(warmup + steps), "--eval-every", "0", "--log-every", "1", "--no-tensorboard",
            "--quiet", "--run-dir", run_dir, *extra]


def measure(run_dir, warmup, batch=None):
    """One run's figures over the steps after `warmup`, or None if it has none:
      step_ms      rank 0's wall clock per step (t of its last step record - t of the warm-up's last);
      images_per_s world x batch / step (given batch);
      allreduce_ms per step, mean over ranks of allreduce_s: everything the gradient sync did;
      mpi_ms       of it, wait_s: blocked in MPI (the ring's waits; the exact sum's MPI_Allreduce);
      convert_ms   of it, convert_s (exact sums: keeping each shard's gradient, int64 and back);
      data_ms      per step, mean over ranks of data_s: the step waiting for its batch;
      rest_ms      all-reduce - MPI - conversion: agreement, load imbalance, the ring's additions;
      mb_sent      rank 0's bytes_sent per step, 10^6 B;
      compute_ms   rank 0's median data + forward + backward + optimizer per step;
    and from summary.json: peak RSS (max over ranks), rank 0's CPU %, hidden comm share, snapshots."""
    r = rundata.Run(run_dir)
    if not r.summary_file:
        return None
    out = {"shards": r.summary_file.get("logical_shards", 0)}
    per_rank = {"allreduce_ms": [], "mpi_ms": [], "convert_ms": [], "data_ms": []}
    for rank in r.ranks:
        steps = sorted((s for s in r.of_type(rank, "step") if "step" in s), key=lambda s: s["step"])
        timed = [s for s in steps if s["step"] > warmup]
        start = [s for s in steps if s["step"] == warmup]
        if not timed or not start:
            return None
        n = timed[-1]["step"] - warmup
        for key, field in (("allreduce_ms", "allreduce_s"), ("mpi_ms", "wait_s"), ("convert_ms", "convert_s"),
                           ("data_ms", "data_s")):
            per_rank[key].append(1e3 * sum(rundata.num(s.get(field)) or 0.0 for s in timed) / n)
        if rank == 0:
            out["step_ms"] = 1e3 * (timed[-1]["t"] - start[0]["t"]) / n
            out["mb_sent"] = (timed[-1].get("bytes_sent", 0) - start[0].get("bytes_sent", 0)) / n / 1e6
            out["_steps"] = [(s["step"], s["t"]) for s in steps if s["step"] >= warmup]
            out["compute_ms"] = 1e3 * statistics.median(
                sum(rundata.num(s.get(k + "_s")) or 0.0 for k in ("data", "forward", "backward", "optimizer"))
                for s in timed)
    out.update({k: statistics.mean(v) for k, v in per_rank.items()})
    out["rest_ms"] = out["allreduce_ms"] - out["mpi_ms"] - out["convert_ms"]
    ranks = r.summary_file.get("ranks") or []
    rss = [x.get("peak_rss_mb") for x in ranks if x.get("peak_rss_mb") is not None]
    out["peak_rss_mb"] = max(rss) if rss else None
    out["cpu_percent"] = ranks[0].get("mean_cpu_percent") if ranks else None
    out["hidden_comm"] = r.rank_totals(0).get("hidden_comm_share")
    out["snapshots"] = r.summary_file.get("snapshots")
    out["total_steps"] = r.summary_file.get("steps")
    if batch:
        out["images_per_s"] = 1e3 * batch * len(r.ranks) / out["step_ms"]
    return out


def timed_run(cmd, run_dir, warmup, batch=None, env=None, timeout=1800):
    """Run a launch of `train` and measure it; BenchError with the command if it fails."""
    rc, out, err = run(cmd, {"OMP_NUM_THREADS": "1", **(env or {})}, timeout)
    got = measure(run_dir, warmup, batch) if rc == 0 else None
    if got is None:
        raise BenchError(f"{' '.join(cmd)}: exit {rc}: {tail(err or out)}")
    return got


def knows(binary, flag):
    """Whether `train --help` of this binary lists flag (an older build may not)."""
    out = subprocess.run([binary, "train", "--help"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **MPI_ROOT_ENV})
    return flag in out.stdout
