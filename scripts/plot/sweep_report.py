#!/usr/bin/python3
"""Tabulates a sweep directory: results.csv (one row per run), report.md (the course-report
tables: training modes, ranks, batch size, network, communication share, checkpoint cost,
failures) and the sweep plots under plots/.

usage: sweep_report.py SWEEP_DIR [--no-plots] [--run-reports]
"""
import argparse
import csv
import os
import sys

# Python puts this script's directory (scripts/plot) first on the module path.
import plot_run
import plot_sweep
import run_report
import rundata
import sweepdata
from rundata import fmt, pct, table


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sweepdata.COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else
                            (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]))
                        for k in sweepdata.COLUMNS})


def mean_sd(g, key, digits=2):
    v = g.get(key)
    if v is None:
        return ""
    sd = g.get(key + "_sd")
    return f"{v:.{digits}f} ± {sd:.{digits}f}" if sd is not None else f"{v:.{digits}f}"


def per_rank_cell(values, digits=1):
    return " / ".join("?" if v is None else f"{v:.{digits}f}" for v in values)


def grid_cells(g, keys):
    return [fmt(g.get(k)) for k, _ in keys]


def section_modes(ok):
    """The sync-vs-async study's table, one row per mode (and whatever else varies)."""
    modes = {r.get("mode") for r in ok}
    if len(modes) < 2 and not any(not str(r.get("mode") or "sync").startswith("sync") for r in ok):
        return None
    others = sweepdata.varying(ok, exclude=("mode", "allreduce", "repeat"))
    groups = sweepdata.aggregate(ok, [k for k, _ in others] + ["mode"])
    header = [t for _, t in others] + ["Mode", "Steps/s per worker", "Time per epoch (s)",
                                       "Final loss", "Accuracy (%)", "CPU (%)",
                                       "MB/s per node", "Staleness: max seen (bound)"]
    body = []
    for g in groups:
        rates = g.get("worker_steps_per_s") or []
        per_worker = fmt(g.get("steps_per_s"), 1)
        if len(rates) > 1:
            per_worker += f" ({per_rank_cell(rates, 1)})"
        k = g.get("max_staleness")
        bound = "" if k is None else ("none" if k < 0 else fmt(int(k)))
        stale = "" if g.get("staleness_max") is None else f"{g['staleness_max']} ({bound})"
        body.append(grid_cells(g, others) + [
            g.get("mode") or "", per_worker, mean_sd(g, "epoch_s"),
            fmt(g.get("final_train_loss"), 4), pct(g.get("test_accuracy"), 2),
            fmt(g.get("mean_cpu_percent"), 1), per_rank_cell(g.get("mb_per_s_per_node") or []),
            stale])
    return ("## Modes: synchronous vs asynchronous\n\n"
            "*Steps/s per worker*: gradients each training rank computes per second of "
            "training (evaluation and checkpoints left out), the mean over workers with each "
            "worker's own rate in brackets for asynchronous runs; a sync run's ranks all take "
            "its optimizer steps. *Time per epoch*: rank 0's training time over the epochs. "
            "*Final loss*: the last epoch's training loss. *CPU*: mean over ranks (100% = one "
            "core). *MB/s per node*: MB sent plus received over the run's wall time, node 0 "
            "first (with a parameter server, node 0 holds it). *Staleness*: the largest "
            "staleness of any applied gradient in summary.json's histogram, and the bound "
            "`--max-staleness` set (none: unbounded; 63+ is the histogram's last bucket, 63 or more).\n\n" + table(header, body))


def section_ranks(ok):
    others = sweepdata.varying(ok, exclude=("ranks", "ppn", "repeat"))
    groups = sweepdata.aggregate(ok, [k for k, _ in others] + ["ranks", "ppn", "nodes"])
    header = [t for _, t in others] + ["Ranks", "Nodes × ranks/node",
                                       "Time on each rank (s)", "Wall (s)", "Accuracy (%)",
                                       "Error (%)", "Images/s"]
    body = []
    for g in groups:
        placement = f"{fmt(g.get('nodes'))} × {fmt(g.get('ppn'))}" if g.get("nodes") else ""
        body.append(grid_cells(g, others) + [
            fmt(g.get("ranks")), placement, per_rank_cell(g.get("rank_wall_s") or []),
            mean_sd(g, "wall_s"), pct(g.get("test_accuracy"), 2), pct(g.get("test_error"), 2),
            fmt(g.get("images_per_s"), 0)])
    return ("## Ranks: time on each rank, accuracy, error\n\n"
            "Weak scaling keeps the per-rank batch fixed (the global batch grows with the "
            "ranks); strong scaling keeps the global batch fixed. Times are rank 0 first.\n\n"
            + table(header, body))


def section_batch(ok):
    others = sweepdata.varying(ok, exclude=("batch_size", "repeat"))
    groups = sweepdata.aggregate(ok, [k for k, _ in others] + ["batch_size"])
    header = [t for _, t in others] + ["Batch size", "Time (s)", "Loss", "Accuracy (%)",
                                       "Peak memory (MB)", "CPU (%)"]
    body = [grid_cells(g, others) + [
        fmt(g.get("batch_size")), mean_sd(g, "wall_s"), fmt(g.get("final_train_loss"), 4),
        pct(g.get("test_accuracy"), 2), fmt(g.get("peak_rss_mb"), 1),
        fmt(g.get("mean_cpu_percent"), 1)] for g in groups]
    return ("## Batch size: time, loss, accuracy, peak memory, CPU\n\n"
            "Loss is the final training loss; peak memory the largest RSS of any rank; CPU "
            "the mean over ranks of each rank's mean CPU% (100% = one core).\n\n"
            + table(header, body))


def section_network(ok, keys):
    groups = sweepdata.aggregate(ok, [k for k, _ in keys])
    header = [t for _, t in keys] + ["MB sent per rank", "MB received per rank",
                                     "Images/s"]
    body = [grid_cells(g, keys) + [per_rank_cell(g.get("mb_sent_per_rank") or []),
                                   per_rank_cell(g.get("mb_received_per_rank") or []),
                                   fmt(g.get("images_per_s"), 0)] for g in groups]
    return ("## Network: MB sent and received per rank\n\nRank 0 first. With a parameter "
            "server rank 0's traffic is the sum of the workers'; in a ring every rank "
            "moves about 2(N-1)/N times the gradient per step.\n\n" + table(header, body))


def section_share(ok, keys):
    groups = sweepdata.aggregate(ok, [k for k, _ in keys])
    header = [t for _, t in keys] + ["All-reduce (% of time)", "of which waiting (%)",
                                     "Outside MPI waits (%)", "Waiting for data (%)"]
    body = []
    for g in groups:
        ar, wt = g.get("allreduce_share"), g.get("wait_share")
        net = None if ar is None else ar - (wt or 0.0)
        body.append(grid_cells(g, keys) + [pct(ar), pct(wt), pct(net), pct(g.get("data_share"))])
    return ("## Share of time in all-reduce and waiting\n\nMean over ranks of each rank's "
            "all-reduce time (waiting included, as the trainer logs it) and of its time "
            "blocked in MPI waits (*waiting*: on slower peers, and also on the wire when the "
            "network is the limit; the rest is reducing and copying), as a share of its "
            "wall time. *Waiting for data*: the steps blocked on their batch (loading, "
            "decoding and augmenting the loader threads had not done ahead).\n\n" + table(header, body))


def section_checkpoint(ok):
    if {r.get("checkpoint") for r in ok} != {"on", "off"}:
        return None
    others = sweepdata.varying(ok, exclude=("checkpoint", "repeat"))
    keys = [k for k, _ in others]
    groups = sweepdata.aggregate(ok, keys + ["checkpoint"])
    pairs = {}
    for g in groups:
        pairs.setdefault(tuple(g.get(k) for k in keys), {})[g["checkpoint"]] = g
    body = []
    for key, p in sorted(pairs.items(),
                         key=lambda kv: tuple(sweepdata._sort_key(v) for v in kv[0])):
        if "on" not in p or "off" not in p:
            continue
        on, off = p["on"].get("wall_s"), p["off"].get("wall_s")
        over = None if not on or not off else (on - off) / off
        body.append([fmt(v) for v in key] + [fmt(off, 2), fmt(on, 2),
                                             fmt(p["on"].get("checkpoint_s"), 2), pct(over)])
    header = [t for _, t in others] + ["Time without (s)", "Time with (s)",
                                       "Checkpoint time, rank 0 (s)", "Overhead (%)"]
    return ("## Checkpoint overhead\n\nOverhead = (time with - time without) / time "
            "without; single runs are noisy, use --repeats.\n\n" + table(header, body))


def section_failures(rows):
    bad = [r for r in rows if r.get("status") != "ok"]
    if not bad:
        return None
    body = [[r["name"], r.get("status"), fmt(r.get("exit_code")),
             (r.get("error_message") or "").replace("|", "\\|"),
             f"[log]({r['name']}/launch.log)"] for r in bad]
    return ("## Runs that did not succeed\n\nRe-running the same sweep command retries "
            "them (finished runs are skipped).\n\n"
            + table(["Run", "Status", "Exit code", "Last error", "Log"], body))


def section_runs(rows, sweep_dir):
    # A run's own report (run_report.py, or sweep_report.py --run-reports) when it has one.
    linked = any(os.path.exists(os.path.join(sweep_dir, r["name"], "report.md")) for r in rows)
    body = []
    for r in rows:
        cells = [r["name"], r.get("status"), fmt(r.get("wall_s"), 2),
                 fmt(r.get("final_train_loss"), 4), pct(r.get("test_accuracy"), 2),
                 fmt(r.get("images_per_s"), 0), fmt(r.get("peak_rss_mb"), 1)]
        if linked:
            exists = os.path.exists(os.path.join(sweep_dir, r["name"], "report.md"))
            cells.append(f"[report]({r['name']}/report.md)" if exists else "")
        body.append(cells)
    header = ["Run", "Status", "Wall (s)", "Loss", "Accuracy (%)", "Images/s",
              "Peak memory (MB)"] + (["Run report"] if linked else [])
    return "## All runs\n\n" + table(header, body)


def write_report(sweep_dir, rows, plots, path):
    meta = sweepdata.read_meta(sweep_dir)
    ok = [r for r in rows if r.get("status") == "ok"]
    first = rows[0] if rows else {}
    out = [f"# Sweep report: {os.path.basename(os.path.normpath(sweep_dir))}", ""]
    desc = [f"model **{first.get('model') or meta.get('model') or '?'}**",
            f"dataset **{first.get('dataset') or meta.get('dataset') or '?'}**",
            f"**{meta.get('scaling') or first.get('scaling') or 'weak'}** scaling"]
    if meta.get("epochs"):
        desc.append(f"{meta['epochs']} epoch(s)")
    if meta.get("train_extra"):
        desc.append(f"extra train flags `{meta['train_extra']}`")
    if meta.get("launcher"):
        opts = (meta.get("launch_options") or "").strip()
        desc.append(f"launched with `{meta['launcher']}`"
                    + (f" (options `{opts}`)" if opts else ""))
    out.append(", ".join(desc) + ".")
    out.append("")
    out.append(f"{len(rows)} run(s): {len(ok)} succeeded, {len(rows) - len(ok)} did not. "
               "Numbers are means over repeats (± one standard deviation where there are "
               "several). Every row of `results.csv` is one run.")
    out.append("")
    sections = []
    if ok:
        keys = sweepdata.varying(ok, exclude=("repeat",)) or [("ranks", "Ranks")]
        sections += [section_modes(ok), section_ranks(ok), section_batch(ok),
                     section_network(ok, keys),
                     section_share(ok, keys), section_checkpoint(ok)]
    sections += [section_failures(rows), section_runs(rows, sweep_dir)]
    for s in sections:
        if s:
            out += [s, ""]
    if plots:
        out += ["## Plots", ""]
        titles = {"batch_size": "Accuracy and time against batch size",
                  "ranks": "Accuracy and time against the number of ranks",
                  "convergence": "Accuracy per epoch and against time, per run",
                  "time_split": "Each run's time split and MB sent per rank",
                  "loss_vs_time": "Training loss against time, per mode"}
        for kind, p in plots.items():
            rel = os.path.relpath(p, sweep_dir)
            out += [f"![{titles.get(kind, kind)}]({rel})", ""]
    out += ["Per-run plots and tables: `scripts/plot/run_report.py <run dir>` (or "
            "`sweep_report.py --run-reports`).", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    p = argparse.ArgumentParser(description="Tabulate and plot a sweep directory.")
    p.add_argument("sweep_dir")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--run-reports", action="store_true",
                   help="also write each run's report.md and plots/ (run_report.py)")
    a = p.parse_args()
    if not os.path.isdir(a.sweep_dir):
        print(f"sweep_report.py: error: '{a.sweep_dir}' is not a directory", file=sys.stderr)
        return 2
    rows = sweepdata.load_sweep(a.sweep_dir)
    if not rows:
        print(f"sweep_report.py: error: no runs in '{a.sweep_dir}' (no subdirectory with "
              "sweep-run.json or config.json)", file=sys.stderr)
        return 1
    if a.run_reports:
        for r in rows:
            run_dir = os.path.join(a.sweep_dir, r["name"])
            run = rundata.Run(run_dir)
            if not (run.config or run.records or run.metrics):
                continue
            plots = {} if a.no_plots else plot_run.plot_run(run_dir)
            with open(os.path.join(run_dir, "report.md"), "w") as f:
                f.write(run_report.build_report(run, plots))
    csv_path = os.path.join(a.sweep_dir, "results.csv")
    write_csv(rows, csv_path)
    plots = {} if a.no_plots else plot_sweep.plot_sweep(
        rows, os.path.join(a.sweep_dir, "plots"), a.sweep_dir)
    md_path = os.path.join(a.sweep_dir, "report.md")
    write_report(a.sweep_dir, rows, plots, md_path)
    print(csv_path)
    print(md_path)
    for path in plots.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
