#!/usr/bin/python3
"""Plots allreduce_bench's CSV (--csv): bus bandwidth against message size, one line per
algorithm (a 16-bit transport, "ring/bf16", is its own line), as nccl-tests users read it.

usage: plot_allreduce.py CSV [--out PNG] [--title TEXT]   (default PNG: CSV with .png)
Prints the PNG path. Exits 1 with a one-line error for a missing or malformed CSV.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REQUIRED = ("bytes", "algo", "ranks", "busbw_gbs")


def read_rows(path):
    """{algo: [(bytes, busbw GB/s), ...] sorted by size} and the rank count."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not an allreduce_bench CSV (missing column(s) {', '.join(missing)})")
        lines, ranks = {}, set()
        for n, row in enumerate(reader, start=2):
            try:
                size, busbw = int(row["bytes"]), float(row["busbw_gbs"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{n}: bytes and busbw_gbs must be numbers")
            lines.setdefault(row["algo"], []).append((size, busbw))
            ranks.add(row["ranks"])
    if not lines:
        raise ValueError(f"{path}: no rows")
    return {a: sorted(v) for a, v in lines.items()}, ",".join(sorted(ranks))


def size_label(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return str(b)


def plot(lines, ranks, out, title):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for algo, points in lines.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3, label=algo)
    sizes = sorted({p[0] for pts in lines.values() for p in pts})
    ax.set_xscale("log", base=2)
    step = max(1, len(sizes) // 10)
    ax.set_xticks(sizes[::step])
    ax.set_xticklabels([size_label(s) for s in sizes[::step]], rotation=45)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s, algbw x 2(N-1)/N)")
    ax.set_title(title or f"allreduce_bench, {ranks} ranks")
    ax.set_ylim(bottom=0)  # from zero: a 0.4% difference must not look like a gap
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--out", help="PNG to write (default: the CSV's name with .png)")
    ap.add_argument("--title")
    args = ap.parse_args()
    try:
        lines, ranks = read_rows(args.csv)
    except (OSError, ValueError) as e:
        print(f"plot_allreduce.py: error: {e}", file=sys.stderr)
        return 1
    out = args.out or os.path.splitext(args.csv)[0] + ".png"
    plot(lines, ranks, out, args.title)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
