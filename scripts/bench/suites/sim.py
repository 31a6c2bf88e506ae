"""The all-reduce simulator (apps/allreduce_sim) against measurements: the 2-4 node record, or a measured grid.

--record [FILE]: for every one-rank-per-node cell of the record (ring, rd, rab, ps; default
docs/benchmarks/allreduce-cluster-quiet.txt, the record the simulator is calibrated on), the
prediction with the built-in parameters, the relative error (predicted / recorded - 1), and
per burst depth, size band and algorithm the median and max absolute error. No MPI, seconds.
--grid: the fidelity check. For each --delays D and --layouts NxR (N nodes, R ranks each), a
fresh emulated cluster (cluster.sh up --slots R --link-rate --burst --mtu --delay D; root,
netem for delays; run it on a quiet machine, the links share its cores), allreduce_bench with
every simulated algorithm (ring, rd, rab, ps; hier when R > 1) at 64 KiB-64 MiB, ranks placed
node by node as the simulator places them, into --out/NxR-D.csv; then the comparison below.
--compare DIR: compare the CSVs of DIR with --predictions (allreduce_sim --fidelity-grid's
output) alone: every cell's error, then per size band the median and max absolute error
against the targets (<= 10% / 25% at >= 1 MiB, <= 25% / 50% at 64-512 KiB), then the same
per layout and per algorithm. Exit status 1 when a band misses its target, 2 when no cell matches.

  bench.py sim --record
  RINGTRAIN_CLUSTER_ID=9 bench.py sim --grid --layouts "8x1 2x4" --delays 0 --mtu 1500 --out DIR
"""
import csv
import os
import pathlib
import re
import statistics
import sys

from benchlib.cluster import Cluster
from benchlib.proc import BUILD, ROOT, app, check

ALGOS = ("ring", "rd", "rab", "ps")
TARGETS = {"64-512 KiB": (0.25, 0.50), ">= 1 MiB": (0.10, 0.25)}


def add_arguments(p):
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", nargs="?", const=os.path.join(ROOT, "docs/benchmarks/allreduce-cluster-quiet.txt"))
    mode.add_argument("--grid", action="store_true")
    mode.add_argument("--compare", metavar="DIR")
    p.add_argument("--predictions", default=os.path.join(ROOT, "docs/benchmarks/allreduce-sim-fidelity-predictions.csv"))
    p.add_argument("--layouts", default="6x1 8x1 4x2 2x4")
    p.add_argument("--delays", default="0 250us 1ms")
    p.add_argument("--burst", default="128kb")
    p.add_argument("--mtu", type=int, default=9000)
    p.add_argument("--link-rate", default="1gbit", help="another rate needs predictions made for it (--link-gbit)")
    p.add_argument("--out", default=os.path.join(BUILD, "bench", "sim-fidelity"))


def record_cells(path):
    """(section, ranks, burst) -> {(size, algo): avg us} of the tables whose header says every rank has its own node."""
    cells, burst, section, ranks = {}, "", "", None
    for line in open(path):
        if line.startswith("# ===="):
            ranks = None  # a new section: its tables name their ranks again
        elif line.startswith("cluster up:"):
            burst = re.search(r"burst (\S+)", line).group(1)
        elif line.startswith("## "):
            section = line.split()[1]
        elif line.startswith("# allreduce_bench:"):
            m = re.match(r"# allreduce_bench: (\d+) ranks.*\((?:MPI_COMM_TYPE_SHARED: )?(\d+) node\(s\), 0 with several", line)
            ranks = int(m.group(1)) if m and m.group(1) == m.group(2) else None
        f = line.split()
        if ranks and ranks > 1 and len(f) >= 6 and f[0].isdigit() and f[2] in ALGOS:
            cells.setdefault((section, ranks, burst), {})[(int(f[0]), f[2])] = float(f[4])
    return cells


def against_record(path):
    cells, by_nodes, errors = record_cells(path), {}, {}
    for (_, nodes, _), v in cells.items():
        by_nodes.setdefault(nodes, set()).update(size for size, _ in v)
    predicted = {}
    for nodes, sizes in by_nodes.items():
        out = check([app("allreduce_sim"), "--np", str(nodes), "--sizes", ",".join(map(str, sorted(sizes))),
                     "--algo", ",".join(ALGOS)])
        for f in (l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")):
            predicted.update({(nodes, int(f[0]), a): float(x) for a, x in zip(ALGOS, f[1:])})
    print("| record section | nodes | burst | size (B) | algo | predicted (us) | recorded avg (us) | error |")
    print("|---|---:|---|---:|---|---:|---:|---:|")
    for (section, nodes, burst), v in sorted(cells.items()):
        for (size, algo), measured in sorted(v.items()):
            p = predicted[(nodes, size, algo)]
            band = ">= 1 MiB" if size >= 1 << 20 else ("64-512 KiB" if size >= 64 << 10 else "< 64 KiB")
            errors.setdefault((burst, band, algo), []).append(abs(p / measured - 1))
            print(f"| {section} | {nodes} | {burst} | {size} | {algo} | {p:.1f} | {measured:.1f} | {p / measured - 1:+.1%} |")
    print("\n| burst | size band | algo | cells | median abs error | max abs error |\n|---|---|---|---:|---:|---:|")
    for (burst, band, algo), e in sorted(errors.items()):
        print(f"| {burst} | {band} | {algo} | {len(e)} | {statistics.median(e):.1%} | {max(e):.1%} |")
    return 0


def delay_us(text):  # '0', '250us', '1ms', '0.5s' -> microseconds
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)?", text)
    return float(m[1]) * {None: 1, "us": 1, "ms": 1e3, "s": 1e6}[m[2]]


def compare(predictions, directory):
    rows = [l for l in pathlib.Path(predictions).read_text().splitlines() if l and not l.startswith("#")]
    predicted = {(r["layout"], float(r["delay_us"]), int(r["bytes"]), r["algo"]): float(r["predicted_us"])
                 for r in csv.DictReader(rows)}
    measured = {}
    for path in sorted(pathlib.Path(directory).glob("*x*-*.csv")):
        layout, delay = path.stem.split("-", 1)
        measured.update({(layout, delay_us(delay), int(r["bytes"]), r["algo"]): float(r["time_avg_us"])
                         for r in csv.DictReader(path.open())})
    band = lambda size: ">= 1 MiB" if size >= 1 << 20 else "64-512 KiB"  # noqa: E731
    errors, groups = {b: [] for b in TARGETS}, {}
    print("| layout | delay (us) | size (B) | algo | predicted (us) | measured (us) | error |\n|---|---:|---:|---|---:|---:|---:|")
    for key in sorted(k for k in measured if k in predicted):
        p, m, b = predicted[key], measured[key], band(key[2])
        errors[b].append(abs(p / m - 1))
        for kind, name in (("layout", key[0]), ("algo", key[3])):
            groups.setdefault((kind, name, b), []).append(abs(p / m - 1))
        print(f"| {key[0]} | {key[1]:.0f} | {key[2]} | {key[3]} | {p:.1f} | {m:.1f} | {p / m - 1:+.1%} |")
    if not any(errors.values()):
        print(f"bench.py sim: no measured cell in {directory} matches a prediction", file=sys.stderr)
        return 2
    met = True
    for name, (median_max, max_max) in TARGETS.items():
        if errors[name]:
            median, worst = statistics.median(errors[name]), max(errors[name])
            ok = median <= median_max and worst <= max_max
            met = met and ok
            print(f"{name}: {len(errors[name])} cells, median |error| {median:.1%} (target <= {median_max:.0%}), "
                  f"max {worst:.1%} (target <= {max_max:.0%}): {'met' if ok else 'MISSED'}")
    for (kind, name, b), e in sorted(groups.items()):
        ok = statistics.median(e) <= TARGETS[b][0] and max(e) <= TARGETS[b][1]
        print(f"  {kind} {name}, {b}: {len(e)} cells, median |error| {statistics.median(e):.1%}, max {max(e):.1%}: "
              f"{'met' if ok else 'missed'}")
    return 0 if met else 1


def run(args):
    if args.record:
        return against_record(args.record)
    if not os.path.isfile(args.predictions):
        args.parser.error(f"--predictions {args.predictions}: no such file")
    if args.grid:
        os.makedirs(args.out, exist_ok=True)
        for delay in args.delays.split():
            for layout in args.layouts.split():
                if not re.fullmatch(r"\d+x\d+", layout):
                    args.parser.error(f"--layouts: '{layout}' is not NxR")
                nodes, per_node = map(int, layout.split("x"))
                up = ["--slots", str(per_node), "--burst", args.burst, "--delay", delay]
                with Cluster(nodes, args.link_rate, args.mtu, up, fresh=True) as c:
                    check(c.launch(nodes * per_node, [app("allreduce_bench"), "--algo", ",".join(ALGOS) + (
                        ",hier" if per_node > 1 else ""), "--sizes", "64K,256K,1M,4M,16M,64M", "--warmup", "1",
                        "--iters", "3", "--repeats", "3", "--csv", os.path.join(args.out, f"{layout}-{delay}.csv")]))
    return compare(args.predictions, args.compare or args.out)
