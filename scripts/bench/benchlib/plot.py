"""--plot FILE.png: one bar per row of a comparison, its paired ratio's median with the
rounds' range as the error bar, and the line at 1 (no difference)."""
import os
import statistics


def ratios(path, title, labels, ratio_lists, ylabel):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kept = [(l, r) for l, r in zip(labels, ratio_lists) if r]
    if not kept:
        return
    med = [statistics.median(r) for _, r in kept]
    err = [[m - min(r) for m, (_, r) in zip(med, kept)], [max(r) - m for m, (_, r) in zip(med, kept)]]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(kept)), 3.5))
    ax.bar(range(len(kept)), med, yerr=err, capsize=4, color="tab:blue")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(kept)), [l for l, _ in kept], rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # --plot OUT/x.png before OUT exists
    fig.savefig(path, dpi=120)
