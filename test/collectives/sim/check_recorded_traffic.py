#!/usr/bin/env python3
"""The recorded schedule of each algorithm sends what a real run sends, per peer.

Runs traffic_probe (real MPI, MPI_Isend counted through PMPI) under mpirun and
allreduce_sim --traffic (the same algorithms recorded on simulated ranks) for the same
rank count, ranks per node, algorithms and sizes, and fails unless both list the same
bytes for every (algorithm, size, source, destination).

usage: check_recorded_traffic.py MPIEXEC PROBE ALLREDUCE_SIM NP RANKS_PER_NODE ALGOS SIZES
"""
import subprocess
import sys


def rows(text):
    return sorted(line.split() for line in text.splitlines() if line and not line.startswith("#"))


def main():
    mpiexec, probe, sim, np, per_node, algos, sizes = sys.argv[1:8]
    real = subprocess.run([mpiexec, "-np", np, "--oversubscribe", "--bind-to", "none", probe, per_node, algos, sizes],
                          capture_output=True, text=True, timeout=120)
    if real.returncode != 0:
        print(real.stdout, real.stderr, file=sys.stderr)
        return 1
    recorded = subprocess.run([sim, "--traffic", "--np", np, "--ranks-per-node", per_node, "--algo", algos,
                               "--sizes", sizes], capture_output=True, text=True, timeout=120)
    if recorded.returncode != 0:
        print(recorded.stderr, file=sys.stderr)
        return 1
    a, b = rows(real.stdout), rows(recorded.stdout)
    if not a:
        print("the real run reported no traffic", file=sys.stderr)
        return 1
    if a != b:
        only_real = [r for r in a if r not in b]
        only_sim = [r for r in b if r not in a]
        print(f"real run only: {only_real[:10]}\nrecording only: {only_sim[:10]}", file=sys.stderr)
        return 1
    print(f"check_recorded_traffic: {len(a)} (algorithm, size, source, destination) byte counts agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
