"""A model read from ONNX against the same zoo model: training images/s, interleaved.

Per model: the zoo model is exported as ONNX (`ringtrain train --max-steps 1` on a tiny synthetic
set, then `ringtrain export`), and then, in every round, `train --model M` and `train --model-file
M.onnx --init` (the zoo's initialisation from the same seed: both sides compute the same bits) run the same
steps: the train suite's synthetic data, per-rank batch, warm-up and timed steps per model, one
thread per rank, np 1 or `mpirun -np N --bind-to none`. The sides run interleaved (ABBA); the
figure is the ratio ONNX / zoo of rank 0's images/s after the warm-up, paired within each round:
median [min-max]. Beside it the same ratio from each run's median step (rank 0's data + forward +
backward + optimizer), which a few steps slowed by the machine move less than the mean. The target is a ratio within 2% of 1 on a quiet machine; the report's first
line gives the load it was measured under.

  bench.py onnx-train                                          # resnet20, resnet18, mobilenetv2
  bench.py onnx-train --models resnet20 --rounds 6 --np 2
  bench.py onnx-train --models lenet5,resnet20 --steps 5 --warmup 2 --rounds 2   # a quick check
"""
import os
import tempfile

from benchlib import plot, ringtrain
from benchlib.cluster import host_launch
from benchlib.proc import check, load
from benchlib.rounds import add_options, cell, flat, interleave, paired, values
from benchlib.table import Table, conditions, emit
from benchlib.torch_peer import NATURAL_SHAPE
from suites import train


def add_arguments(p):
    p.add_argument("--models", default="resnet20,resnet18,mobilenetv2", help="from " + ",".join(sorted(NATURAL_SHAPE)))
    p.add_argument("--batch", default="", help="per-rank batch overrides, e.g. resnet18=16")
    p.add_argument("--steps", type=int, help="timed steps of every model (default: the train suite's per model)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default: the train suite's per model)")
    p.add_argument("--precision", default="fp32", help="fp32 and/or bf16, comma-separated")
    p.add_argument("--data-mb", type=float, default=32.0, help="cap on the synthetic set's pixels (MB)")
    p.add_argument("--np", type=int, default=1, help="ranks of both sides (mpirun -np N above 1)")
    p.add_argument("--bin", default=ringtrain.default_bin())
    p.set_defaults(torch_format="default")  # train.Work's PyTorch side, unused here
    add_options(p)


def export(args, w, work_dir):
    """M.onnx of the zoo model at the work's shape (one step's weights; --init replaces them)."""
    run_dir, path = os.path.join(work_dir, f"export-{w.model}"), os.path.join(work_dir, f"{w.model}.onnx")
    check([args.bin, "train", "--model", w.model, "--dataset", "synthetic", "--synthetic-shape",
           "x".join(map(str, w.shape)), "--synthetic-train", "2", "--synthetic-test", "2", "--batch-size", "2",
           "--max-steps", "1", "--eval-every", "0", "--no-tensorboard", "--quiet", "--run-dir", run_dir],
          {"OMP_NUM_THREADS": "1"}, args.timeout)
    check([args.bin, "export", "--checkpoint", os.path.join(run_dir, "model.rtck"), "--onnx", path], None, args.timeout)
    return path


def onnx_argv(argv, path):
    """The zoo run's command line with --model M replaced by --model-file path --init."""
    i = argv.index("--model")
    return argv[:i] + ["--model-file", path, "--init"] + argv[i + 2:]


def run(args):
    work = train.works(args)
    load_before = load()
    sides = ["zoo", "onnx"]
    with tempfile.TemporaryDirectory(prefix="bench-onnx-train-") as work_dir:
        files = {item: export(args, w, work_dir) for item, w in work.items()}

        def measure(item, side, rnd):
            w = work[item]
            run_dir = os.path.join(work_dir, f"{item.replace(' ', '-')}-{side}-r{rnd}")
            argv = w.ringtrain_argv(args.bin, args.np, run_dir)
            if side == "onnx":
                argv = onnx_argv(argv, files[item])
            mpirun = "--bind-to none" + (" --oversubscribe" if args.np > (os.cpu_count() or 1) else "")
            return ringtrain.timed_run(host_launch(args.np, argv, 1, mpirun), run_dir, w.warmup, w.batch,
                                       timeout=args.timeout)

        results = interleave(args.rounds, list(work), sides, measure)
    t = Table("model", "precision", "batch/rank", "steps", "zoo img/s", "ONNX img/s", "ONNX / zoo",
              "ONNX / zoo, median step", "ONNX RSS / zoo RSS")
    ratios = []
    for item, w in work.items():
        zoo, onnx = results[(item, "zoo")], results[(item, "onnx")]
        ratios.append(paired(onnx, zoo, "images_per_s"))
        t.add(w.model, w.precision, w.batch, w.steps, cell(values(zoo, "images_per_s"), 1),
              cell(values(onnx, "images_per_s"), 1), cell(ratios[-1], 3), cell(paired(zoo, onnx, "compute_ms"), 3),
              cell(paired(onnx, zoo, "peak_rss_mb"), 2))
    if args.plot:
        plot.ratios(args.plot, f"ONNX / zoo, images/s, np {args.np}", list(work), ratios, "ratio")
    text = [conditions(f"np {args.np}, one thread per rank, {args.rounds} interleaved rounds (ABBA), medians "
                       f"[min-max], ratios paired within each round; the ONNX side is `train --model-file "
                       f"<export> --init`; {args.bin}", load_before), "", t.markdown()]
    emit(args, "\n".join(text), flat(results))
    return 0
