"""Training against PyTorch DDP across emulated nodes: images/s against the link's limit.

Brings up scripts/mpirun/cluster.sh (root: network namespaces joined by links shaped to
--link-rate at --mtu; RINGTRAIN_CLUSTER_ID picks the cluster; one already up is reused as it
is, one this suite starts comes down at the end), one rank and one thread per node on both
sides. ringtrain through `cluster.sh run` (mpirun over TCP on the emulated subnet) with
--overlap on (what auto picks across nodes), --overlap off, and --compress bf16; PyTorch DDP
over gloo with its default buckets, one process per node inside the node's namespace, and
with its fp16_compress_hook as DDP's compression. Sides interleaved (ABBA) per round;
reported: images/s medians [min-max], the paired ratio against DDP (ringtrain bf16 against
DDP's fp16 hook), and the step time against the link-limited step: the ring's 2(N-1)/N x
gradient bytes per rank (Patarasuk & Yuan 2009), in TCP frames of the MTU, over the link
rate, plus ringtrain's own compute per step. Needs the PyTorch peer (see --install-peer).

  RINGTRAIN_CLUSTER_ID=3 bench.py train-nodes --nodes 2 --link-rate 1gbit --models mlp,vgg11 --batch mlp=64
"""
import os
import statistics
import tempfile

from benchlib import peer, plot, ringtrain
from benchlib.cluster import Cluster, rate_bps, torch_ranks
from benchlib.proc import last_json, load
from benchlib.rounds import cell, flat, interleave, paired, values
from benchlib.table import Table, conditions, emit
from benchlib.torch_peer import describe
from suites import train

SIDES = {"ringtrain": ["--overlap", "on"], "ringtrain-bf16": ["--compress", "bf16"],
         "ringtrain-no-overlap": ["--overlap", "off"], "ddp": "none", "ddp-fp16": "fp16"}
# Bytes per TCP segment that carry no payload (IPv4 20 + TCP 20 + timestamps 12); tbf also
# charges each frame's Ethernet header (14): (1500 + 14) / (1500 - 52) = 1.0456 at MTU 1500,
# where node 0's tc counters over an mlp step gave 1.0475 (ACKs, MPI headers, the metrics).
kTcpIpHeaderBytes, kEthernetHeaderBytes = 52, 14


def add_arguments(p):
    p.add_argument("--nodes", type=int, default=2, help="emulated nodes, one rank each")
    p.add_argument("--link-rate", default="1gbit")
    p.add_argument("--mtu", type=int, default=1500)
    train.add_arguments(p, "mlp,vgg11")


def link_limited_ms(params, nodes, bytes_per_value, rate, mtu, compute_ms):
    wire = 2.0 * (nodes - 1) / nodes * params * bytes_per_value * (mtu + kEthernetHeaderBytes) / (mtu - kTcpIpHeaderBytes)
    return 1e3 * wire * 8.0 / rate_bps(rate) + compute_ms


def run_ddp(args, w, hook):
    """One DDP run, a process per node in its namespace; rank 0's JSON line."""
    return last_json(torch_ranks(args.nodes, w.peer_argv(["--ddp", "--ddp-hook", hook]), args.timeout)[0])


def run(args):
    if not peer.ready(args):
        args.parser.error("needs the PyTorch peer")
    args.np = args.nodes
    work = train.works(args)
    models = list(work)
    sides = [s for s in SIDES if s != "ringtrain-bf16" or ringtrain.knows(args.bin, "--compress")]
    load_before = load()

    def measure(model, side, rnd):
        w = work[model]
        if side.startswith("ddp"):
            return run_ddp(args, w, SIDES[side])
        run_dir = os.path.join(tmp, f"{model}-{side}-r{rnd}")
        argv = w.ringtrain_argv(args.bin, args.nodes, run_dir, SIDES[side])
        return ringtrain.timed_run(Cluster.launch(args.nodes, argv), run_dir, w.warmup, w.batch, timeout=args.timeout)

    with tempfile.TemporaryDirectory(prefix="bench-train-nodes-") as tmp, Cluster(args.nodes, args.link_rate, args.mtu):
        results = interleave(args.rounds, models, sides, measure)
    t = Table("model", "batch", "side", "images/s", "ratio vs DDP (paired)", "step ms", "link-limited step ms",
              "step / link-limited", "hidden comm")
    labels, ratios = [], []
    for m in models:
        compute = values(results[(m, "ringtrain")], "compute_ms")
        for side in sides:
            runs, wide = results[(m, side)], side in ("ringtrain-bf16", "ddp-fp16")
            base = "ddp-fp16" if wide else "ddp"
            ratio = paired(runs, results[(m, base)], "images_per_s") if side != base else []
            step = [1e3 * work[m].batch * args.nodes / v for v in values(runs, "images_per_s")]
            limit = link_limited_ms(describe(work[m].model, work[m].shape)["params"], args.nodes, 2 if wide else 4,
                                    args.link_rate, args.mtu, statistics.median(compute)) if compute else None
            t.add(m, work[m].batch, side, cell(values(runs, "images_per_s"), 1), cell(ratio, 2), cell(step, 1),
                  f"{limit:.1f}" if limit else "", f"{statistics.median(step) / limit:.2f}" if limit and step else "",
                  cell(values(runs, "hidden_comm"), 2))
            if ratio:
                labels.append(f"{m} {side}")
                ratios.append(ratio)
    if args.plot:
        plot.ratios(args.plot, f"against DDP, {args.nodes} nodes at {args.link_rate}", labels, ratios, "images/s ratio")
    where = (f"{args.nodes} emulated nodes at {args.link_rate}, MTU {args.mtu}, one rank and thread per node, "
             f"synthetic data, {args.rounds} interleaved rounds, medians [min-max]")
    emit(args, "\n".join([conditions(where, load_before), "", t.markdown()]), flat(results))
    return 0
