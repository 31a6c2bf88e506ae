"""Where a training step's time goes: oneDNN's primitives by kind, its reorders by role, and the rest.

Per model, two runs of ringtrain on synthetic data under ONEDNN_VERBOSE=1 (one thread), of
--from and --to steps; the exec times of the shorter run are subtracted from the longer one's,
so the one-time costs of the first steps cancel and the figures are those of steps
--from+1..--to (default 5-14). Reorders are told apart by their dims and layouts: activations
(the batch first; same-layout ones are copies), weights into a primitive's layout (plain ->
blocked), diff_weights back into the plain gradient arena (blocked -> plain). "outside oneDNN":
rank 0's wall clock over those steps (its step records) minus every primitive's exec time:
ringtrain's own code (loss, optimizer, arena), the verbose printing itself, and waiting.

  bench.py primitives --models resnet20,vgg11
  bench.py primitives --models resnet18 --from 2 --to 5 --batch resnet18=32
  bench.py primitives --models resnet50,vgg11 --precision bf16    # bf16 compute (native-bf16 CPUs)
"""
import collections
import os
import re
import tempfile

from benchlib import ringtrain
from benchlib.proc import BenchError, load, tail
from benchlib.proc import run as run_cmd
from benchlib.table import Table, conditions, emit
from suites.train import BATCH, NATURAL_SHAPE

ROLE_ORDER = ["conv forward", "conv backward-data", "conv backward-weights", "batch norm", "eltwise",
              "binary / sum", "pooling", "inner product", "softmax / other", "reorder: weights",
              "reorder: diff_weights", "reorder: activations", "copy (same layout)"]


def add_arguments(p):
    p.add_argument("--models", default="resnet20", help="from " + ",".join(sorted(NATURAL_SHAPE)))
    p.add_argument("--batch", default="", help="per-model batch overrides, e.g. resnet18=16")
    p.add_argument("--from", dest="first", type=int, default=4, help="steps of the shorter run (warm-up)")
    p.add_argument("--to", dest="last", type=int, default=14, help="steps of the longer run")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="ringtrain's --precision")
    p.add_argument("--bin", default=ringtrain.default_bin())
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    p.add_argument("--out", metavar="DIR", help="also write DIR/report.md")


def role(fields, batch):
    """The row of ROLE_ORDER one verbose exec line counts towards."""
    kind, prop = fields[3], fields[5]
    if kind == "convolution":
        return {"forward_training": "conv forward", "forward_inference": "conv forward",
                "backward_data": "conv backward-data"}.get(prop, "conv backward-weights")
    if kind == "reorder":
        tags = re.findall(r"_(?:f32|bf16)::blocked:(\w+):", fields[6]) or ["?", "?"]
        dims = fields[9].split("x")
        if dims[0] == str(batch) and len(dims) > 1:
            return "copy (same layout)" if tags[0] == tags[-1] else "reorder: activations"
        if tags[0] == tags[-1]:
            return "copy (same layout)"
        return "reorder: diff_weights" if tags[-1] in ("a", "ab", "abc", "abcd", "abcde") else "reorder: weights"
    return {"batch_normalization": "batch norm", "eltwise": "eltwise", "binary": "binary / sum", "sum": "binary / sum",
            "pooling_v2": "pooling", "pooling": "pooling", "inner_product": "inner product"}.get(kind, "softmax / other")


def profile(args, model, batch, steps, work):
    """({role: ms}, {role: calls}, rank 0's wall seconds per step record) of one verbose run."""
    run_dir = os.path.join(work, f"{model}-{steps}")
    shape = "x".join(map(str, NATURAL_SHAPE[model]))
    argv = ringtrain.train_argv(args.bin, model, steps, 0, batch, run_dir, shape, batch * steps,
                                ["--epochs", "1", "--eval-batch-size", str(batch), "--precision", args.precision], batch)
    rc, out, err = run_cmd(argv, {"OMP_NUM_THREADS": "1", "ONEDNN_VERBOSE": "1"}, args.timeout)
    if rc != 0:
        raise BenchError(f"{' '.join(argv)}: exit {rc}: {tail(err or out)}")
    ms, calls = collections.Counter(), collections.Counter()
    for line in out.splitlines():
        f = line.split(",")
        if len(f) > 10 and f[1] == "exec":
            r = role(f, batch)
            ms[r] += float(f[-1])
            calls[r] += 1
    steps_t = {s["step"]: s["t"] for s in ringtrain.rundata.Run(run_dir).of_type(0, "step") if "step" in s}
    return ms, calls, steps_t


def run_suite(args, model, work):
    batch = dict(x.split("=") for x in args.batch.split(",") if x).get(model, BATCH.get(model, 32))
    batch = int(batch)
    a = profile(args, model, batch, args.first, work)
    b = profile(args, model, batch, args.last, work)
    n = args.last - args.first
    wall_ms = 1e3 * (b[2][args.last] - b[2][args.first]) / n
    t = Table("part", "ms / step", "share of step", "share of oneDNN", "calls / step")
    per = {r: (b[0][r] - a[0][r]) / n for r in ROLE_ORDER}
    dnnl = sum(per.values())
    for r in ROLE_ORDER:
        if b[1][r]:
            t.add(r, f"{per[r]:.2f}", f"{per[r] / wall_ms:.1%}", f"{per[r] / dnnl:.1%}",
                  f"{(b[1][r] - a[1][r]) / n:g}")
    reorders = sum(per[r] for r in ROLE_ORDER if r.startswith("reorder"))
    t.add("**all oneDNN**", f"{dnnl:.2f}", f"{dnnl / wall_ms:.1%}", "100%", "")
    t.add("outside oneDNN", f"{wall_ms - dnnl:.2f}", f"{(wall_ms - dnnl) / wall_ms:.1%}", "", "")
    t.add("**step (wall)**", f"{wall_ms:.2f}", "100%", "", "")
    return (f"### {model}, {args.precision}, batch {batch}, {'x'.join(map(str, NATURAL_SHAPE[model]))}, steps "
            f"{args.first + 1}-{args.last}: reorders {reorders / dnnl:.1%} of oneDNN's time\n\n" + t.markdown())


def run(args):
    load_before = load()
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in NATURAL_SHAPE]
    if bad or args.first < 1 or args.last <= args.first:
        args.parser.error(f"unknown model {bad}" if bad else "need 1 <= --from < --to")
    with tempfile.TemporaryDirectory(prefix="bench-primitives-") as work:
        parts = [run_suite(args, m, work) for m in models]
    text = [conditions(f"one thread, ONEDNN_VERBOSE=1 exec times; {args.bin}", load_before), "", *parts]
    emit(args, "\n\n".join(text))
    return 0
