#!/usr/bin/env python3
"""The simulator against the 2-4 node record it is calibrated on: for every recorded cell
of allreduce-cluster-quiet.txt (one rank per node; ring, rd, rab, ps), the prediction of
allreduce_sim with the built-in parameters, the relative error, and per burst depth and size
band the median and max absolute error.

usage: sim_vs_record.py ALLREDUCE_SIM [RECORD]   (RECORD: docs/benchmarks/allreduce-cluster-quiet.txt)
"""
import pathlib
import re
import statistics
import subprocess
import sys

ALGOS = ("ring", "rd", "rab", "ps")


def read_cells(path):
    """(section, ranks, burst) -> {(size, algo): avg us}: the tables whose header says every
    rank has its own node (K ranks, K nodes, 0 with several ranks)."""
    cells, burst, section, ranks = {}, "", "", None
    for line in open(path):
        if line.startswith("# ===="):
            ranks = None  # a new section: its tables name their ranks again (or are left out)
        elif line.startswith("cluster up:"):
            burst = re.search(r"burst (\S+)", line).group(1)
        elif line.startswith("## "):
            section = line.split()[1]
        elif line.startswith("# allreduce_bench:"):
            m = re.match(r"# allreduce_bench: (\d+) ranks.*\((?:MPI_COMM_TYPE_SHARED: )?(\d+) node\(s\), 0 with several", line)
            ranks = int(m.group(1)) if m and m.group(1) == m.group(2) else None
        fields = line.split()
        if ranks and ranks > 1 and len(fields) >= 6 and fields[0].isdigit() and fields[2] in ALGOS:
            cells.setdefault((section, ranks, burst), {})[(int(fields[0]), fields[2])] = float(fields[4])
    return cells


def predictions(sim, nodes, sizes):
    """{(size, algo): us} from one allreduce_sim run."""
    text = subprocess.run([sim, "--np", str(nodes), "--sizes", ",".join(map(str, sizes)), "--algo", ",".join(ALGOS)],
                          capture_output=True, text=True, check=True).stdout
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split()
        for algo, value in zip(ALGOS, fields[1:1 + len(ALGOS)]):
            out[(int(fields[0]), algo)] = float(value)
    return out


def main():
    root = pathlib.Path(__file__).resolve().parents[2]
    sim = sys.argv[1]
    record = sys.argv[2] if len(sys.argv) > 2 else root / "docs/benchmarks/allreduce-cluster-quiet.txt"
    cells = read_cells(record)
    by_nodes = {}
    for (_, nodes, _), values in cells.items():
        by_nodes.setdefault(nodes, set()).update(size for size, _ in values)
    predicted = {n: predictions(sim, n, sorted(s)) for n, s in by_nodes.items()}
    errors = {}
    print("| record section (last ## heading) | nodes | burst | size (B) | algo | predicted (us) | recorded avg (us) | error |")
    print("|---|---:|---|---:|---|---:|---:|---:|")
    for (section, nodes, burst), values in sorted(cells.items()):
        for (size, algo), measured in sorted(values.items()):
            p = predicted[nodes][(size, algo)]
            error = p / measured - 1.0
            band = ">= 1 MiB" if size >= 1 << 20 else ("64-512 KiB" if size >= 64 << 10 else "< 64 KiB")
            errors.setdefault((burst, band, algo), []).append(abs(error))
            print(f"| {section} | {nodes} | {burst} | {size} | {algo} | {p:.1f} | {measured:.1f} | {error:+.1%} |")
    print("\n| burst | size band | algo | cells | median abs error | max abs error |")
    print("|---|---|---|---:|---:|---:|")
    for (burst, band, algo), e in sorted(errors.items()):
        print(f"| {burst} | {band} | {algo} | {len(e)} | {statistics.median(e):.1%} | {max(e):.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
