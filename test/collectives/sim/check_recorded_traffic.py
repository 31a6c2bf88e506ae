#!/usr/bin/env python3
"""The recorded schedule of each algorithm sends what a real run sends, per peer: bytes and messages.

Runs traffic_probe (real MPI, MPI_Isend counted through PMPI) under mpirun and
allreduce_sim --traffic (the same algorithms recorded on simulated ranks) for the same
rank count, ranks per node, algorithms and sizes, and fails unless both list the same
bytes and messages for every (algorithm, size, source, destination). RAB_LANES forces
rab's lanes in both (traffic_probe's last argument, allreduce_sim --rab-lanes); with
MIN_MESSAGES_RATIO the check also fails unless the run sent at least that many times the
messages of the same run in one lane (the lanes ran, in both).

usage: check_recorded_traffic.py MPIEXEC PROBE ALLREDUCE_SIM NP RANKS_PER_NODE ALGOS SIZES [RAB_LANES [MIN_MESSAGES_RATIO]]
"""
import subprocess
import sys


def rows(text):
    return sorted(line.split() for line in text.splitlines() if line and not line.startswith("#"))


def recorded_rows(sim, np, per_node, algos, sizes, lanes):
    recorded = subprocess.run([sim, "--traffic", "--np", np, "--ranks-per-node", per_node, "--algo", algos,
                               "--sizes", sizes, "--rab-lanes", lanes], capture_output=True, text=True, timeout=120)
    if recorded.returncode != 0:
        print(recorded.stderr, file=sys.stderr)
        return None
    return rows(recorded.stdout)


def main():
    mpiexec, probe, sim, np, per_node, algos, sizes = sys.argv[1:8]
    lanes = sys.argv[8] if len(sys.argv) > 8 else "0"
    min_ratio = float(sys.argv[9]) if len(sys.argv) > 9 else 0.0
    real = subprocess.run([mpiexec, "-np", np, "--oversubscribe", "--bind-to", "none", probe, per_node, algos, sizes,
                           lanes], capture_output=True, text=True, timeout=120)
    if real.returncode != 0:
        print(real.stdout, real.stderr, file=sys.stderr)
        return 1
    a, b = rows(real.stdout), recorded_rows(sim, np, per_node, algos, sizes, lanes)
    if b is None:
        return 1
    if not a:
        print("the real run reported no traffic", file=sys.stderr)
        return 1
    if a != b:
        only_real = [r for r in a if r not in b]
        only_sim = [r for r in b if r not in a]
        print(f"real run only: {only_real[:10]}\nrecording only: {only_sim[:10]}", file=sys.stderr)
        return 1
    if min_ratio > 0:
        one_lane = recorded_rows(sim, np, per_node, algos, sizes, "1")
        if one_lane is None:
            return 1
        ratio = sum(int(r[5]) for r in a) / sum(int(r[5]) for r in one_lane)
        if ratio < min_ratio:
            print(f"{lanes} lanes sent {ratio:.2f} times the messages of one lane (want >= {min_ratio})", file=sys.stderr)
            return 1
        print(f"check_recorded_traffic: {lanes} lanes sent {ratio:.2f} times the messages of one lane")
    print(f"check_recorded_traffic: {len(a)} (algorithm, size, source, destination) byte and message counts agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
