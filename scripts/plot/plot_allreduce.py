#!/usr/bin/python3
"""Plots allreduce_bench's CSV (--csv): bus bandwidth against message size, one line per
algorithm (a 16-bit transport, "ring/bf16", is its own line), as nccl-tests users read it.

usage: plot_allreduce.py CSV [--out PNG] [--title TEXT]   (default PNG: CSV with .png)
       plot_allreduce.py --table RECORD.txt --out-dir DIR
The second form reads the tables allreduce_bench printed into a benchmark record (the
docs/benchmarks/allreduce-*.txt files, sections headed "## name"), one PNG per section
with at least three sizes, DIR/<record>-<k>.png, titled with the section's name.
Prints the PNG paths. Exits 1 with a one-line error for a missing or malformed input.
"""
import argparse
import csv
import os
import re
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


# A row of allreduce_bench's table: size count algo min avg max algbw busbw [vs_mpi] errors.
TABLE_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+(\S+)\s+(?:[\d.]+\s+){4}([\d.]+)\s")


def read_table_sections(path):
    """[(section title, {algo: [(bytes, busbw)]})] from a benchmark record, in file order."""
    sections, title, lines = [], os.path.basename(path), {}
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                if lines:
                    sections.append((title, lines))
                title, lines = line[3:].strip(), {}
                continue
            m = TABLE_ROW.match(line)
            if m:
                lines.setdefault(m.group(2), []).append((int(m.group(1)), float(m.group(3))))
    if lines:
        sections.append((title, lines))
    if not sections:
        raise ValueError(f"{path}: no allreduce_bench table rows")
    return [(t, {a: sorted(v) for a, v in ls.items()}) for t, ls in sections]


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


def plot_table(path, out_dir):
    try:
        sections = read_table_sections(path)
    except (OSError, ValueError) as e:
        print(f"plot_allreduce.py: error: {e}", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(path))[0]
    for k, (title, lines) in enumerate(sections, start=1):
        if len({p[0] for pts in lines.values() for p in pts}) < 3:
            continue  # one or two sizes: a table says it better than a plot
        out = os.path.join(out_dir, f"{stem}-{k}.png")
        plot(lines, "", out, f"{stem}: {title}"[:90])
        print(out)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--out", help="PNG to write (default: the CSV's name with .png)")
    ap.add_argument("--title")
    ap.add_argument("--table", help="a benchmark record (.txt) with allreduce_bench tables")
    ap.add_argument("--out-dir", help="with --table: where the PNGs go")
    args = ap.parse_args()
    if args.table:
        return plot_table(args.table, args.out_dir or os.path.dirname(args.table))
    if not args.csv:
        ap.error("a CSV or --table RECORD is required")
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
