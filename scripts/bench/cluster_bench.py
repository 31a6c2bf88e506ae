"""train_throughput.sh --cluster NODES: ringtrain vs PyTorch DDP across emulated nodes.

Brings up scripts/mpirun/cluster.sh with NODES network namespaces joined by links shaped to
--link-rate (MTU --mtu), one rank and one thread per node on both sides:
- ringtrain through `cluster.sh run` (mpirun over TCP on the emulated subnet), with overlap
  on (what --overlap auto picks across nodes) and, as a reference, --overlap off; with
  --compress bf16 too when the binary has that flag;
- PyTorch DDP over gloo, its default buckets, one process per node started inside the node's
  namespace with MASTER_ADDR = node 0's address; with fp16_compress_hook as DDP's compression.
Sides run interleaved (ABBA), repeated; reported: medians [min-max] of images/s, paired
ratios, and each side's median step time against the link-limited step time (the ring's
bytes per rank and step, framed at the MTU, over the link rate, plus ringtrain's own
compute per step).
The cluster is taken down at the end unless it was already up (then it is reused as is).
Needs root (network namespaces). Tests never call this.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "plot"))
import rundata  # noqa: E402

CLUSTER = os.path.join(ROOT, "scripts", "mpirun", "cluster.sh")


def rate_bps(text):
    """tc rate ('1gbit', '100mbit', '500kbit') in bits per second."""
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", text.strip().lower())
    if not m:
        raise ValueError(f"--link-rate '{text}': expected e.g. 1gbit, 100mbit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def cluster_id():
    return int(os.environ.get("RINGTRAIN_CLUSTER_ID", "0") or 0)


def node_namespace(i):
    cid = cluster_id()
    return f"rt-node{i}" if cid == 0 else f"rt{cid}-node{i}"


def node_address(i):
    return f"10.213.{cluster_id()}.{i + 1}"


def cluster_up(nodes, rate, mtu, log):
    """Start the cluster; return True if this call started it (and so must take it down)."""
    status = subprocess.run([CLUSTER, "status"], capture_output=True, text=True)
    if status.returncode == 0 and f"{node_namespace(0)}" in status.stdout:
        n = len(re.findall(r"^== ", status.stdout, re.M))
        log(f"cluster {cluster_id()} already up ({n} nodes): reusing it as it is")
        return False
    subprocess.run([CLUSTER, "up", "--nodes", str(nodes), "--link-rate", rate, "--mtu", str(mtu)],
                   check=True)
    return True


def cluster_down():
    subprocess.run([CLUSTER, "down"], check=False)


def has_flag(binary, flag):
    out = subprocess.run([binary, "train", "--help"], capture_output=True, text=True,
                         env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                              "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return flag in out.stdout


def run_ringtrain(cmp, args, work, nodes, run_root, extra, label):
    run_dir = os.path.join(run_root, f"{work.model}-{work.precision}-{label}-{time.time_ns()}")
    argv = cmp.ringtrain_command(args.bin, work, nodes, run_dir) + extra
    cmd = [CLUSTER, "run", "--np", str(nodes), "--"] + argv
    rc, out, err, _ = cmp.run(cmd, {"OMP_NUM_THREADS": "1", **cmp.MPI_ROOT_ENV}, args.timeout)
    run = rundata.Run(run_dir)
    if rc != 0 or not run.summary_file:
        return {"ok": False, "error": f"exit {rc}: {cmp.tail(err or out)}"}
    rec = {"ok": True, "run_dir": run_dir}
    rec.update(run.throughput_after_warmup(work.warmup, work.batch, nodes) or
               {"images_per_s": run.summary().get("images_per_s")})
    rec.update(run.step_ms_medians(0, skip=work.warmup))
    totals = run.rank_totals(0)
    rec["hidden_comm_share"] = totals.get("hidden_comm_share")
    return rec


def run_ddp(cmp, args, work, nodes, hook):
    port = 29400 + (os.getpid() % 500)
    base = [args.python, os.path.join(HERE, "torch_train.py"), "--model", work.model,
            "--batch-size", str(work.batch), "--steps", str(work.steps), "--warmup",
            str(work.warmup), "--synthetic-train", str(work.n_train), "--lr", str(work.lr),
            "--momentum", str(work.momentum), "--seed", str(work.seed), "--threads", "1",
            "--ddp", "--nproc", str(nodes), "--ddp-hook", hook,
            "--autocast", "bf16" if work.precision == "bf16" else "none"]
    if not work.vgg_conv_bias:
        base.append("--vgg-no-conv-bias")
    procs = []
    for i in range(nodes):
        env = {"RANK": str(i), "WORLD_SIZE": str(nodes), "MASTER_ADDR": node_address(0),
               "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        cmd = ["ip", "netns", "exec", node_namespace(i), "env"] + [f"{k}={v}" for k, v in env.items()] + base
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    outs = []
    deadline = time.time() + args.timeout
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return {"ok": False, "error": "timed out"}
    if any(p.returncode != 0 for p in procs):
        bad = next(i for i, p in enumerate(procs) if p.returncode != 0)
        return {"ok": False, "error": f"rank {bad} exit {procs[bad].returncode}: {cmp.tail(outs[bad][1])}"}
    rec = cmp.last_json_line(outs[0][0])
    rec["ok"] = True
    return rec


# Bytes per TCP segment that carry no payload: IPv4 20 + TCP 20 + timestamp option 12 (Linux
# default). tbf charges each frame with its Ethernet header (14) as well.
kTcpIpHeaderBytes = 52
kEthernetHeaderBytes = 14


def frame_overhead(mtu):
    """Bytes tbf charges per payload byte of a bulk TCP stream at this MTU: (mtu + 14) /
    (mtu - 52), 1.0456 at 1500. Node 0's tc counters over an mlp step at MTU 1500 gave 1.0475
    (the rest: ACKs, MPI headers, the metrics all-reduce)."""
    return (mtu + kEthernetHeaderBytes) / (mtu - kTcpIpHeaderBytes)


def link_limited_ms(params, nodes, bytes_per_value, rate, mtu, compute_ms):
    """The ring's bytes per rank and step, 2 (N-1)/N x gradient bytes (Patarasuk & Yuan
    2009), in MTU-sized TCP frames, over the link rate, plus the compute of one step."""
    wire = 2.0 * (nodes - 1) / nodes * params * bytes_per_value * frame_overhead(mtu)
    return 1e3 * wire * 8.0 / rate_bps(rate) + compute_ms


def main(cmp, args, works, notes, log):
    nodes = args.cluster
    compress = has_flag(args.bin, "--compress")
    if not compress:
        notes.append("this ringtrain has no --compress: the compressed pair is DDP's fp16 hook only")
    sides = [("ringtrain", ["--overlap", "on"]), ("ringtrain-no-overlap", ["--overlap", "off"]),
             ("ddp", "none"), ("ddp-fp16", "fp16")]
    if compress:
        sides.insert(1, ("ringtrain-bf16", ["--compress", "bf16"]))
    started = cluster_up(nodes, args.link_rate, args.mtu, log)
    load_before = os.getloadavg()
    results = {(w.key, s[0]): [] for w in works for s in sides}
    run_root = args.keep_runs or tempfile.mkdtemp(prefix="ringtrain-cluster-bench-")
    os.makedirs(run_root, exist_ok=True)
    try:
        for rep in range(args.repeats):
            order = sides if rep % 2 == 0 else list(reversed(sides))
            for w in works:
                for name, how in order:
                    log(f"[{rep + 1}/{args.repeats}] {w.key} b{w.batch} {nodes} nodes {name} ...")
                    if name.startswith("ringtrain"):
                        rec = run_ringtrain(cmp, args, w, nodes, run_root, how, name)
                    else:
                        rec = run_ddp(cmp, args, w, nodes, how)
                    log(f"    {rec['images_per_s']:,.1f} images/s" if rec.get("ok") else f"    FAILED: {rec['error']}")
                    results[(w.key, name)].append(rec)
    finally:
        if started:
            cluster_down()
        if not args.keep_runs:
            shutil.rmtree(run_root, ignore_errors=True)
    load_after = os.getloadavg()
    return report(cmp, args, works, sides, results, notes, load_before, load_after)


def report(cmp, args, works, sides, results, notes, load_before, load_after):
    nodes = args.cluster
    lines = [f"# ringtrain vs PyTorch DDP on {nodes} emulated nodes at {args.link_rate}, MTU {args.mtu}",
             "", f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; one rank and one thread per "
             f"node; synthetic data; {args.repeats} interleaved repeats, medians [min-max]; load "
             f"average before {load_before[0]:.1f}, after {load_after[0]:.1f} on {os.cpu_count()} "
             "cores shared by all nodes.", ""]
    lines += [f"> {n}" for n in notes]
    if notes:
        lines.append("")
    head = ["model", "batch", "side", "images/s", "ratio vs DDP (paired)", "step ms",
            "link-limited step ms", "step / link-limited", "hidden comm"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in works:
        compute = [r.get("compute_ms") for r in results[(w.key, "ringtrain")] if r.get("ok") and r.get("compute_ms")]
        compute_ms = statistics.median(compute) if compute else None
        for name, _ in sides:
            runs = results[(w.key, name)]
            ips = cmp.spread([r.get("images_per_s") for r in runs if r.get("ok")])
            base = "ddp-fp16" if name in ("ringtrain-bf16", "ddp-fp16") else "ddp"
            ratio = cmp.paired_ratios(runs, results[(w.key, base)], "images_per_s") if name != base else None
            step = cmp.spread([1e3 * w.batch * nodes / r["images_per_s"] for r in runs
                               if r.get("ok") and r.get("images_per_s")])
            bpv = 2 if name in ("ringtrain-bf16", "ddp-fp16") else 4
            limit = link_limited_ms(w.desc["params"], nodes, bpv, args.link_rate, args.mtu, compute_ms) if compute_ms else None
            hidden = cmp.spread([r.get("hidden_comm_share") for r in runs if r.get("ok")])
            lines.append("| " + " | ".join([
                w.key, str(w.batch), name, cmp.fmt_spread(ips, 1), cmp.fmt_spread(ratio, 2),
                cmp.fmt_spread(step, 1), cmp.fmt(limit, ".1f"),
                cmp.fmt(step["median"] / limit if step and limit else None, ".2f"),
                cmp.fmt_spread(hidden, 2)]) + " |")
            for r in runs:
                if not r.get("ok"):
                    lines.append(f"|  |  | {name} failed: `{r['error'].strip().splitlines()[-1] if r['error'].strip() else ''}` |||||||")
                    break
    lines += ["", "ratio: ringtrain / DDP and ringtrain-bf16 / DDP fp16 hook, paired per repeat. "
              "link-limited step: 2(N-1)/N x parameters x 4 bytes (2 for 16-bit), sent in "
              f"TCP frames of {args.mtu} bytes (x {frame_overhead(args.mtu):.4f} for headers), over the link "
              "rate, plus ringtrain's median compute per step (data, forward, backward, "
              "optimizer). hidden comm: share of ringtrain's all-reduce that ran beside "
              "backward (summary.json hidden_comm_share).", ""]
    return "\n".join(lines) + "\n"
