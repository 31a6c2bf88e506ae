#!/usr/bin/python3
"""Plots a sweep directory: test accuracy and training time against batch size and against
the number of ranks, one line per combination of the other grid parameters (mean over
repeats, the error bars one standard deviation), and each run's accuracy per epoch and
against wall time (convergence, time to accuracy).

Also each run's time split (compute, all-reduce, MPI waits; mean over ranks) next to the MB
each rank sent: the picture of parameter server vs ring and of a slow network; and, when the
sweep has more than one training mode, the training loss against time of each mode (sync vs
async: the asynchronous curves are noisier and, with a straggler, further along in time).

usage: plot_sweep.py SWEEP_DIR [--out DIR]   (default DIR: SWEEP_DIR/plots)
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator  # noqa: E402

import rundata  # noqa: E402  (scripts/plot is first on the path)
import sweepdata  # noqa: E402

DPI = 110
MARKERS = "osD^vP*X"


def _series_label(g, keys, batch_word):
    parts = []
    for k, title in keys:
        v = g.get(k)
        if k == "ranks":
            parts.append(f"{v} rank{'s' if v != 1 else ''}")
        elif k == "batch_size":
            parts.append(f"batch {v} ({batch_word})")
        elif k == "ppn":
            parts.append(f"{v}/node")
        elif k == "checkpoint":
            parts.append(f"checkpoint {v}")
        else:
            parts.append(str(v))
    return ", ".join(parts) or "all runs"


def plot_against(rows, x_key, x_label, out_path, title):
    """Two panels over x_key (accuracy %, time s); None when x_key has < 2 values."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get(x_key) is not None]
    xs_all = sorted({r[x_key] for r in ok})
    if len(xs_all) < 2:
        return None
    others = sweepdata.varying(ok, exclude=(x_key, "repeat"))
    other_keys = [k for k, _ in others]
    groups = sweepdata.aggregate(ok, other_keys + [x_key])
    series = {}
    for g in groups:
        series.setdefault(tuple(g.get(k) for k in other_keys), []).append(g)
    scaling = ok[0].get("scaling") or "weak"
    batch_word = "global" if scaling == "strong" else "per-rank"
    fig, (ax_acc, ax_t) = plt.subplots(1, 2, figsize=(11, 4.6))
    # Numeric order (32, 64, ..., 1024), not the order of the strings ("1024" < "32").
    ordered = sorted(series.items(),
                     key=lambda kv: tuple(sweepdata._sort_key(v) for v in kv[0]))
    for i, (skey, pts) in enumerate(ordered):
        pts.sort(key=lambda g: g[x_key])
        x = [g[x_key] for g in pts]
        label = _series_label(dict(zip(other_keys, skey)), others, batch_word)
        color = plt.get_cmap("tab10")(i % 10)
        m = MARKERS[i % len(MARKERS)]
        acc = [None if g.get("test_accuracy") is None else 100 * g["test_accuracy"] for g in pts]
        acc_sd = [None if g.get("test_accuracy_sd") is None else 100 * g["test_accuracy_sd"]
                  for g in pts]
        wall = [g.get("wall_s") for g in pts]
        wall_sd = [g.get("wall_s_sd") for g in pts]
        for ax, ys, sds in ((ax_acc, acc, acc_sd), (ax_t, wall, wall_sd)):
            pairs = [(a, b, c or 0.0) for a, b, c in zip(x, ys, sds) if b is not None]
            if not pairs:
                continue
            px, py, pe = zip(*pairs)
            ax.errorbar(px, py, yerr=pe if any(pe) else None, fmt=m + "-", color=color,
                        lw=2, ms=6, capsize=3, label=label)
    for ax in (ax_acc, ax_t):
        if x_key == "batch_size":
            ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(xs_all))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(v) for v in xs_all])
        ax.set_xlabel(x_label if x_key != "batch_size" else f"{x_label} ({batch_word})")
        ax.grid(alpha=0.3)
    ax_acc.set_ylabel("final test accuracy (%)")
    ax_acc.set_title("Accuracy")
    ax_t.set_ylabel("training wall time (s)")
    ax_t.set_ylim(bottom=0)
    ax_t.set_title("Time")
    handles, labels = ax_t.get_legend_handles_labels()
    if len(handles) > 1 or others:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(handles)),
                   fontsize=9, frameon=False)
    model = ok[0].get("model") or ""
    dataset = ok[0].get("dataset") or ""
    fig.suptitle(f"{title}\n{model} on {dataset}, {scaling} scaling{_epochs_note(ok)}".strip())
    fig.tight_layout(rect=(0, 0.08 if len(handles) > 1 or others else 0, 1, 1))
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)
    return out_path


def _epochs_note(rows):
    """', N epochs' when every run trained the same number of epochs (what the time is of)."""
    epochs = {r.get("epochs_completed") for r in rows}
    if len(epochs) != 1 or None in epochs:
        return ""
    (n,) = epochs
    return f", {n} epoch{'s' if n != 1 else ''} per run"


MAX_CURVES = 12
LINESTYLES = ["-", "--", ":", "-."]


def plot_convergence(rows, sweep_dir, out_path):
    """Test accuracy per epoch and against wall time, one line per run (first repeat):
    convergence rate and time to accuracy. None with < 2 such runs or too many to read."""
    ok = [r for r in rows if r.get("status") == "ok" and (r.get("repeat") or 1) == 1]
    if len(ok) < 2 or len(ok) > MAX_CURVES:
        return None
    others = sweepdata.varying(ok, exclude=("repeat",))
    scaling = ok[0].get("scaling") or "weak"
    batch_word = "global" if scaling == "strong" else "per rank"
    fig, (ax_e, ax_t) = plt.subplots(1, 2, figsize=(11, 4.8), sharey=True)
    # Two varying parameters (e.g. batch size and ranks): colour and marker by the first,
    # line style by the second, so runs sharing a value read as one family.
    styled = len(others) == 2 and len({str(r.get(others[1][0])) for r in ok}) <= len(LINESTYLES)
    if styled:
        firsts = sorted({r.get(others[0][0]) for r in ok}, key=sweepdata._sort_key)
        seconds = sorted({r.get(others[1][0]) for r in ok}, key=sweepdata._sort_key)
    drawn = most_points = 0
    for i, r in enumerate(ok):
        series = rundata.Run(os.path.join(sweep_dir, r["name"])).epoch_series()
        pts = [(m.get("epoch"), m.get("elapsed_s"), m.get("test_accuracy")) for m in series]
        pts = [p for p in pts if p[0] is not None and p[2] is not None]
        if not pts:
            continue
        most_points = max(most_points, len(pts))
        label = _series_label(r, others, batch_word) if others else r["name"]
        if styled:
            ci = firsts.index(r.get(others[0][0]))
            color = plt.get_cmap("tab10")(ci % 10)
            ls = LINESTYLES[seconds.index(r.get(others[1][0]))]
            m = MARKERS[ci % len(MARKERS)]
        else:
            color = plt.get_cmap("tab10")(i % 10)
            ls = "-" if i < 10 else "--"
            m = MARKERS[i % len(MARKERS)]
        ax_e.plot([p[0] for p in pts], [100 * p[2] for p in pts], m + ls, color=color,
                  lw=1.8, ms=5, label=label)
        timed = [p for p in pts if p[1] is not None]
        if timed:
            ax_t.plot([p[1] for p in timed], [100 * p[2] for p in timed], m + ls,
                      color=color, lw=1.8, ms=5)
        drawn += 1
    if drawn < 2 or most_points < 2:  # one evaluation per run: no curve to compare
        plt.close(fig)
        return None
    ax_e.set_xlabel("epoch")
    ax_e.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_e.set_ylabel("test accuracy (%)")
    ax_e.set_title("Accuracy per epoch (convergence rate)")
    ax_t.set_xlabel("wall time since training start (s)")
    ax_t.set_title("Accuracy against time (time to accuracy)")
    ax_t.set_xlim(left=0)
    for ax in (ax_e, ax_t):
        ax.grid(alpha=0.3)
    handles, labels = ax_e.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(handles)), fontsize=9,
               frameon=False)
    rows_of_legend = (len(handles) + 3) // 4
    fig.suptitle(f"Convergence of each run\n{ok[0].get('model') or ''} on "
                 f"{ok[0].get('dataset') or ''}, {scaling} scaling")
    fig.tight_layout(rect=(0, 0.05 + 0.04 * rows_of_legend, 1, 1))
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)
    return out_path


# Parts of a run's time in plot_time_split, from plot_run.phase_breakdown's keys.
SPLIT = [("data", ("data",), "waiting for data (loading not done ahead)", "#9ecae1"),
         ("compute", ("forward", "backward", "optimizer"), "compute (forward, backward, optimizer)", "#3182bd"),
         ("allreduce_net", ("allreduce_net",), "all-reduce outside MPI waits", "#fd8d3c"),
         ("wait", ("wait",), "blocked in MPI waits (slower peers, or the wire)", "#d62728"),
         ("rest", ("eval", "checkpoint", "other"), "evaluation, checkpoints, other", "#bdbdbd")]


def plot_time_split(rows, sweep_dir, out_path):
    """Per run (first repeat): wall time split into SPLIT (mean over ranks), and MB sent
    by each rank. None without a multi-rank run or with too many runs to read."""
    import plot_run  # here: plot_run imports matplotlib's pyplot too, only needed now

    ok = [r for r in rows if r.get("status") == "ok" and (r.get("repeat") or 1) == 1]
    if not ok or len(ok) > MAX_CURVES or not any((r.get("ranks") or 1) > 1 for r in ok):
        return None
    others = sweepdata.varying(ok, exclude=("repeat",))
    scaling = ok[0].get("scaling") or "weak"
    batch_word = "global" if scaling == "strong" else "per rank"
    labels, splits, sent = [], [], []
    for r in ok:
        ranks = rundata.Run(os.path.join(sweep_dir, r["name"])).summary()["ranks"]
        parts = [plot_run.phase_breakdown(x) for x in ranks if x.get("wall_s")]
        if not parts:
            continue
        splits.append({k: sum(sum(p.get(s, 0.0) for s in keys) for p in parts) / len(parts)
                       for k, keys, _, _ in SPLIT})
        sent.append([x.get("mb_sent") for x in ranks])
        labels.append(_series_label(r, others, batch_word) if others else r["name"])
    if not labels:
        return None
    n = len(labels)
    fig, (ax_t, ax_mb) = plt.subplots(1, 2, figsize=(12, 2.6 + 0.55 * n),
                                      gridspec_kw={"width_ratios": [3, 2]}, sharey=True)
    ys = list(range(n))[::-1]  # first run on top
    left = [0.0] * n
    for key, _, label, color in SPLIT:
        vals = [s[key] for s in splits]
        ax_t.barh(ys, vals, left=left, color=color, edgecolor="#555555", lw=0.5, height=0.6,
                  label=label)
        left = [a + b for a, b in zip(left, vals)]
    for y, total in zip(ys, left):
        ax_t.text(total, y, f" {total:.1f} s", va="center", fontsize=9)
    ax_t.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    ax_t.set_yticks(ys)
    ax_t.set_yticklabels(labels)
    ax_t.set_xlabel("wall time per rank (s, mean over ranks)")
    ax_t.set_title("Where the time went")
    width = max(len(s) for s in sent)
    h = 0.7 / width
    for k in range(width):
        vals = [s[k] if k < len(s) and s[k] is not None else 0.0 for s in sent]
        ax_mb.barh([y + 0.35 - h * (k + 0.5) for y in ys], vals, height=h,
                   color=plt.get_cmap("tab10")(k % 10), label=f"rank {k}")
    ax_mb.set_xlabel("MB sent during training")
    ax_mb.set_title("Traffic per rank (rank 0 on top)")
    for ax in (ax_t, ax_mb):
        ax.grid(axis="x", alpha=0.3)
    # Ranks are told apart in their own panel; the phases' legend goes under both.
    ax_mb.legend(fontsize=8, loc="lower right")
    handles, names = ax_t.get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=9, frameon=False)
    legend_rows = (len(handles) + 1) // 2
    fig.suptitle(f"Time and traffic of each run\n{ok[0].get('model') or ''} on "
                 f"{ok[0].get('dataset') or ''}, {scaling} scaling{_epochs_note(ok)}")
    fig.tight_layout(rect=(0, (0.1 + 0.25 * legend_rows) / fig.get_figheight(), 1, 1))
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)
    return out_path


def plot_loss_vs_time(rows, sweep_dir, out_path):
    """Training loss against wall time, one line per mode (first repeat of each run): every
    step record of the training ranks (an async run's workers all together). None unless the
    sweep has two or more modes."""
    ok = [r for r in rows if r.get("status") == "ok" and (r.get("repeat") or 1) == 1]
    if len({r.get("mode") for r in ok}) < 2 or len(ok) > MAX_CURVES:
        return None
    others = sweepdata.varying(ok, exclude=("mode", "allreduce", "repeat"))
    scaling = ok[0].get("scaling") or "weak"
    batch_word = "global" if scaling == "strong" else "per rank"
    fig, ax = plt.subplots(figsize=(9, 5))
    drawn = 0
    for i, r in enumerate(ok):
        pts = rundata.Run(os.path.join(sweep_dir, r["name"])).loss_over_time()
        if len(pts) < 2:
            continue
        label = str(r.get("mode"))
        if others:
            label += ", " + _series_label(r, others, batch_word)
        color = plt.get_cmap("tab10")(i % 10)
        ts, losses = [p[0] for p in pts], [p[1] for p in pts]
        # Each record faint (the noise is part of the comparison), and a running mean over
        # about a fortieth of the run on top so that the modes can be told apart.
        ax.plot(ts, losses, "-", color=color, lw=0.5, alpha=0.2)
        w = max(1, len(pts) // 40)
        cum = [0.0]
        for v in losses:
            cum.append(cum[-1] + v)
        mean = [(cum[j + 1] - cum[max(0, j + 1 - w)]) / (j + 1 - max(0, j + 1 - w))
                for j in range(len(losses))]
        ax.plot(ts, mean, LINESTYLES[(i // 10) % 4], color=color, lw=1.8, label=label)
        drawn += 1
    if drawn < 2:
        plt.close(fig)
        return None
    ax.set_xlabel("wall time since training start (s)")
    ax.set_ylabel("training loss (faint: each step record; line: running mean)")
    ax.set_xlim(left=0)
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9)
    ax.set_title(f"Training loss against time, per mode\n{ok[0].get('model') or ''} on "
                 f"{ok[0].get('dataset') or ''}")
    fig.tight_layout()
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)
    return out_path


def plot_sweep(rows, out_dir, sweep_dir=None):
    os.makedirs(out_dir, exist_ok=True)
    made = {}
    p = plot_against(rows, "batch_size", "batch size",
                     os.path.join(out_dir, "vs_batch_size.png"),
                     "Accuracy and time against batch size")
    if p:
        made["batch_size"] = p
    p = plot_against(rows, "ranks", "number of ranks", os.path.join(out_dir, "vs_ranks.png"),
                     "Accuracy and time against the number of ranks")
    if p:
        made["ranks"] = p
    if sweep_dir:
        p = plot_convergence(rows, sweep_dir, os.path.join(out_dir, "convergence.png"))
        if p:
            made["convergence"] = p
        p = plot_time_split(rows, sweep_dir, os.path.join(out_dir, "time_split.png"))
        if p:
            made["time_split"] = p
        p = plot_loss_vs_time(rows, sweep_dir, os.path.join(out_dir, "loss_vs_time.png"))
        if p:
            made["loss_vs_time"] = p
    return made


def main():
    p = argparse.ArgumentParser(description="Plot a sweep directory.")
    p.add_argument("sweep_dir")
    p.add_argument("--out", help="output directory (default SWEEP_DIR/plots)")
    a = p.parse_args()
    if not os.path.isdir(a.sweep_dir):
        print(f"plot_sweep.py: error: '{a.sweep_dir}' is not a directory", file=sys.stderr)
        return 2
    rows = sweepdata.load_sweep(a.sweep_dir)
    made = plot_sweep(rows, a.out or os.path.join(a.sweep_dir, "plots"), a.sweep_dir)
    for path in made.values():
        print(path)
    if not made:
        print("plot_sweep.py: nothing to plot (needs >= 2 successful batch sizes or rank "
              "counts)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
