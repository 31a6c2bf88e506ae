"""Which algorithm auto picks on a recorded all-reduce record, and that pick's recorded time against the fastest.

Derived, nothing measured: for every (node count, size) cell of RECORD (an allreduce_bench
record of one rank per node, e.g. docs/benchmarks/allreduce-cluster-quiet.txt) where at least
two of auto's candidates (ring, rd, rab) were recorded, the pick of the cost model (a mirror of
src/collectives/AllreduceCostModel.cpp, predict_allreduce_seconds and choose_by_cost_model, with
its built-in defaults or the --alpha-s ... given), the predicted times, the recorded ones, and
auto's recorded time over the fastest of ring/rd/rab; beside it the threshold rule auto used
before the cost model. test/collectives/AutoChoiceTest.cpp pins the C++ choices of ten of these
cells, so the mirror and the C++ cannot drift apart unnoticed. A markdown table on stdout, the
count of cells over 1.05 on stderr.

  bench.py auto-choice docs/benchmarks/allreduce-cluster-quiet.txt
"""
import math
import re
import sys

# AllreduceCostModel's built-in defaults (AllreduceCostModel.h says where they come from).
DEFAULTS = dict(alpha_s=50e-6, beta_s_per_byte=8.06e-9, rendezvous_beta_s_per_byte=12.5e-9,
                gamma_s_per_byte=0.1e-9, eager_limit_bytes=65536, choice_margin=0.05)
DOUBLING_MAX = 2048  # AllreduceTuning::rd_doubling_max_bytes
CHUNK = 65408  # AllreduceTuning::ring_chunk_bytes_network (the ring's and rab's pipeline unit)
ORDER = ["ring", "rd", "rab"]  # preference on near-ties (AllreduceCostModel.cpp says why)


def predict(algo, n, p, m):
    """One rank per node (the record's cells): AllreduceCostModel.cpp's formulas with
    ranks_per_node = link_share = 1, fp32 on the wire."""
    if p <= 1 or n == 0:
        return 0.0
    a, b, g = m["alpha_s"], m["beta_s_per_byte"], m["gamma_s_per_byte"]
    q = 1 << (p.bit_length() - 1)  # the largest power of two <= p

    def exchange(s, reduce):  # one pipelined exchange of s bytes each way
        c = min(s, CHUNK)
        return a + (max(s * b + c * g, c * b + s * g) if reduce else s * b)

    if algo == "ring":  # the larger of the chunk's latency chain and the link's load
        s = n / p
        c = min(s, CHUNK)
        chain = 2 * (p - 1) * (a + c * b) + (p - 1) * c * g
        link = (p - 1) * (max(s * b, s * g) + s * b)
        return max(chain, link)
    if algo == "rab":
        t = 0.0 if q == p else exchange(n, True) + exchange(n, False)
        s = n
        for _ in range(int(round(math.log2(q)))):
            s /= 2
            t += exchange(s, True) + exchange(s, False)
        return t
    if algo == "rd":
        def message(size):  # whole; above the eager limit a rendezvous: two more latencies
            if size > m["eager_limit_bytes"]:
                return 3 * a + size * m["rendezvous_beta_s_per_byte"]
            return a + size * b
        t = 0.0 if q == p else 2 * message(n) + n * g
        k = int(round(math.log2(q)))
        if n <= DOUBLING_MAX or n // 4 < q:
            return t + k * (message(n) + n * g)
        for j in range(1, k + 1):
            msg = n / 2 ** j
            t += 2 * message(msg) + msg * g
        return t
    raise ValueError(algo)


def choose(n, p, m):
    times = {x: predict(x, n, p, m) for x in ORDER}
    best = min(times.values())
    for x in ORDER:
        if times[x] <= best * (1 + m["choice_margin"]):
            return x, times
    raise AssertionError


def choose_before(n, p):
    """auto before the cost model (AllreduceTuning's thresholds at 3ce38dd): rd below 64 KiB
    across hosts (16 KiB for a rank count that is not a power of two), the ring from there."""
    pow2 = p & (p - 1) == 0
    return "rd" if n < (64 << 10 if pow2 else 16 << 10) else "ring"


def ratio_text(pick, measured, nodes):
    best = min(measured.values())
    if pick in measured:
        return f"{measured[pick] / best:.3f}"
    if pick == "rab" and nodes == 2 and "ring" in measured:
        # At 2 ranks rab and the ring send the same messages (allreduce-rab.md: 0.999-1.004).
        return f"{measured['ring'] / best:.3f} (rab = ring at 2 nodes)"
    return "not recorded"


def read_cells(path):
    """(context, nodes, size) -> {algo: avg us}, one rank per node only."""
    cells, block, nodes, several, burst, mtu = {}, 0, None, False, "", "1500"
    for line in open(path):
        if line.startswith("cluster up:"):
            nodes = int(line.split()[2])
            burst = re.search(r"burst (\S+)", line).group(1)
            block += 1
            several = False
        elif line.startswith("## cluster_"):
            mtu = re.search(r"mtu(\d+)", line.split()[1]).group(1)
            block += 1
        elif line.startswith("# allreduce_bench:"):
            several = " 0 with several ranks" not in line
            block += 1
        elif re.match(r"^(recv-depth|n\d mtu)", line):
            if line.startswith("n"):
                mtu = re.search(r"mtu(\d+)", line).group(1)
            block += 1
        elif line.startswith("# ==== 3"):
            mtu = "1500"
        fields = line.split()
        if len(fields) >= 6 and fields[0].isdigit() and not several and nodes:
            key = (block, f"{nodes} nodes, MTU {mtu}, burst {burst}", nodes, int(fields[0]))
            cells.setdefault(key, {})[fields[2]] = float(fields[4])
    return cells


def size_text(n):
    return next((f"{n // d} {u}" for u, d in (("MiB", 1 << 20), ("KiB", 1 << 10)) if n >= d), f"{n} B")


def add_arguments(ap):
    ap.add_argument("record")
    for key, value in DEFAULTS.items():
        ap.add_argument("--" + key.replace("_", "-"), type=float, default=value)


def run(args):
    m = {k: getattr(args, k) for k in DEFAULTS}
    rows = []
    for (block, where, nodes, n), algos in sorted(read_cells(args.record).items()):
        measured = {a: t for a, t in algos.items() if a in ORDER}
        if len(measured) < 2:
            continue  # a cell needs at least two of auto's candidates to compare
        pick, times = choose(n, nodes, m)
        before = choose_before(n, nodes)
        best_algo = min(measured, key=measured.get)
        all_best = min((t, a) for a, t in algos.items() if a != "auto")
        pred = ", ".join(f"{a} {1e6 * t:.0f}" for a, t in times.items())
        rec = ", ".join(f"{a} {t:.0f}" for a, t in sorted(algos.items()) if a != "auto")
        rows.append((where, size_text(n), pick, pred, rec, best_algo, ratio_text(pick, measured, nodes),
                     f"{before} {ratio_text(before, measured, nodes)}", f"{all_best[1]} {all_best[0]:.0f}"))
    print("| cell | size | auto picks | predicted (us) | recorded avg (us) | fastest of ring/rd/rab "
          "| auto / fastest | before: pick, ratio | fastest recorded |\n|---|---:|---|---|---|---|---:|---|---|")
    print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    ratios = [float(r[6].split()[0]) for r in rows if r[6][0].isdigit()]
    before = [float(r[7].split()[1]) for r in rows if r[7].split()[1][0].isdigit()]
    print(f"\n{len(rows)} cells; auto's pick recorded in {len(ratios)}; over 1.05: "
          f"{sum(1 for x in ratios if x > 1.05)}; worst {max(ratios):.3f}; "
          f"before: over 1.05: {sum(1 for x in before if x > 1.05)}, worst {max(before):.3f}", file=sys.stderr)
    return 0
