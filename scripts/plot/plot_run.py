#!/usr/bin/python3
"""Plots one ringtrain run directory: loss and accuracy per epoch, per-rank CPU and memory
over time, network MB/s per rank, and each rank's time per phase as a stacked bar.

usage: plot_run.py RUN_DIR [--out DIR]   (default DIR: RUN_DIR/plots; prints the PNG paths)
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import rundata  # noqa: E402  (scripts/plot is first on the path)

DPI = 110
# Phase colours: compute in blues/greens, communication in oranges/reds, I/O in greys.
PHASE_STYLE = [
    ("data", "data loading", "#9ecae1"),
    ("forward", "forward", "#3182bd"),
    ("backward", "backward", "#08519c"),
    ("allreduce_net", "all-reduce outside MPI waits", "#fd8d3c"),
    ("wait", "blocked in MPI waits\n(slower peers, or the wire\nwhen the network limits)", "#d62728"),
    ("optimizer", "optimizer", "#31a354"),
    ("checkpoint", "checkpoint", "#756bb1"),
    ("eval", "evaluation", "#bdbdbd"),
    ("other", "other / unaccounted", "#f0f0f0"),
]


def _title(run, what):
    c = run.config
    bits = [c.get("model"), c.get("dataset")]
    n = c.get("world_size") or len(run.records) or None
    if n:
        bits.append(f"{n} rank{'s' if n != 1 else ''}")
    if c.get("batch_size"):
        bits.append(f"batch {c['batch_size']}/rank")
    if c.get("allreduce"):
        bits.append(str(c["allreduce"]))
    desc = ", ".join(str(b) for b in bits if b)
    return f"{what}\n{desc}" if desc else what


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _rank_color(i):
    return plt.get_cmap("tab10")(i % 10)


def _rank_style(i):
    """Line style per rank: ranks with identical curves (a ring's ranks, a parameter
    server's workers) would otherwise hide each other under the last one drawn."""
    return ["-", "--", ":", "-."][i % 4]


def plot_loss(run, out_dir):
    rows = run.epoch_series()
    steps0 = run.of_type(min(run.records, default=0), "step")
    if not rows and not steps0:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    spe = None
    if rows and rows[0].get("step") and rows[0].get("epoch"):
        spe = rows[0]["step"] / rows[0]["epoch"]  # steps per epoch
    if steps0 and spe:
        xs = [s["step"] / spe for s in steps0 if s.get("loss") is not None and s.get("step")]
        ys = [s["loss"] for s in steps0 if s.get("loss") is not None and s.get("step")]
        ax.plot(xs, ys, color="#9ecae1", lw=0.8, label="train loss per step (rank 0)")
    for key, label, style in [("train_loss", "train loss (epoch mean)", "o-"),
                              ("test_loss", "test loss", "s--")]:
        pts = [(r["epoch"], r[key]) for r in rows
               if r.get(key) is not None and r.get("epoch") is not None]
        if pts:
            ax.plot(*zip(*pts), style, lw=2, ms=6, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title(_title(run, "Loss per epoch"))
    ax.grid(alpha=0.3)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    fig.tight_layout()
    return _save(fig, out_dir, "loss.png")


def plot_accuracy(run, out_dir):
    rows = run.epoch_series()
    series = []
    for key, label, style in [("train_accuracy", "train accuracy", "o-"),
                              ("test_accuracy", "test accuracy", "s--")]:
        pts = [(r["epoch"], 100 * r[key]) for r in rows
               if r.get(key) is not None and r.get("epoch") is not None]
        if pts:
            series.append((pts, label, style))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for pts, label, style in series:
        ax.plot(*zip(*pts), style, lw=2, ms=6, label=f"{label} (final {pts[-1][1]:.1f}%)")
    epochs = sorted({e for pts, _, _ in series for e, _ in pts})
    if len(epochs) == 1:  # one evaluation: the integer locator would tick 0.945, 0.960, ...
        ax.set_xticks(epochs)
        ax.set_xlim(epochs[0] - 0.5, epochs[0] + 0.5)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(_title(run, "Accuracy per epoch"))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, out_dir, "accuracy.png")


def plot_resources(run, out_dir):
    per_rank = {r: run.of_type(r, "resource") for r in run.records}
    per_rank = {r: v for r, v in per_rank.items() if v}
    if not per_rank:
        return None
    fig, (ax_cpu, ax_mem) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for r, recs in per_rank.items():
        t = [x.get("t") for x in recs]
        cpu = [x.get("cpu_percent") for x in recs]
        rss = [x.get("rss_mb") for x in recs]
        ax_cpu.plot(t, cpu, _rank_style(r), color=_rank_color(r), lw=1.5, label=f"rank {r}")
        ax_mem.plot(t, rss, _rank_style(r), color=_rank_color(r), lw=1.5,
                    label=f"rank {r} RSS")
        peak = [x.get("peak_rss_mb") for x in recs if x.get("peak_rss_mb") is not None]
        if peak:
            ax_mem.axhline(max(peak), color=_rank_color(r), ls=(0, (1, 3)), lw=1,
                           label=f"rank {r} peak {max(peak):.0f} MB")
    threads = run.config.get("threads_per_rank")
    ax_cpu.set_ylabel("CPU (% of one core)")
    title = "CPU and memory per rank over time"
    if threads:
        title += f" ({threads} thread{'s' if threads != 1 else ''}/rank, 100% = one core)"
    ax_cpu.set_title(_title(run, title))
    ax_cpu.set_ylim(bottom=0)
    # Headroom above the highest RSS / peak: flat memory lines otherwise sit on the frame.
    ax_mem.set_ylim(0, ax_mem.get_ylim()[1] * 1.15)
    ax_mem.set_ylabel("resident memory (MB)")
    ax_mem.set_xlabel("time since training start (s)")
    for ax in (ax_cpu, ax_mem):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right", ncol=2)
    fig.tight_layout()
    return _save(fig, out_dir, "resources.png")


def plot_network(run, out_dir):
    per_rank = {r: run.of_type(r, "resource") for r in run.records}
    per_rank = {r: v for r, v in per_rank.items()
                if any(x.get("net_send_mbps") is not None for x in v)}
    if not per_rank:
        return None
    # Sent and received in separate panels: in a ring they are nearly equal and one
    # line would hide the other.
    fig, axes = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, sharey=True)
    for r, recs in per_rank.items():
        t = [x.get("t") for x in recs]
        axes[0].plot(t, [x.get("net_send_mbps") for x in recs], _rank_style(r),
                     color=_rank_color(r), lw=1.6, label=f"rank {r}")
        axes[1].plot(t, [x.get("net_recv_mbps") for x in recs], _rank_style(r),
                     color=_rank_color(r), lw=1.6, label=f"rank {r}")
    axes[0].set_title(_title(run, "Network traffic per rank (all-reduce payload)"))
    axes[0].set_ylabel("sent (MB/s)")
    axes[1].set_ylabel("received (MB/s)")
    axes[1].set_xlabel("time since training start (s)")
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=4, loc="lower right")
    fig.tight_layout()
    return _save(fig, out_dir, "network.png")


def phase_breakdown(totals):
    """Seconds per displayed phase for one rank: all-reduce split into transfer and wait,
    and `other` = wall time the phases do not cover (start-up, logging, skew). With overlap
    the all-reduce counts only with its exposed part (the rest ran beside backward)."""
    ph = totals.get("phases_s") or {}
    out = {}
    for key in ("data", "forward", "backward", "optimizer", "checkpoint", "eval"):
        out[key] = ph.get(key) or 0.0
    ar, wait = ph.get("allreduce") or 0.0, ph.get("wait") or 0.0
    exposed = ph.get("exposed_comm")
    if exposed is not None and ar > 0:
        # Overlapped: only the exposed part of the all-reduce is on the rank's wall clock;
        # its waiting and transfer are taken in the all-reduce's own proportion.
        wait *= min(exposed / ar, 1.0)
        ar = exposed
    out["wait"] = min(wait, ar) if ar else wait
    out["allreduce_net"] = max(ar - wait, 0.0)
    wall = totals.get("wall_s") or 0.0
    out["other"] = max(wall - sum(out.values()), 0.0)
    return out


def plot_phases(run, out_dir):
    s = run.summary()
    ranks = [r for r in s["ranks"] if any(v for v in (r.get("phases_s") or {}).values())]
    if not ranks:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(ranks) + 4.5), 5))
    labels = [f"rank {r['rank']}" + (f"\n{r['host']}" if r.get("host") else "")
              for r in ranks]
    bottoms = [0.0] * len(ranks)
    breakdowns = [phase_breakdown(r) for r in ranks]
    wait_logged = any((r.get("phases_s") or {}).get("wait") is not None for r in ranks)
    for key, label, color in PHASE_STYLE:
        if key == "allreduce_net" and not wait_logged:
            label = "all-reduce (incl. any waiting)"
        vals = [b[key] for b in breakdowns]
        if not any(v > 0.002 * max(r.get("wall_s") or 0.0, 1e-9) for v, r in zip(vals, ranks)):
            continue  # invisible at this scale: keep it out of the legend too
        ax.bar(labels, vals, bottom=bottoms, color=color, edgecolor="#555555", lw=0.5,
               label=label, width=0.6)
        for i, (b, v) in enumerate(zip(bottoms, vals)):
            wall = ranks[i].get("wall_s") or 0.0
            if wall and v / wall >= 0.06:  # label segments tall enough to hold text
                dark = color in ("#3182bd", "#08519c", "#d62728", "#756bb1", "#31a354")
                ax.text(i, b + v / 2, f"{100 * v / wall:.0f}%", ha="center", va="center",
                        fontsize=9, color="white" if dark else "black")
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, r in enumerate(ranks):
        total = r.get("wall_s") or bottoms[i]
        ax.text(i, bottoms[i], f"{total:.1f} s", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("time (s)")
    ax.set_ylim(0, max(bottoms) * 1.12 if max(bottoms) > 0 else 1)
    ax.set_title(_title(run, "Where each rank's time went"))
    ax.grid(axis="y", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    # Legend top-down in the stack's visual order (last phase on top).
    ax.legend(handles[::-1], names[::-1], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), title="phase (% of wall time)", title_fontsize=8)
    fig.tight_layout()
    return _save(fig, out_dir, "phases.png")


def plot_run(run_dir, out_dir=None):
    """Writes every plot the run's data supports; returns {kind: path}."""
    run = rundata.Run(run_dir)
    out_dir = out_dir or os.path.join(run_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    made = {}
    for kind, fn in [("loss", plot_loss), ("accuracy", plot_accuracy),
                     ("resources", plot_resources), ("network", plot_network),
                     ("phases", plot_phases)]:
        path = fn(run, out_dir)
        if path:
            made[kind] = path
    return made


def main():
    p = argparse.ArgumentParser(description="Plot one ringtrain run directory.")
    p.add_argument("run_dir")
    p.add_argument("--out", help="output directory (default RUN_DIR/plots)")
    a = p.parse_args()
    if not os.path.isdir(a.run_dir):
        print(f"plot_run.py: error: '{a.run_dir}' is not a directory", file=sys.stderr)
        return 2
    made = plot_run(a.run_dir, a.out)
    if not made:
        print(f"plot_run.py: error: nothing to plot in '{a.run_dir}' "
              "(no metrics.csv and no rank-*.jsonl)", file=sys.stderr)
        return 1
    for path in made.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
