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
    "ranks", "ppn", "nodes", "allreduce", "mode", "servers", "max_staleness", "checkpoint",
    "repeat", "status", "exit_code",
    "wall_s", "launcher_wall_s", "rank_wall_s", "final_train_loss", "final_test_loss",
    "test_accuracy", "test_error", "images_per_s", "peak_rss_mb", "mean_cpu_percent",
    "mb_sent_per_rank", "mb_received_per_rank", "allreduce_share", "wait_share",
    "data_share", "steps_per_s", "worker_steps_per_s", "epoch_s", "mb_per_s_per_node", "staleness_max",
    "staleness_histogram", "checkpoint_s", "epochs_completed", "steps", "error_message",
]

# Grid parameters a table may group by, with their column titles.
GRID_KEYS = [("batch_size", "Batch size"), ("ranks", "Ranks"), ("ppn", "PPN"),
             ("allreduce", "All-reduce"), ("mode", "Mode"), ("checkpoint", "Checkpoint")]


def mode_label(mode, allreduce, max_staleness):
    """How a report names a run's training mode: 'sync ring', 'sync ps', 'async' (no
    staleness bound) or 'SSP K=2' (--max-staleness 2; K=0 is synchronous through the servers)."""
    if mode != "async":
        return f"sync {allreduce}" if allreduce else "sync"
    k = None if max_staleness is None else int(max_staleness)
    return "async" if k is None or k < 0 else f"SSP K={k}"


def _histogram(h):
    """summary.json's {"0": n, "1": n, ..., "63+": n} as sorted (staleness, count)."""
    out = []
    for k, v in (h or {}).items():
        try:
            out.append((int(str(k).rstrip("+")), int(v)))
        except (TypeError, ValueError):
            continue
    return sorted(out)


def _training_seconds(rank):
    """A rank's wall time less its evaluation and checkpoint time."""
    wall, ph = rank.get("wall_s"), rank.get("phases_s") or {}
    if not wall:
        return None
    return wall - (ph.get("eval") or 0.0) - (ph.get("checkpoint") or 0.0)


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


# Columns that hold ';'-joined per-rank (or per-worker, per-node) figures.
PER_RANK_LISTS = ("rank_wall_s", "mb_sent_per_rank", "mb_received_per_rank",
                  "worker_steps_per_s", "mb_per_s_per_node")


def _placement(rec, cfg, s):
    """(ranks, per-rank batch, global batch, batch size as the sweep named it, ppn, nodes)."""
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
    return ranks, per_rank, global_b, batch, ppn, nodes


def _mode(rec, cfg, s):
    """(mode, servers, staleness bound, all-reduce): servers and K of async runs only, the
    all-reduce of sync runs only (the servers exchange an async run's gradients)."""
    mode = rec.get("mode") or cfg.get("mode") or s.get("mode") or "sync"
    servers = rec.get("servers") or cfg.get("servers") or s.get("servers")
    k = rec.get("max_staleness")
    if k is None:
        k = cfg.get("max_staleness", s.get("max_staleness"))
    algo = rec.get("allreduce") if "allreduce" in rec else cfg.get("allreduce")
    if mode == "async":
        return mode, servers, k, None
    return mode, None, None, algo


def _rates(s, mode, ppn):
    """(steps/s per training rank, MB/s in and out per node). Steps/s over training time
    (evaluation and checkpoints left out): an async worker's own figure from summary.json; a
    sync run's optimizer steps, which every rank takes, over rank 0's training time. Traffic
    per node: each rank's MB in and out over its wall time, summed over the ranks of a node
    (ranks fill nodes in order, ppn at a time)."""
    rank_rows, steps = s["ranks"], s.get("steps")
    worker_rates = []
    if mode == "async":
        worker_rates = [r["steps_per_s"] for r in rank_rows if r.get("role") == "worker"
                        and r.get("steps_per_s") is not None]
    elif steps and rank_rows:
        secs = _training_seconds(rank_rows[0])
        if secs:
            worker_rates = [steps / secs]
    node_rates = []
    for i, r in enumerate(rank_rows):
        if r.get("wall_s") and r.get("mb_sent") is not None and r.get("mb_received") is not None:
            node = i // ppn if ppn else i
            while len(node_rates) <= node:
                node_rates.append(0.0)
            node_rates[node] += (r["mb_sent"] + r["mb_received"]) / r["wall_s"]
    return worker_rates, node_rates


def _staleness(s, mode):
    """(largest staleness seen, "63+" when the trainer's open last bucket has counts; the
    sorted histogram) of an async run; (None, []) otherwise."""
    if mode != "async":
        return None, []
    hist = _histogram(s.get("staleness_histogram"))
    seen = [st for st, n in hist if n > 0]
    open_end = any(str(key).endswith("+") and n for key, n in
                   (s.get("staleness_histogram") or {}).items())
    return ((f"{max(seen)}+" if open_end else max(seen)) if seen else None), hist


def load_row(run_dir):
    rec = rundata.read_json(os.path.join(run_dir, "sweep-run.json")) or {}
    run = rundata.Run(run_dir)
    cfg = run.config
    has_data = bool(cfg or run.records or run.summary_file)
    s = run.summary() if has_data else {"ranks": []}
    ranks, per_rank, global_b, batch, ppn, nodes = _placement(rec, cfg, s)
    status = rec.get("status") or ("ok" if run.summary_file else "incomplete")
    ckpt = rec.get("checkpoint")
    if ckpt is None:
        ckpt = "on" if cfg.get("checkpoint_every") else "off"
    rank_rows = s["ranks"]
    ar_share, wait_share = rundata.shares(s)
    peaks = [r["peak_rss_mb"] for r in rank_rows if r.get("peak_rss_mb") is not None]
    cpus = [r["mean_cpu_percent"] for r in rank_rows if r.get("mean_cpu_percent") is not None]
    ckpt_s = [c for c in ((r.get("phases_s") or {}).get("checkpoint") for r in rank_rows) if c is not None]
    acc = rundata.num(s.get("final_test_accuracy"))
    mode, servers, k, algo = _mode(rec, cfg, s)
    worker_rates, node_rates = _rates(s, mode, ppn)
    epochs_done = s.get("epochs_completed")
    train_s = _training_seconds(rank_rows[0]) if rank_rows else None
    staleness_max, hist = _staleness(s, mode)

    def joined(key):
        vals = [r.get(key) for r in rank_rows]
        return ";".join("" if v is None else f"{v:.3f}" for v in vals) if any(
            v is not None for v in vals) else None

    return {
        "name": rec.get("name") or run.name,
        "model": cfg.get("model") or s.get("model") or rec.get("model"),
        "dataset": cfg.get("dataset") or rec.get("dataset"), "scaling": rec.get("scaling") or "weak",
        "batch_size": batch,
        "per_rank_batch": per_rank, "global_batch": global_b, "ranks": ranks, "ppn": ppn,
        "nodes": nodes, "allreduce": algo, "mode": mode_label(mode, algo, k),
        "servers": servers, "max_staleness": k, "checkpoint": ckpt, "repeat": rec.get("repeat") or 1, "status": status,
        "exit_code": rec.get("exit_code"),
        "wall_s": rundata.num(s.get("wall_s")) if run.records or run.summary_file else None,
        "launcher_wall_s": rundata.num(rec.get("launcher_wall_s")),
        "rank_wall_s": joined("wall_s"),
        "final_train_loss": rundata.num(s.get("final_train_loss")),
        "final_test_loss": rundata.num(s.get("final_test_loss")),
        "test_accuracy": acc, "test_error": None if acc is None else 1.0 - acc,
        "images_per_s": rundata.num(s.get("images_per_s")),
        "peak_rss_mb": max(peaks) if peaks else None,
        "mean_cpu_percent": sum(cpus) / len(cpus) if cpus else None,
        "mb_sent_per_rank": joined("mb_sent"), "mb_received_per_rank": joined("mb_received"),
        "allreduce_share": ar_share, "wait_share": wait_share, "data_share": rundata.phase_share(s, "data"),
        "steps_per_s": sum(worker_rates) / len(worker_rates) if worker_rates else None,
        "worker_steps_per_s": ";".join(f"{v:.3f}" for v in worker_rates)
        if mode == "async" and worker_rates else None,
        "epoch_s": train_s / epochs_done if train_s and epochs_done else None,
        "mb_per_s_per_node": ";".join(f"{v:.3f}" for v in node_rates) if node_rates else None,
        "staleness_max": staleness_max,
        "staleness_histogram": ";".join(f"{st}:{n}" for st, n in hist) if hist else None,
        "checkpoint_s": max(ckpt_s) if ckpt_s else None,
        "epochs_completed": s.get("epochs_completed"), "steps": s.get("steps"),
        "error_message": "" if status == "ok" else _error_message(
            os.path.join(run_dir, rec.get("log") or "launch.log")),
    }


def read_meta(sweep_dir):
    """sweep.json: the sweep's own parameters (model, dataset, scaling, epochs, launcher,
    train_extra ...); {} when absent or unreadable."""
    return rundata.read_json(os.path.join(sweep_dir, "sweep.json")) or {}


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
                                  ("mode", "allreduce", "checkpoint", "ranks", "ppn",
                                   "batch_size", "repeat")))
    return rows


def _sort_key(v):
    if isinstance(v, (int, float)):
        return (0, v, "")
    s = str(v)
    # Training modes from the most to the least synchronous: sync ..., SSP K=0, 1, ..., async.
    if s.startswith("SSP K=") and s[6:].isdigit():
        return (2, 1 + int(s[6:]), s)
    if s == "async":
        return (2, float("inf"), s)
    if s.startswith("sync"):
        return (2, 0, s)
    return (1, 0, s)


def per_rank_list(value):
    if not value:
        return []
    return [rundata.num(x) for x in str(value).split(";")]


def varying(rows, exclude=()):
    """Grid keys whose value differs between the rows."""
    keys = []
    for k, title in GRID_KEYS:
        if k in exclude:
            continue
        if len({str(r.get(k)) for r in rows}) > 1:
            keys.append((k, title))
    # A run's mode names its all-reduce too ('sync ps'): one column, not two. Sweeps of sync
    # runs alone keep the all-reduce column they always had.
    names = [k for k, _ in keys]
    if "mode" in names and "allreduce" in names:
        if any(r.get("mode") and not str(r["mode"]).startswith("sync") for r in rows):
            keys = [(k, t) for k, t in keys if k != "allreduce"]
        else:
            keys = [(k, t) for k, t in keys if k != "mode"]
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
            if col in PER_RANK_LISTS:
                lists = [per_rank_list(v) for v in vals if v]
                if lists:
                    width = max(len(x) for x in lists)
                    g[col] = [_mean([x[i] for x in lists if i < len(x)]) for i in range(width)]
                else:
                    g[col] = []
                continue
            if col == "staleness_max":  # the largest over the repeats, "63+" beyond them all
                seen = [v for v in vals if v is not None]
                opened = [v for v in seen if isinstance(v, str)]
                g[col] = opened[0] if opened else (max(seen) if seen else None)
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
