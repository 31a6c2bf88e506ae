#!/usr/bin/env python3
"""rab in lanes: the cost model against the replay, cell by cell.

For every cell of an allreduce_sim --scale-table (docs/benchmarks/allreduce-sim-scale.md)
where rab runs in lanes ("rab xK" in the every-algorithm column), runs

    allreduce_sim --np P --ranks-per-node R --sizes BYTES --algo rab --link-gbit G --with-model

and prints the replayed time, the table's, the model's and model / replay, then the median
and range of model / replay. The replay is recorded as the table records it (the model's
lanes for the link rate), so it must equal the table's figure.

usage: rab_lanes_model_check.py TABLE.md ALLREDUCE_SIM
"""
import re
import statistics
import subprocess
import sys

ROW = re.compile(r"^\| (\d+) \| (\d+) \| (\d+) (KiB|MiB) \| ([\d.]+) \|.*\| ([^|]*) \|$")
RAB = re.compile(r"rab x(\d+) ([\d.]+)")


def main():
    table, sim = sys.argv[1:3]
    ratios = []
    print("ranks per_node bytes gbit lanes table_us replay_us model_us model/replay")
    for line in open(table):
        m = ROW.match(line.strip())
        if not m:
            continue
        lanes = RAB.search(m[6])
        if not lanes:
            continue
        ranks, per_node, gbit = m[1], m[2], m[5]
        nbytes = int(m[3]) << (20 if m[4] == "MiB" else 10)
        out = subprocess.run([sim, "--np", ranks, "--ranks-per-node", per_node, "--sizes", str(nbytes), "--algo", "rab",
                              "--link-gbit", gbit, "--with-model"], capture_output=True, text=True, check=True).stdout
        fields = [l for l in out.splitlines() if not l.startswith("#")][0].split()
        replay, ran_lanes, model = float(fields[1]), int(fields[4]), float(fields[6])
        if ran_lanes != int(lanes[1]):
            raise SystemExit(f"{ranks} ranks, {nbytes} B, {gbit} Gbit/s: the table has {lanes[1]} lanes, the run {ran_lanes}")
        ratios.append(model / replay)
        print(f"{ranks} {per_node} {nbytes} {gbit} {ran_lanes} {lanes[2]} {replay:.1f} {model:.1f} {model / replay:.3f}")
    if not ratios:
        raise SystemExit(f"{table}: no cell runs rab in lanes")
    print(f"# {len(ratios)} cells: model / replay median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()
