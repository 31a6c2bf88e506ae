#!/usr/bin/env python3
"""Plain-TCP baseline for the emulated cluster (scripts/mpirun/cluster.sh), iperf-like.

Every node i streams to node (i+1) mod K over one TCP connection while receiving from
node i-1, which is the ring all-reduce's traffic pattern (at K = 2 both directions of one
node pair). Each receiver reports the rate it saw over a window after a warm-up, in the
units allreduce_bench uses (GB/s, GB = 1e9 B). With no MPI, no reduction and no
pipelining, the figures are what the emulation (veths, bridge, tbf, the kernel's TCP on
the shared cores) gives a bulk stream: the ceiling any all-reduce can reach on it.

  scripts/bench/link_baseline.py [--seconds 8] [--warmup 2] [--nodes K]

Needs root (ip netns exec) and a cluster that is up; RINGTRAIN_CLUSTER_ID picks it, as in
cluster.sh.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

kPort = 5201
kBlock = 4 * 1024 * 1024


def cluster_names():
    cluster_id = int(os.environ.get("RINGTRAIN_CLUSTER_ID", "0") or 0)
    tag = "rt" if cluster_id == 0 else f"rt{cluster_id}"
    state = os.environ.get("RINGTRAIN_CLUSTER_STATE",
                           "/run/ringtrain-cluster" if cluster_id == 0
                           else f"/run/ringtrain-cluster-{cluster_id}")
    return tag + "-node", f"10.213.{cluster_id}", state


def receive(port, warmup, seconds):
    """Accepts one stream and prints the bytes/s over [warmup, warmup + seconds]."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(1)
    print("listening", flush=True)
    conn, _ = server.accept()
    buffer = bytearray(kBlock)
    view = memoryview(buffer)
    first = None
    counted = 0
    window_start = window_end = None
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        now = time.monotonic()
        if first is None:
            first = now
        if window_start is None and now - first >= warmup:
            window_start = now
        elif window_start is not None and now - window_start <= seconds:
            counted += n
            window_end = now
    conn.close()
    if window_start is None or window_end is None or window_end <= window_start:
        print("error: stream too short for the window", flush=True)
        sys.exit(1)
    print(f"{counted / (window_end - window_start):.0f}", flush=True)


def send(host, port, total_seconds):
    """Streams zeros to host:port for total_seconds, then closes."""
    conn = socket.create_connection((host, port), timeout=30)
    block = bytes(kBlock)
    end = time.monotonic() + total_seconds
    while time.monotonic() < end:
        conn.sendall(block)
    conn.close()


def orchestrate(args):
    prefix, subnet, state = cluster_names()
    nodes = args.nodes
    if nodes is None:
        try:
            with open(os.path.join(state, "nodes")) as f:
                nodes = int(f.read().strip())
        except OSError:
            print(f"link_baseline.py: no cluster is up ({state}/nodes missing)", file=sys.stderr)
            return 1
    if nodes < 2:
        print("link_baseline.py: needs at least 2 nodes", file=sys.stderr)
        return 2
    me = os.path.abspath(__file__)
    receivers = []
    for i in range(nodes):
        p = subprocess.Popen(["ip", "netns", "exec", f"{prefix}{i}", sys.executable, me,
                              "--role", "receive", "--warmup", str(args.warmup),
                              "--seconds", str(args.seconds)],
                             stdout=subprocess.PIPE, text=True)
        if p.stdout.readline().strip() != "listening":
            print(f"link_baseline.py: receiver on {prefix}{i} did not start", file=sys.stderr)
            return 1
        receivers.append(p)
    senders = []
    total = args.warmup + args.seconds + 1.0
    for i in range(nodes):
        target = f"{subnet}.{(i + 1) % nodes + 1}"
        senders.append(subprocess.Popen(["ip", "netns", "exec", f"{prefix}{i}", sys.executable,
                                         me, "--role", "send", "--host", target,
                                         "--seconds", str(total)]))
    status = 0
    for p in senders:
        status |= p.wait()
    rates = []
    for i, p in enumerate(receivers):
        out = p.communicate()[0].strip()
        status |= p.returncode
        rates.append(out)
    print(f"# link_baseline: {nodes} nodes, ring pattern (node i -> node i+1), one TCP stream "
          f"each, window {args.seconds:g} s after {args.warmup:g} s warm-up, GB = 1e9 B")
    print(f"{'receiver':>12} {'from':>12} {'GB/s':>8}")
    for i, r in enumerate(rates):
        shown = f"{float(r) / 1e9:.4f}" if r.replace(".", "").isdigit() else r
        print(f"{prefix + str((i + 1) % nodes):>12} {prefix + str(i):>12} {shown:>8}")
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window (s)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured start (s)")
    parser.add_argument("--nodes", type=int, help="nodes to use (default: all of the cluster)")
    parser.add_argument("--role", choices=["receive", "send"], help=argparse.SUPPRESS)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "receive":
        receive(kPort, args.warmup, args.seconds)
        return 0
    if args.role == "send":
        send(args.host, kPort, args.seconds)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
