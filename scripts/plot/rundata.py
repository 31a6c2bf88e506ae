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
import sys

# Phases in the order a step spends them; `wait` and `exposed_comm` are parts of `allreduce`
# in the logs (exposed_comm: what backward did not hide; all of it without overlap).
PHASES = ["data", "forward", "backward", "allreduce", "exposed_comm", "wait", "optimizer",
          "checkpoint", "eval"]


def _num(x):
    """float(x), or None for empty/invalid/non-finite values."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _read_json(path):
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
        self.config = _read_json(os.path.join(run_dir, "config.json")) or {}
        self.summary_file = _read_json(os.path.join(run_dir, "summary.json"))
        self.metrics = self._read_metrics(os.path.join(run_dir, "metrics.csv"))
        self.records = self._read_ranks(run_dir)

    @staticmethod
    def _read_metrics(path):
        rows = []
        try:
            with open(path, newline="") as f:
                for row in csv.DictReader(f):
                    rows.append({k: _num(v) for k, v in row.items() if k})
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
            rows.append({"epoch": _num(e.get("epoch")), "step": _num(e.get("step")),
                         "test_loss": _num(e.get("test_loss")),
                         "test_accuracy": _num(e.get("test_accuracy")),
                         "elapsed_s": _num(e.get("t"))})
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
                t, loss = _num(s.get("t")), _num(s.get("loss"))
                if t is not None and loss is not None:
                    pts.append((t, loss))
        return sorted(pts)

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
            v = _num(given.get(p))
            if v is None and p == "eval" and evals:
                v = sum(_num(e.get("seconds")) or 0.0 for e in evals)
            elif v is None and p != "eval" and steps and any((p + "_s") in s for s in steps):
                v = sum(_num(s.get(p + "_s")) or 0.0 for s in steps)
            phases[p] = v
        times = [_num(r.get("t")) for r in recs if _num(r.get("t")) is not None]
        wall = _num(entry.get("wall_s"))
        if wall is None and times:
            wall = max(times)
        peak = _num(entry.get("peak_rss_mb"))
        if peak is None and res:
            vals = [_num(r.get("peak_rss_mb")) or _num(r.get("rss_mb")) for r in res]
            vals = [v for v in vals if v is not None]
            peak = max(vals) if vals else None
        cpu = _num(entry.get("mean_cpu_percent"))
        if cpu is None and res:
            vals = [_num(r.get("cpu_percent")) for r in res]
            vals = [v for v in vals if v is not None]
            cpu = sum(vals) / len(vals) if vals else None

        def mb(key_summary, key_step):
            v = _num(entry.get(key_summary))
            if v is None and steps:
                b = [_num(s.get(key_step)) for s in steps]
                b = [x for x in b if x is not None]
                v = max(b) / 1e6 if b else None  # cumulative counters
            return v

        images = sum(_num(s.get("images")) or 0.0 for s in steps)
        ips = _num(entry.get("images_per_s"))
        if ips is None and images and wall:
            ips = images / wall
        host = entry.get("host")
        hosts = self.config.get("hosts") or []
        if host is None and rank < len(hosts):
            host = hosts[rank]
        # The share of the all-reduce that ran beside backward (None for logs from before
        # overlap, which have no exposed_comm).
        hidden = _num(entry.get("hidden_comm_share"))
        if hidden is None and phases.get("exposed_comm") is not None and phases.get("allreduce"):
            hidden = max(0.0, 1.0 - phases["exposed_comm"] / phases["allreduce"])
        return {"rank": rank, "host": host, "wall_s": wall, "phases_s": phases,
                "role": entry.get("role"), "steps_per_s": _num(entry.get("steps_per_s")),
                "steps": _num(entry.get("steps")),
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
        if _num(s.get("wall_s")) is None:
            s["wall_s"] = max(walls) if walls else None
        rows = self.epoch_series()
        last = rows[-1] if rows else {}
        steps0 = self.of_type(min(self.records, default=0), "step")
        if _num(s.get("final_train_loss")) is None:
            v = last.get("train_loss")
            if v is None and steps0:
                v = _num(steps0[-1].get("loss"))
            s["final_train_loss"] = v
        if _num(s.get("final_test_loss")) is None:
            s["final_test_loss"] = last.get("test_loss")
        if _num(s.get("final_test_accuracy")) is None:
            s["final_test_accuracy"] = last.get("test_accuracy")
        if _num(s.get("images_per_s")) is None:
            ips = [r["images_per_s"] for r in ranks if r["images_per_s"] is not None]
            s["images_per_s"] = sum(ips) if ips else last.get("images_per_s")
        if s.get("epochs_completed") is None:
            s["epochs_completed"] = int(last["epoch"]) if last.get("epoch") is not None else None
        if s.get("steps") is None:
            s["steps"] = int(last["step"]) if last.get("step") is not None else (
                int(_num(steps0[-1].get("step")) or 0) if steps0 else None)
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
