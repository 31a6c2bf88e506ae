"""The emulated cluster of scripts/mpirun/cluster.sh (network namespaces joined by tc-shaped links;
root): brought up for a suite and taken down after it, or reused as it is when already up."""
import os
import re
import subprocess
import time

from .proc import ROOT, BenchError, log, tail

CLUSTER_SH = os.path.join(ROOT, "scripts", "mpirun", "cluster.sh")


def rate_bps(text):
    """tc rate ('1gbit', '100mbit') in bits per second."""
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", text.strip().lower())
    if not m:
        raise BenchError(f"--link-rate '{text}': expected e.g. 1gbit, 100mbit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def namespace(i, address=False):
    """Node i's network namespace (or its address) in cluster RINGTRAIN_CLUSTER_ID, as cluster.sh names them."""
    k = int(os.environ.get("RINGTRAIN_CLUSTER_ID", "0") or 0)
    return f"10.213.{k}.{i + 1}" if address else f"rt-node{i}" if k == 0 else f"rt{k}-node{i}"


class Cluster:
    """with Cluster(nodes, ...) as c: c.launch(np, argv). `up_args` go to cluster.sh up as given."""

    def __init__(self, nodes, link_rate="1gbit", mtu=1500, up_args=(), fresh=False):
        rate_bps(link_rate)
        self.up = ["up", "--nodes", str(nodes), "--link-rate", link_rate, "--mtu", str(mtu), *up_args]
        self.fresh, self.started = fresh, False

    def __enter__(self):
        status = subprocess.run([CLUSTER_SH, "status"], capture_output=True, text=True)
        if status.returncode == 0 and namespace(0) in status.stdout:
            if not self.fresh:
                log(f"cluster {namespace(0)} already up: reusing it as it is")
                return self
            subprocess.run([CLUSTER_SH, "down"], capture_output=True)
        done = subprocess.run([CLUSTER_SH, *self.up], capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"cluster.sh {' '.join(self.up)}: exit {done.returncode}: {done.stderr.strip()}")
        log(done.stdout.strip().splitlines()[0] if done.stdout.strip() else "cluster up")
        self.started = True
        return self

    def __exit__(self, *exc):
        if self.started:
            subprocess.run([CLUSTER_SH, "down"], capture_output=True)

    @staticmethod
    def launch(np_, argv, run_args=()):
        """argv on np_ ranks placed node by node (cluster.sh run: mpirun over the emulated subnet)."""
        return [CLUSTER_SH, "run", "--np", str(np_), "--map-by", "slot", *run_args, "--", *argv]


def torch_ranks(nodes, argv, timeout, port=None):
    """argv as one torch.distributed rank per emulated node, each inside its node's namespace
    (RANK, WORLD_SIZE, MASTER_* over the emulated subnet); (rank 0's stdout, seconds from the
    first start to the last exit). BenchError naming the first rank that failed."""
    env = {"WORLD_SIZE": str(nodes), "MASTER_ADDR": namespace(0, address=True),
           "MASTER_PORT": str(port or 29400 + os.getpid() % 500), "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["ip", "netns", "exec", namespace(i), "env", f"RANK={i}",
                               *[f"{k}={v}" for k, v in env.items()], *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) for i in range(nodes)]
    deadline = time.time() + timeout
    try:
        outs = [p.communicate(timeout=max(1, deadline - time.time())) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    wall = time.perf_counter() - t0
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        raise BenchError(f"DDP rank {bad[0]} exit {procs[bad[0]].returncode}: {tail(outs[bad[0]][1])}")
    return outs[0][0], wall


def host_launch(np_, argv, threads=1, mpirun_args="--bind-to none --oversubscribe"):
    """argv on np_ ranks of this host; np 1 runs the binary itself, as a user would."""
    if np_ == 1:
        return list(argv)
    return ["mpirun", "-np", str(np_), *mpirun_args.split(), "-x", f"OMP_NUM_THREADS={threads}", *argv]
