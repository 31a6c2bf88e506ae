"""Reads a ringtrain run directory (docs/run-directory.md) into plain Python structures.

Every field beyond the file names is optional here: what summary.json lacks is derived
from the rank logs and metrics.csv, and what cannot be derived is None, so scripts work on
runs that crashed, on older trainers and on runs without resource sampling.
"""
import csv
import glob
import json
import math
import os
import re
import statistics
import sys

# Phases in the order a step spends them; `wait` and `exposed_comm` are parts of `allreduce`
# in the logs (exposed_comm: what backward did not hide; all of it without overlap).
PHASES = ["data", "forward", "backward", "allreduce", "exposed_comm", "wait", "optimizer",
          "checkpoint", "eval"]


def num(x):
    """float(x), or None for empty/invalid/non-finite values."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_jsonl(path, warn=None):
    """The records of one rank-<r>.jsonl. A rank killed mid-write leaves its last line cut
    off (no newline): that line is skipped with a warning on stderr. Any other line that
    does not parse is skipped with a warning too: these scripts report on crashed runs."""
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    lines = text.split("\n")
    recs = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except ValueError as e:
            if i == len(lines):  # the text after the last newline: a torn last line
                warn(f"{path}:{i}: ignoring the truncated last line ({len(line)} bytes): "
                     "the run was cut off mid-write")
            else:
                warn(f"{path}:{i}: ignoring an unreadable line ({e})")
    return recs


class Run:
    """One run directory: config, metrics rows, per-rank records, summary (all optional)."""

    def __init__(self, run_dir):
        self.dir = run_dir
        self.name = os.path.basename(os.path.normpath(run_dir))
        self.config = read_json(os.path.join(run_dir, "config.json")) or {}
        self.summary_file = read_json(os.path.join(run_dir, "summary.json"))
        self.metrics = self._read_metrics(os.path.join(run_dir, "metrics.csv"))
        self.records = self._read_ranks(run_dir)
        # run.sh --elastic's launches and restarts (docs/run-directory.md), if any.
        path = os.path.join(run_dir, "membership.jsonl")
        self.membership = [r for r in read_jsonl(path) if isinstance(r, dict)] if os.path.exists(path) else []

    @staticmethod
    def _read_metrics(path):
        rows = []
        try:
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    rows.append({k: num(v) for k, v in row.items() if k})
        except OSError:
            pass
        return rows

    @staticmethod
    def _read_ranks(run_dir):
        out = {}
        for path in glob.glob(os.path.join(run_dir, "rank-*.jsonl")):
            m = re.search(r"rank-(\d+)\.jsonl$", path)
            if not m:
                continue
            recs = [r for r in read_jsonl(path) if isinstance(r, dict)]
            out[int(m.group(1))] = recs
        return dict(sorted(out.items()))

    def of_type(self, rank, kind):
        return [r for r in self.records.get(rank, []) if r.get("type") == kind]

    @property
    def ranks(self):
        n = self.config.get("world_size") or (self.summary_file or {}).get("world_size")
        if n:
            return list(range(int(n)))
        return list(self.records.keys())

    def epoch_series(self):
        """Per-epoch rows: from metrics.csv, else from rank 0's eval records."""
        if self.metrics:
            return self.metrics
        rows = []
        for e in self.of_type(min(self.records, default=0), "eval"):
            rows.append({"epoch": num(e.get("epoch")), "step": num(e.get("step")),
                         "test_loss": num(e.get("test_loss")),
                         "test_accuracy": num(e.get("test_accuracy")),
                         "elapsed_s": num(e.get("t"))})
        return rows

    def training_ranks(self):
        """The ranks that compute gradients: an async run's workers (summary.json's roles, else
        the ranks after config.json's servers), every rank of a sync run."""
        roles = {r.get("rank"): r.get("role") for r in (self.summary_file or {}).get("ranks", []) or []}
        if any(v == "worker" for v in roles.values()):
            return sorted(r for r, v in roles.items() if v == "worker")
        if self.config.get("mode") == "async":
            return [r for r in self.ranks if r >= int(self.config.get("servers") or 1)]
        return self.ranks

    def loss_over_time(self):
        """(t, mean training loss) of every step record of the training ranks, by time: rank
        0's in a sync run (every rank logs the same mean), every worker's in an async run."""
        ranks = self.training_ranks()
        if self.config.get("mode") != "async" and (self.summary_file or {}).get("mode") != "async":
            ranks = ranks[:1]
        pts = []
        for r in ranks:
            for s in self.of_type(r, "step"):
                t, loss = num(s.get("t")), num(s.get("loss"))
                if t is not None and loss is not None:
                    pts.append((t, loss))
        return sorted(pts)

    def throughput_after_warmup(self, warmup, batch, world_size):
        """Global images/s after `warmup` steps, from rank 0's step records.

        The window opens at the first record whose step is at least `warmup` (the warm-up's
        last step with --log-every 1; a later one when a record covers several steps) and
        closes at the last record, covering (last.step - start.step) synchronous steps of
        world_size x batch images; evaluations and checkpoints inside it are not training
        time. None when no record follows the window's start (summary()'s images_per_s,
        warm-up included, is then the figure to use)."""
        steps = [r for r in self.of_type(0, "step") if "t" in r and "step" in r]
        pauses = [r for r in self.of_type(0, "eval") + self.of_type(0, "checkpoint") if "t" in r]
        steps.sort(key=lambda r: r["step"])
        # Records are found by step, not by index: with --log-every 10 the third record ends
        # step 23, and taking records[warmup - 1] as the warm-up's end put the window past
        # the run (alexnet: 23 steps, warm-up 3), so the figure fell back to summary.json's,
        # first step's primitive creation and JIT included.
        later = [r for r in steps if r["step"] >= warmup]
        if len(later) < 2:
            return None
        start = later[0]
        end = steps[-1]
        n_steps = end["step"] - start["step"]
        # `t` of an eval or checkpoint record may be its start or end: either way it lies in
        # the window.
        paused = sum(p.get("seconds", 0.0) for p in pauses if start["t"] < p["t"] < end["t"])
        span = end["t"] - start["t"] - paused
        if n_steps <= 0 or span <= 0:
            return None
        dts = [(b["t"] - a["t"]) / (b["step"] - a["step"]) for a, b in zip(later, later[1:])
               if b["step"] > a["step"]]
        return {"images_per_s": n_steps * batch * world_size / span, "timed_steps": n_steps,
                "excluded_eval_s": paused,
                "step_ms_median": 1e3 * statistics.median(dts) if dts else None,
                "throughput_source": "rank-0.jsonl after warm-up"}

    def step_ms_medians(self, rank, skip=0):
        """Medians over a rank's step records after the first `skip` of the milliseconds per
        optimizer step in compute (data, forward, backward, optimizer), in the all-reduce and
        in its exposed part (all of it in logs from before overlap); {} without records.
        A record may cover several steps (`steps`, with --log-every)."""
        steps = self.of_type(rank, "step")[skip:]
        if not steps:
            return {}

        def per_step(s, keys):
            return sum(num(s.get(k)) or 0.0 for k in keys) / max(num(s.get("steps")) or 1, 1)

        compute = [per_step(s, ("data_s", "forward_s", "backward_s", "optimizer_s")) for s in steps]
        allreduce = [per_step(s, ("allreduce_s",)) for s in steps]
        exposed = [per_step(s, ("exposed_comm_s" if "exposed_comm_s" in s else "allreduce_s",))
                   for s in steps]
        return {"compute_ms": 1e3 * statistics.median(compute),
                "allreduce_ms": 1e3 * statistics.median(allreduce),
                "exposed_ms": 1e3 * statistics.median(exposed)}

    def rank_totals(self, rank):
        """One rank's totals: summary.json's entry where present, else summed from its log."""
        entry = {}
        for r in (self.summary_file or {}).get("ranks", []) or []:
            if r.get("rank") == rank:
                entry = r
        recs = self.records.get(rank, [])
        steps = [r for r in recs if r.get("type") == "step"]
        res = [r for r in recs if r.get("type") == "resource"]
        evals = [r for r in recs if r.get("type") == "eval"]
        phases = {}
        given = entry.get("phases_s") or {}
        for p in PHASES:
            v = num(given.get(p))
            if v is None and p == "eval" and evals:
                v = sum(num(e.get("seconds")) or 0.0 for e in evals)
            elif v is None and p != "eval" and steps and any((p + "_s") in s for s in steps):
                v = sum(num(s.get(p + "_s")) or 0.0 for s in steps)
            phases[p] = v
        times = [num(r.get("t")) for r in recs if num(r.get("t")) is not None]
        wall = num(entry.get("wall_s"))
        if wall is None and times:
            wall = max(times)
        peak = num(entry.get("peak_rss_mb"))
        if peak is None and res:
            vals = [num(r.get("peak_rss_mb")) or num(r.get("rss_mb")) for r in res]
            vals = [v for v in vals if v is not None]
            peak = max(vals) if vals else None
        cpu = num(entry.get("mean_cpu_percent"))
        if cpu is None and res:
            vals = [num(r.get("cpu_percent")) for r in res]
            vals = [v for v in vals if v is not None]
            cpu = sum(vals) / len(vals) if vals else None

        def mb(key_summary, key_step):
            v = num(entry.get(key_summary))
            if v is None and steps:
                b = [num(s.get(key_step)) for s in steps]
                b = [x for x in b if x is not None]
                v = max(b) / 1e6 if b else None  # cumulative counters
            return v

        images = sum(num(s.get("images")) or 0.0 for s in steps)
        ips = num(entry.get("images_per_s"))
        if ips is None and images and wall:
            ips = images / wall
        host = entry.get("host")
        hosts = self.config.get("hosts") or []
        if host is None and rank < len(hosts):
            host = hosts[rank]
        # The share of the all-reduce that ran beside backward (None for logs from before
        # overlap, which have no exposed_comm).
        hidden = num(entry.get("hidden_comm_share"))
        if hidden is None and phases.get("exposed_comm") is not None and phases.get("allreduce"):
            hidden = max(0.0, 1.0 - phases["exposed_comm"] / phases["allreduce"])
        return {"rank": rank, "host": host, "wall_s": wall, "phases_s": phases,
                "role": entry.get("role"), "steps_per_s": num(entry.get("steps_per_s")),
                "steps": num(entry.get("steps")),
                "hidden_comm_share": hidden,
                "peak_rss_mb": peak, "mean_cpu_percent": cpu,
                "mb_sent": mb("mb_sent", "bytes_sent"),
                "mb_received": mb("mb_received", "bytes_received"),
                "images_per_s": ips}

    def summary(self):
        """Run totals (summary.json's keys), filled in from the other files where absent."""
        s = dict(self.summary_file or {})
        ranks = [self.rank_totals(r) for r in self.ranks]
        s["ranks"] = ranks
        walls = [r["wall_s"] for r in ranks if r["wall_s"] is not None]
        if num(s.get("wall_s")) is None:
            s["wall_s"] = max(walls) if walls else None
        rows = self.epoch_series()
        last = rows[-1] if rows else {}
        steps0 = self.of_type(min(self.records, default=0), "step")
        if num(s.get("final_train_loss")) is None:
            v = last.get("train_loss")
            if v is None and steps0:
                v = num(steps0[-1].get("loss"))
            s["final_train_loss"] = v
        if num(s.get("final_test_loss")) is None:
            s["final_test_loss"] = last.get("test_loss")
        if num(s.get("final_test_accuracy")) is None:
            s["final_test_accuracy"] = last.get("test_accuracy")
        if num(s.get("images_per_s")) is None:
            ips = [r["images_per_s"] for r in ranks if r["images_per_s"] is not None]
            s["images_per_s"] = sum(ips) if ips else last.get("images_per_s")
        if s.get("epochs_completed") is None:
            s["epochs_completed"] = int(last["epoch"]) if last.get("epoch") is not None else None
        if s.get("steps") is None:
            s["steps"] = int(last["step"]) if last.get("step") is not None else (
                int(num(steps0[-1].get("step")) or 0) if steps0 else None)
        s.setdefault("world_size", len(ranks) or None)
        s.setdefault("model", self.config.get("model"))
        s["complete"] = self.summary_file is not None
        return s


def shares(summary):
    """Mean over ranks of allreduce/wall (wait included, as logged) and wait/wall; None
    when not logged."""
    ar, wt = [], []
    for r in summary.get("ranks", []):
        wall, ph = r.get("wall_s"), r.get("phases_s") or {}
        if not wall:
            continue
        a, w = ph.get("allreduce"), ph.get("wait")
        if a is not None:
            ar.append(a / wall)
        if w is not None:
            wt.append(w / wall)
    mean = (lambda xs: sum(xs) / len(xs) if xs else None)
    return mean(ar), mean(wt)


def phase_share(summary, phase):
    """Mean over ranks of phases_s[phase] / wall (e.g. "data": the steps waiting for their
    batches); None when no rank logged it."""
    xs = [(r.get("phases_s") or {}).get(phase) / r["wall_s"] for r in summary.get("ranks", [])
          if r.get("wall_s") and (r.get("phases_s") or {}).get(phase) is not None]
    return sum(xs) / len(xs) if xs else None


def pct(v, digits=1):
    """A fraction as a percentage cell: '' for None."""
    return "" if v is None else f"{100 * v:.{digits}f}"


def table(header, body):
    """A Markdown table from a header row and body rows."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def fmt(v, digits=3):
    """A table cell: '' for None, fixed decimals for floats."""
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)
