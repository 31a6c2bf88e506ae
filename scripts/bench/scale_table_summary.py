#!/usr/bin/env python3
"""Per cell group of an allreduce_sim --scale-table (docs/benchmarks/allreduce-sim-scale.md):
how many cells at >= 1 MiB have auto within FACTOR of the bound, the worst such cell, and
auto against the fastest over all sizes.

Reads the markdown rows (a whole doc or a bare table; rows that are not table cells are
skipped) and prints one line per (ranks per node, Gbit/s) group, then the cells at >= 1 MiB
over FACTOR.

With --before OLD.md, also the cells whose auto pick changed against OLD (same grid), with
auto's time and auto / bound before and after.

usage: scale_table_summary.py TABLE.md [--factor 1.5] [--per-node 1] [--before OLD.md]
"""
import argparse
import re

ROW = re.compile(r"^\| (\d+) \| (\d+) \| (\d+) (KiB|MiB) \| ([\d.]+) \| ([^|]+) \| ([\d.]+) \| ([^|]+) \| ([\d.]+) \| "
                 r"([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|")


def cells(path):
    for line in open(path):
        m = ROW.match(line)
        if not m:
            continue
        ranks, per_node, size, unit, gbit = int(m[1]), int(m[2]), int(m[3]), m[4], float(m[5])
        yield {
            "ranks": ranks, "per_node": per_node, "mib": size if unit == "MiB" else size / 1024, "gbit": gbit,
            "label": f"{ranks} ranks, {size} {unit}", "auto": m[6].strip(), "auto_us": float(m[7]),
            "auto_fastest": float(m[10]), "auto_bound": float(m[13]),
        }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("table")
    parser.add_argument("--factor", type=float, default=1.5)
    parser.add_argument("--per-node", type=int, default=None)
    parser.add_argument("--before", default=None)
    args = parser.parse_args()
    rows = [c for c in cells(args.table) if args.per_node is None or c["per_node"] == args.per_node]
    if not rows:
        raise SystemExit(f"{args.table}: no scale-table rows")
    groups = sorted({(c["per_node"], c["gbit"]) for c in rows})
    print("per_node gbit  auto_within_bound(>=1MiB)  worst_auto/bound  worst_auto/fastest(all sizes)")
    for per_node, gbit in groups:
        group = [c for c in rows if (c["per_node"], c["gbit"]) == (per_node, gbit)]
        big = [c for c in group if c["mib"] >= 1]
        met = sum(c["auto_bound"] <= args.factor for c in big)
        worst = max(big, key=lambda c: c["auto_bound"])
        worst_fast = max(group, key=lambda c: c["auto_fastest"])
        print(f"{per_node:8d} {gbit:4g}  {met:3d} / {len(big):3d}  {worst['auto_bound']:.2f} ({worst['label']}, "
              f"{worst['auto']})  {worst_fast['auto_fastest']:.2f} ({worst_fast['label']})")
    print(f"cells at >= 1 MiB over {args.factor}x the bound:")
    for c in rows:
        if c["mib"] >= 1 and c["auto_bound"] > args.factor:
            print(f"  {c['per_node']} per node, {c['gbit']:g} Gbit/s, {c['label']}: auto {c['auto']} "
                  f"{c['auto_us']:g} us, {c['auto_bound']:.2f}x the bound")
    if args.before:
        old = {(c["per_node"], c["gbit"], c["label"]): c for c in cells(args.before)}
        changed = [(old[(c["per_node"], c["gbit"], c["label"])], c) for c in rows
                   if (c["per_node"], c["gbit"], c["label"]) in old and old[(c["per_node"], c["gbit"], c["label"])]["auto"] != c["auto"]]
        print(f"auto's pick changed against {args.before} in {len(changed)} cells:")
        for a, c in changed:
            print(f"  {c['per_node']} per node, {c['gbit']:g} Gbit/s, {c['label']}: {a['auto']} {a['auto_us']:g} us "
                  f"({a['auto_bound']:.2f}x the bound) -> {c['auto']} {c['auto_us']:g} us ({c['auto_bound']:.2f}x)")


if __name__ == "__main__":
    main()
