"""Reads a sweep directory (sweep.sh's output) into one row per run, and averages repeats.

A run is a subdirectory with sweep-run.json (written by sweep.sh) or at least config.json;
its parameters come from sweep-run.json, else from config.json. Failed runs are rows too.
"""
import math
import os
import re
import statistics

import rundata

# results.csv, in order. Per-rank lists are ';'-joined, rank 0 first.
COLUMNS = [
    "name", "model", "dataset", "scaling", "batch_size", "per_rank_batch", "global_batch",
    "ranks", "ppn", "nodes", "allreduce", "checkpoint", "repeat", "status", "exit_code",
    "wall_s", "launcher_wall_s", "rank_wall_s", "final_train_loss", "final_test_loss",
    "test_accuracy", "test_error", "images_per_s", "peak_rss_mb", "mean_cpu_percent",
    "mb_sent_per_rank", "mb_received_per_rank", "allreduce_share", "wait_share",
    "checkpoint_s", "epochs_completed", "steps", "error_message",
]

# Grid parameters a table may group by, with their column titles.
GRID_KEYS = [("batch_size", "Batch size"), ("ranks", "Ranks"), ("ppn", "PPN"),
             ("allreduce", "All-reduce"), ("checkpoint", "Checkpoint")]


def _error_message(log_path):
    """The most telling line of a failed run's log: the last one mentioning an error."""
    try:
        with open(log_path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    # The trainer's own message first, then anything error-like (mpirun's banners last).
    for pattern in (r"ringtrain.*error", r"\berror\b|exception|not found",
                    r"abort|killed|signal|terminated"):
        for ln in reversed(lines):
            if re.search(pattern, ln, re.I):
                return ln[:240]
    return lines[-1][:240] if lines else ""


def load_row(run_dir):
    rec = rundata._read_json(os.path.join(run_dir, "sweep-run.json")) or {}
    run = rundata.Run(run_dir)
    cfg = run.config
    has_data = bool(cfg or run.records or run.summary_file)
    s = run.summary() if has_data else {"ranks": []}
    ranks = rec.get("np") or cfg.get("world_size") or s.get("world_size")
    per_rank = rec.get("per_rank_batch") or cfg.get("batch_size")
    global_b = rec.get("global_batch") or cfg.get("global_batch_size") or (
        per_rank * ranks if per_rank and ranks else None)
    scaling = rec.get("scaling") or "weak"
    batch = rec.get("batch_size") or (global_b if scaling == "strong" else per_rank)
    # Placement: the sweep's ranks per node when it chose them (emulated nodes in network
    # namespaces may all report the same host name), else the distinct host names.
    hosts = cfg.get("hosts") or [r.get("host") for r in s["ranks"] if r.get("host")]
    ppn = rec.get("ppn")
    if ppn and ranks:
        nodes = math.ceil(ranks / ppn)
    else:
        nodes = len(set(hosts)) if hosts else None
        if ppn is None and ranks and nodes:
            ppn = math.ceil(ranks / nodes)
    status = rec.get("status") or ("ok" if run.summary_file else "incomplete")
    ckpt = rec.get("checkpoint")
    if ckpt is None:
        ckpt = "on" if cfg.get("checkpoint_every") else "off"
    rank_rows = s["ranks"]
    ar_share, wait_share = rundata.shares(s)
    peaks = [r["peak_rss_mb"] for r in rank_rows if r.get("peak_rss_mb") is not None]
    cpus = [r["mean_cpu_percent"] for r in rank_rows if r.get("mean_cpu_percent") is not None]
    ckpt_s = [(r.get("phases_s") or {}).get("checkpoint") for r in rank_rows]
    ckpt_s = [c for c in ckpt_s if c is not None]
    acc = rundata._num(s.get("final_test_accuracy"))

    def joined(key):
        vals = [r.get(key) for r in rank_rows]
        return ";".join("" if v is None else f"{v:.3f}" for v in vals) if any(
            v is not None for v in vals) else None

    row = {
        "name": rec.get("name") or run.name,
        "model": cfg.get("model") or s.get("model") or rec.get("model"),
        "dataset": cfg.get("dataset") or rec.get("dataset"), "scaling": scaling,
        "batch_size": batch,
        "per_rank_batch": per_rank, "global_batch": global_b, "ranks": ranks, "ppn": ppn,
        "nodes": nodes, "allreduce": rec.get("allreduce") or cfg.get("allreduce"),
        "checkpoint": ckpt, "repeat": rec.get("repeat") or 1, "status": status,
        "exit_code": rec.get("exit_code"),
        "wall_s": rundata._num(s.get("wall_s")) if run.records or run.summary_file else None,
        "launcher_wall_s": rundata._num(rec.get("launcher_wall_s")),
        "rank_wall_s": joined("wall_s"),
        "final_train_loss": rundata._num(s.get("final_train_loss")),
        "final_test_loss": rundata._num(s.get("final_test_loss")),
        "test_accuracy": acc, "test_error": None if acc is None else 1.0 - acc,
        "images_per_s": rundata._num(s.get("images_per_s")),
        "peak_rss_mb": max(peaks) if peaks else None,
        "mean_cpu_percent": sum(cpus) / len(cpus) if cpus else None,
        "mb_sent_per_rank": joined("mb_sent"), "mb_received_per_rank": joined("mb_received"),
        "allreduce_share": ar_share, "wait_share": wait_share,
        "checkpoint_s": max(ckpt_s) if ckpt_s else None,
        "epochs_completed": s.get("epochs_completed"), "steps": s.get("steps"),
        "error_message": "" if status == "ok" else _error_message(
            os.path.join(run_dir, rec.get("log") or "launch.log")),
    }
    return row


def load_sweep(sweep_dir):
    rows = []
    for entry in sorted(os.listdir(sweep_dir)):
        d = os.path.join(sweep_dir, entry)
        if entry.startswith(".") or entry == "plots" or not os.path.isdir(d):
            continue
        if not (os.path.exists(os.path.join(d, "sweep-run.json"))
                or os.path.exists(os.path.join(d, "config.json"))):
            continue
        rows.append(load_row(d))
    rows.sort(key=lambda r: tuple(_sort_key(r.get(k)) for k in
                                  ("allreduce", "checkpoint", "ranks", "ppn", "batch_size",
                                   "repeat")))
    return rows


def _sort_key(v):
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def per_rank_list(value):
    if not value:
        return []
    return [rundata._num(x) for x in str(value).split(";")]


def varying(rows, exclude=()):
    """Grid keys whose value differs between the rows."""
    keys = []
    for k, title in GRID_KEYS:
        if k in exclude:
            continue
        if len({str(r.get(k)) for r in rows}) > 1:
            keys.append((k, title))
    # Ranks per node that follow from the rank count (all on one host: ppn = ranks) add
    # nothing to a table or a legend; keep them only when they vary independently.
    names = [k for k, _ in keys]
    if "ppn" in names and ("ranks" in names or "ranks" in exclude):
        ppn_of = {}
        for r in rows:
            ppn_of.setdefault(str(r.get("ranks")), set()).add(str(r.get("ppn")))
        if all(len(v) == 1 for v in ppn_of.values()):
            keys = [(k, t) for k, t in keys if k != "ppn"]
    return keys


def aggregate(rows, group_keys):
    """Groups successful rows by group_keys; each group: params, n, and for every numeric
    column the mean and sample standard deviation; per-rank lists averaged per rank."""
    groups = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        groups.setdefault(tuple(r.get(k) for k in group_keys), []).append(r)
    out = []
    for key, members in groups.items():
        g = dict(zip(group_keys, key))
        g["n"] = len(members)
        for col in COLUMNS:
            vals = [m.get(col) for m in members]
            if col in ("rank_wall_s", "mb_sent_per_rank", "mb_received_per_rank"):
                lists = [per_rank_list(v) for v in vals if v]
                if lists:
                    width = max(len(x) for x in lists)
                    g[col] = [_mean([x[i] for x in lists if i < len(x)]) for i in range(width)]
                else:
                    g[col] = []
                continue
            nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if nums and col not in group_keys:
                g[col] = _mean(nums)
                g[col + "_sd"] = statistics.stdev(nums) if len(nums) > 1 else None
            elif col not in g:
                g[col] = members[0].get(col)
        out.append(g)
    out.sort(key=lambda g: tuple(_sort_key(g.get(k)) for k in group_keys))
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None
