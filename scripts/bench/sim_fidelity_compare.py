#!/usr/bin/env python3
"""Compares the simulator's committed fidelity predictions with measured allreduce_bench CSVs.

usage: sim_fidelity_compare.py PREDICTIONS.csv MEASURED_DIR

PREDICTIONS.csv is allreduce_sim --fidelity-grid's output (lines starting with '#' are
comments). MEASURED_DIR holds one allreduce_bench --csv file per cell group, named
<layout>-<delay>.csv (delay as cluster.sh --delay took it: 0, 250us, 1ms). Prints one row
per measured (layout, delay, size, algorithm) with the relative error (predicted /
measured - 1), then per size band the median and max absolute error against issue 22's
targets, and exits 1 when a band misses them (0 when all are met; 2 for bad input); then the
same bands per layout and per algorithm (for reading; they do not change the exit code).
"""
import csv
import pathlib
import statistics
import sys

TARGETS = {"64-512 KiB": (0.25, 0.50), ">= 1 MiB": (0.10, 0.25)}


def delay_us(text):
    """'0', '250us', '1ms', '0.5s' -> microseconds."""
    for suffix, factor in (("us", 1), ("ms", 1e3), ("s", 1e6)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def read_predictions(path):
    lines = [line for line in pathlib.Path(path).read_text().splitlines() if line and not line.startswith("#")]
    table = {}
    for row in csv.DictReader(lines):
        key = (row["layout"], float(row["delay_us"]), int(row["bytes"]), row["algo"])
        table[key] = float(row["predicted_us"])
    return table


def read_measured(directory):
    out = {}
    for path in sorted(pathlib.Path(directory).glob("*x*-*.csv")):
        layout, delay = path.stem.split("-", 1)
        for row in csv.DictReader(path.open()):
            out[(layout, delay_us(delay), int(row["bytes"]), row["algo"])] = float(row["time_avg_us"])
    return out


def band(size):
    return ">= 1 MiB" if size >= 1 << 20 else "64-512 KiB"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    predicted, measured = read_predictions(sys.argv[1]), read_measured(sys.argv[2])
    errors = {b: [] for b in TARGETS}
    by_group = {}  # ("layout" | "algo", name, band) -> |errors|
    print("| layout | delay (us) | size (B) | algo | predicted (us) | measured (us) | error |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for key in sorted(k for k in measured if k in predicted):
        p, m = predicted[key], measured[key]
        error = p / m - 1.0
        errors[band(key[2])].append(abs(error))
        by_group.setdefault(("layout", key[0], band(key[2])), []).append(abs(error))
        by_group.setdefault(("algo", key[3], band(key[2])), []).append(abs(error))
        print(f"| {key[0]} | {key[1]:.0f} | {key[2]} | {key[3]} | {p:.1f} | {m:.1f} | {error:+.1%} |")
    if not any(errors.values()):
        print(f"sim_fidelity_compare: no measured cell in {sys.argv[2]} matches a prediction", file=sys.stderr)
        return 2
    met = True
    for name, (median_max, max_max) in TARGETS.items():
        if not errors[name]:
            continue
        median, worst = statistics.median(errors[name]), max(errors[name])
        ok = median <= median_max and worst <= max_max
        met = met and ok
        print(f"{name}: {len(errors[name])} cells, median |error| {median:.1%} (target <= {median_max:.0%}), "
              f"max {worst:.1%} (target <= {max_max:.0%}): {'met' if ok else 'MISSED'}")
    for (kind, name, band_name), group in sorted(by_group.items()):
        median_max, max_max = TARGETS[band_name]
        ok = statistics.median(group) <= median_max and max(group) <= max_max
        print(f"  {kind} {name}, {band_name}: {len(group)} cells, median |error| {statistics.median(group):.1%}, "
              f"max {max(group):.1%}: {'met' if ok else 'missed'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
