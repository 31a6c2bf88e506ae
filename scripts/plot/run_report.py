#!/usr/bin/python3
"""Writes RUN_DIR/report.md for one ringtrain run: configuration, results, per-rank time
split, resources and traffic, accuracy per epoch, and the run's plots (RUN_DIR/plots/).

usage: run_report.py RUN_DIR [--no-plots]
"""
import argparse
import os
import sys

import plot_run
import rundata
from rundata import fmt, pct, table


def membership_section(records):
    """run.sh --elastic's restarts: who left and joined, rank counts, steps replayed, time lost."""
    restarts = [r for r in records if r.get("type") == "restart"]
    start = next((r for r in records if r.get("type") == "start"), None)
    if not restarts and not start:
        return []
    out = ["## Membership (elastic launches)", ""]
    if start:
        out += [f"Started on {len(start.get('hosts') or [])} host(s) at np {fmt(start.get('np'))} "
                f"(--min-np {fmt(start.get('min_np'))}, --max-np {fmt(start.get('max_np'))}); "
                f"{len(restarts)} restart(s).", ""]
    if restarts:
        body = [[fmt(r.get("restart")), fmt(r.get("detected_utc")), fmt(r.get("exit_status")),
                 ", ".join(r.get("hosts_out") or []) or "-", ", ".join(r.get("hosts_in") or []) or "-",
                 f"{fmt(r.get('np_before'))} -> {fmt(r.get('np_after'))}", fmt(r.get("resumed_from_step")),
                 fmt(r.get("steps_replayed")), fmt(rundata.num(r.get("seconds_lost")), 2)] for r in restarts]
        out += [table(["Restart", "Detected (UTC)", "Exit status", "Hosts out", "Hosts in", "Ranks",
                       "Resumed from step", "Steps replayed", "Seconds lost"], body), "",
                "*Seconds lost*: from the failed launch's last logged step to the first step of the "
                "relaunch; *steps replayed*: steps the failed launch had done past the state the "
                "relaunch resumed from.", ""]
    return out


def build_report(run, plots):
    s = run.summary()
    c = run.config
    out = [f"# Run report: {run.name}", ""]
    if not s.get("complete"):
        out += ["> **Incomplete run**: no summary.json (the run failed, was killed or is "
                "still going). Totals below are derived from the rank logs up to their last "
                "record.", ""]
    cfg_rows = []
    for key, label in [("model", "Model"), ("dataset", "Dataset"), ("world_size", "Ranks"),
                       ("hosts", "Hosts"), ("threads_per_rank", "Threads per rank"),
                       ("batch_size", "Batch size per rank"),
                       ("global_batch_size", "Global batch size"), ("epochs", "Epochs"),
                       ("allreduce", "All-reduce"), ("lr", "Learning rate"),
                       ("checkpoint_every", "Checkpoint every")]:
        v = c.get(key)
        if v is None:
            continue
        if key == "hosts" and isinstance(v, list):
            counts = {}
            for h in v:
                counts[h] = counts.get(h, 0) + 1
            v = ", ".join(f"{h} ({n} rank{'s' if n != 1 else ''})" for h, n in counts.items())
        cfg_rows.append([label, v])
    versions = c.get("versions")
    if isinstance(versions, dict) and versions:
        cfg_rows.append(["Versions", ", ".join(f"{k} {v}" for k, v in versions.items())])
    if cfg_rows:
        out += ["## Configuration", "", table(["Setting", "Value"], cfg_rows), ""]

    acc = rundata.num(s.get("final_test_accuracy"))
    res_rows = [
        ["Wall time (s)", fmt(rundata.num(s.get("wall_s")), 2)],
        ["Final training loss", fmt(rundata.num(s.get("final_train_loss")), 4)],
        ["Final test loss", fmt(rundata.num(s.get("final_test_loss")), 4)],
        ["Final test accuracy (%)", pct(acc, 2)],
        ["Test error (%)", pct(None if acc is None else 1 - acc, 2)],
        ["Throughput (images/s, all ranks)", fmt(rundata.num(s.get("images_per_s")), 1)],
        ["Epochs completed", fmt(s.get("epochs_completed"))],
        ["Steps", fmt(s.get("steps"))],
        ["Stopped by", fmt(s.get("stopped_by"))],
        ["Time to target accuracy (s)", fmt(rundata.num(s.get("time_to_target_s")), 2)],
    ]
    out += ["## Results", "", table(["", "Value"], [r for r in res_rows if r[1] != ""]), ""]

    ranks = s["ranks"]
    if ranks:
        body = []
        for r in ranks:
            ph = plot_run.phase_breakdown(r)
            wall = r.get("wall_s")
            cells = [str(r["rank"]), fmt(r.get("host")), fmt(wall, 2)]
            for key in ("data", "forward", "backward", "allreduce_net", "wait", "optimizer",
                        "checkpoint", "eval", "other"):
                v = ph.get(key)
                cells.append("" if v is None or not wall else
                             f"{v:.2f} ({100 * v / wall:.0f}%)")
            body.append(cells)
        out += ["## Where the time went (seconds, share of the rank's wall time)", "",
                "*Waiting* is the time the rank was blocked in MPI waits inside the all-reduce: "
                "waiting for slower peers, and also the transfer itself when the network is the "
                "limit (a balanced ring on a slow link shows most of its all-reduce here). "
                "*All-reduce* is the rest of the all-reduce (reducing, copying, posting "
                "messages); *other* is wall time no phase accounts for (start-up, logging). "
                "With overlap (`--overlap on`) both count only the exposed part of the "
                "all-reduce, the part backward did not hide.",
                "", table(["Rank", "Host", "Wall (s)", "Data", "Forward", "Backward",
                           "All-reduce", "Waiting", "Optimizer", "Checkpoint", "Eval",
                           "Other"], body), ""]
        hidden = [r for r in ranks if r.get("hidden_comm_share") is not None]
        if hidden:
            body = []
            for r in hidden:
                ph = r.get("phases_s") or {}
                body.append([str(r["rank"]), fmt(ph.get("allreduce"), 2), fmt(ph.get("exposed_comm"), 2),
                             pct(r["hidden_comm_share"], 1)])
            out += ["## Communication hidden by backward", "",
                    "All-reduce: the seconds of every step's communication (loss agreement and "
                    "gradient buckets); exposed: the part that ran after backward had finished, "
                    "which the step waited for; hidden: the share that ran beside backward "
                    f"(overlap {'on' if run.config.get('overlap_active') else 'off'} in this run).",
                    "", table(["Rank", "All-reduce (s)", "Exposed (s)", "Hidden (%)"], body), ""]
        body = [[str(r["rank"]), fmt(r.get("images_per_s"), 1), fmt(r.get("peak_rss_mb"), 1),
                 fmt(r.get("mean_cpu_percent"), 1), fmt(r.get("mb_sent"), 2),
                 fmt(r.get("mb_received"), 2)] for r in ranks]
        out += ["## Resources and traffic per rank", "",
                table(["Rank", "Images/s", "Peak memory (MB)", "Mean CPU (%)", "MB sent",
                       "MB received"], body), ""]

    rows = run.epoch_series()
    if rows:
        body = [[fmt(int(m["epoch"])) if m.get("epoch") is not None else "",
                 fmt(m.get("train_loss"), 4), pct(m.get("train_accuracy"), 2),
                 fmt(m.get("test_loss"), 4), pct(m.get("test_accuracy"), 2),
                 fmt(m.get("elapsed_s"), 1), fmt(m.get("images_per_s"), 0)] for m in rows]
        out += ["## Per epoch", "", table(["Epoch", "Train loss", "Train acc. (%)",
                                           "Test loss", "Test acc. (%)", "Elapsed (s)",
                                           "Images/s"], body), ""]

    ckpts = run.of_type(0, "checkpoint")
    if ckpts:
        total = sum(rundata.num(x.get("seconds")) or 0.0 for x in ckpts)
        size = rundata.num(ckpts[-1].get("bytes"))
        wall = rundata.num(s.get("wall_s"))
        line = (f"{len(ckpts)} checkpoint(s), {total:.2f} s in total"
                + (f" ({100 * total / wall:.1f}% of the wall time)" if wall else "")
                + (f", {size / 1e6:.2f} MB each" if size else "") + ".")
        out += ["## Checkpoints", "", line, ""]

    out += membership_section(run.membership)

    events = [e for r in run.records for e in run.of_type(r, "event")]
    if events:
        out += ["## Events", ""]
        out += [f"- t={fmt(rundata.num(e.get('t')), 1)} s: {e.get('message', '')}"
                for e in events[:50]]
        out.append("")

    titles = {"loss": "Loss per epoch", "accuracy": "Accuracy per epoch",
              "resources": "CPU and memory per rank", "network": "Network per rank",
              "phases": "Time per phase per rank"}
    if plots:
        out += ["## Plots", ""]
        for kind, path in plots.items():
            out += [f"![{titles.get(kind, kind)}]({os.path.relpath(path, run.dir)})", ""]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description="Write report.md for one run directory.")
    p.add_argument("run_dir")
    p.add_argument("--no-plots", action="store_true")
    a = p.parse_args()
    if not os.path.isdir(a.run_dir):
        print(f"run_report.py: error: '{a.run_dir}' is not a directory", file=sys.stderr)
        return 2
    run = rundata.Run(a.run_dir)
    if not (run.config or run.records or run.metrics):
        print(f"run_report.py: error: '{a.run_dir}' has no config.json, metrics.csv or "
              "rank-*.jsonl", file=sys.stderr)
        return 1
    plots = {} if a.no_plots else plot_run.plot_run(a.run_dir)
    path = os.path.join(a.run_dir, "report.md")
    with open(path, "w") as f:
        f.write(build_report(run, plots))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
