"""All-reduce algorithms side by side: time and bus bandwidth against size (apps/allreduce_bench).

On this host (unless --nodes-only): every algorithm under mpirun -np 2 and 4, 4 B-512 KiB and
1 MiB-256 MiB. With --nodes "2 3 4" (root; RINGTRAIN_CLUSTER_ID keeps it apart), for each MTU of
--mtus and node count, a fresh emulated cluster (cluster.sh up, links shaped to --link-rate, one
rank per node, --burst as tc's bucket depth), then: the links' plain-TCP ceiling (one stream node
i -> i+1 at once, the ring's pattern, no MPI: what the emulation gives a bulk stream); mpi, ring, ps, rd from
1 MiB; mpi, ring, rd, rab, ps and auto at 64 KiB-4 MiB, where auto's crossovers lie; at 2 nodes
the ring with bf16/fp16 transport against fp32; then 2 nodes x 2 ranks: hier against the flat
ring, rd and MPI_Allreduce. Every ratio (vs_mpi) compares algorithms of the same run; repeats
take turns over the algorithms. Tables go to stdout as allreduce_bench prints them, each run's
CSV to --out (default build/bench/collectives; scripts/plot/plot_allreduce.py plots one).
--quick: fewer repeats and sizes. Flags after -- go to every allreduce_bench run.

  bench.py collectives --quick                                   # this host only, minutes
  RINGTRAIN_CLUSTER_ID=3 bench.py collectives --nodes-only --nodes "2 3 4" --mtus 1500
"""
import os
import socket
import subprocess
import sys
import time

from benchlib.cluster import CLUSTER_SH, Cluster, namespace
from benchlib import proc
from benchlib.proc import BUILD, BenchError, app, load, log, tail

# Per section: sizes, (warmup, iters, repeats) in full and --quick, --quick's own sizes; small: many short calls.
PLAN = {"small": ("--min-bytes 4 --max-bytes 512K", "3 20 7", "2 10 3"),
        "large": ("--min-bytes 1M --max-bytes 256M", "1 2 7", "1 2 3", "--min-bytes 1M --max-bytes 16M"),
        "net": ("--sizes 1M,4M,16M,64M,256M", "1 2 3", "1 1 2"),
        "cross": ("--sizes 64K,256K,512K,1M,2M,4M", "2 5 5", "2 3 3"),
        "wire": ("--sizes 16M,64M,256M", "1 2 3", "1 2 2", "--sizes 16M,64M"),
        "hier": ("--sizes 256K,1M,4M,16M,64M", "1 2 3", "1 2 2", "--sizes 256K,1M,16M")}


def add_arguments(p):
    p.add_argument("--quick", action="store_true")
    p.add_argument("--nodes", default="", help='node counts across emulated nodes, e.g. "2 3 4" (root)')
    p.add_argument("--nodes-only", action="store_true", help="skip the runs on this host")
    p.add_argument("--mtus", default="9000 1500")
    p.add_argument("--link-rate", default="1gbit")
    p.add_argument("--burst", default="512kb", help="tc bucket depth (128kb for small sizes, see cluster.sh)")
    p.add_argument("--sizes", help="override every section's sizes, e.g. 4K,1M")
    p.add_argument("--out", default=os.path.join(BUILD, "bench", "collectives"))
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("extra", nargs="*", help="after --: allreduce_bench flags for every run")


def section(title):
    print(f"## {title} ({time.strftime('%H:%M:%S', time.gmtime())} UTC, load: {load()})", flush=True)


def bench(args, name, launch, algos, section_name, extra=()):
    """One allreduce_bench run, its table printed, its CSV in --out; one retry (a launch into the
    namespaces has, rarely, stalled)."""
    plan = PLAN[section_name]
    sizes = f"--sizes {args.sizes}" if args.sizes else plan[3] if args.quick and len(plan) > 3 else plan[0]
    warmup, iters, repeats = (plan[2] if args.quick else plan[1]).split()
    flags = sizes.split() + ["--warmup", warmup, "--iters", iters, "--repeats", repeats]
    cmd = launch + [app("allreduce_bench"), "--algo", algos, *flags, *extra, "--csv",
                    os.path.join(args.out, f"{name}.csv"), *args.extra]
    section(name)
    for attempt in (1, 2):
        rc, out, err = proc.run(cmd, {"OMP_NUM_THREADS": "1"}, args.timeout)
        if rc == 0:
            print("\n".join(l for l in out.splitlines() if not l.startswith("+ ")) + "\n", flush=True)
            return
        log(f"{name}: exit {rc} ({tail(err)}){'; retrying once' if attempt == 1 else ''}")
    raise BenchError(f"{' '.join(cmd)} failed twice")


def receive(warmup, seconds, port=5201):
    """Inside a node: print "listening", then the bytes/s of one stream over [warmup, warmup + seconds]."""
    server = socket.create_server(("0.0.0.0", port))
    print("listening", flush=True)
    conn, _ = server.accept()
    view, first, start, end, counted = memoryview(bytearray(4 << 20)), None, None, None, 0
    while (n := conn.recv_into(view)) > 0:
        now = time.monotonic()
        first = first or now
        if start is None and now - first >= float(warmup):
            start = now
        elif start is not None and now - start <= float(seconds):
            counted, end = counted + n, now
    print(f"{counted / (end - start):.0f}" if end and end > start else "stream too short", flush=True)


def send(host, seconds, port=5201):
    """Inside a node: stream zeros to host for seconds."""
    conn, block, stop = socket.create_connection((host, port), timeout=30), bytes(4 << 20), time.monotonic() + float(seconds)
    while time.monotonic() < stop:
        conn.sendall(block)


def link_ceiling(nodes, warmup=2.0, seconds=8.0):
    """Every node streams to the next at once; each receiver's GB/s."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ns = lambda i: ["ip", "netns", "exec", namespace(i), sys.executable, "-c", "import sys; sys.path.insert(0, "  # noqa: E731
                    f"{here!r}); from suites import collectives as c; getattr(c, sys.argv[1])(*sys.argv[2:])"]
    procs = [subprocess.Popen(ns(i) + ["receive", str(warmup), str(seconds)], stdout=subprocess.PIPE, text=True)
             for i in range(nodes)]
    try:  # every helper ends with this call, also when one fails: none is left waiting in a namespace
        if any(r.stdout.readline().strip() != "listening" for r in procs):
            raise BenchError("a link-ceiling receiver did not start")
        procs += [subprocess.Popen(ns(i) + ["send", namespace((i + 1) % nodes, address=True), str(warmup + seconds + 1)])
                  for i in range(nodes)]
        for s in procs[nodes:]:
            s.wait(timeout=warmup + seconds + 60)
        rates = [r.communicate(timeout=60)[0].strip() for r in procs[:nodes]]
    finally:
        for p in procs:
            p.kill()
    print(f"# link ceiling: {nodes} nodes, ring pattern (node i -> node i+1), one TCP stream each, window "
          f"{seconds:g} s after {warmup:g} s warm-up, GB = 1e9 B\n{'receiver':>12} {'from':>12} {'GB/s':>8}")
    for i, got in enumerate(rates):  # node i's receiver hears node i-1
        shown = f"{float(got) / 1e9:.4f}" if got.replace(".", "").isdigit() else got
        print(f"{namespace(i):>12} {namespace((i - 1) % nodes):>12} {shown:>8}")
    print(flush=True)


def run(args):
    if not os.access(app("allreduce_bench"), os.X_OK):
        raise BenchError(f"{app('allreduce_bench')} not built (scripts/build.sh, or set RINGTRAIN_BUILD_DIR)")
    os.makedirs(args.out, exist_ok=True)
    if not args.nodes_only:
        for np_ in (2, 4):
            for size in ("small", "large"):
                bench(args, f"shm_np{np_}_{size}", ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none",
                                                     "-x", "OMP_NUM_THREADS"], "all", size)
    for mtu in args.mtus.split() if args.nodes else []:
        for nodes in map(int, args.nodes.split()):
            with Cluster(nodes, args.link_rate, int(mtu), ["--burst", args.burst], fresh=True):
                check_launch(nodes)
                section(f"link ceiling n{nodes} mtu{mtu}")
                link_ceiling(nodes)
                launch = [CLUSTER_SH, "run", "--np", str(nodes), "--"]
                bench(args, f"cluster_n{nodes}_mtu{mtu}", launch, "mpi,ring,ps,rd", "net")
                bench(args, f"cluster_n{nodes}_mtu{mtu}_small", launch, "mpi,ring,rd,rab,ps,auto", "cross")
                if nodes == 2:  # 16-bit transport against fp32 on the commonest setting
                    bench(args, f"cluster_n2_mtu{mtu}_bf16", launch, "ring", "wire",
                          ["--compress", "none,bf16,fp16"])
        # Ranks 0,1 on node 0 and 2,3 on node 1: the flat ring's best placement (two of four hops cross).
        with Cluster(2, args.link_rate, int(mtu), ["--slots", "2", "--burst", args.burst], fresh=True):
            check_launch(4)
            bench(args, f"cluster_2x2_mtu{mtu}", [CLUSTER_SH, "run", "--np", "4", "--map-by", "slot", "--"],
                  "mpi,ring,hier,rd", "hier")
    return 0


def check_launch(np_):
    if not any(proc.run([CLUSTER_SH, "run", "--np", str(np_), "--", "hostname"], timeout=60)[0] == 0 for _ in range(3)):
        raise BenchError("mpirun cannot launch into the emulated cluster (3 tries of 60 s)")
