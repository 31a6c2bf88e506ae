#!/usr/bin/env python3
"""`bench.py overhead --feature exact` (scripts/bench/suites/overhead.py) without MPI: its argument
checks, the three runs it makes of a model, and the figures (benchlib/ringtrain.measure) and table
it makes from run directories (fabricated here with known step records)."""
import contextlib
import io
import json
import os
import pathlib
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(root / "scripts" / "bench"))
import bench  # noqa: E402
from benchlib import ringtrain  # noqa: E402
from suites import overhead as x  # noqa: E402


def parse(argv):
    return x.settle(bench.parser().parse_args(["overhead", "--feature", "exact", *argv]))


def rejects(argv, words):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parse(argv)
        except SystemExit as e:
            assert e.code == 2, (argv, e.code)
            assert words in err.getvalue(), (argv, err.getvalue())
            return
    raise AssertionError(f"{argv} was accepted")


rejects(["--batch-size", "30"], "--batch-size 30 is not divisible by 4")
rejects(["--steps", "foo=3"], "--steps names 'foo', which is not in --models")
rejects(["--steps", "mlp=0"], "--steps mlp: expected a positive integer")
rejects(["--cluster", "1"], "--cluster needs at least 2 nodes")
rejects(["--np", "1"], "--np must be at least 2")
a = parse(["--models", "lenet5,vgg11", "--steps", "vgg11=7"])
assert a.steps == {"lenet5": 60, "vgg11": 7}, a.steps
assert parse(["--steps", "9"]).steps == {"lenet5": 9, "mlp": 9, "vgg11": 9}
assert parse(["--cluster", "3"]).np == 3

# The same global batch in all three runs: np x B, np shards of B, 4np shards of B/4.
assert x.cases(parse(["--np", "2", "--batch-size", "32"])) == [("fp32", 32, [], {}),
                                                               ("S=2", 32, ["--logical-shards", "2"], {}),
                                                               ("S=8", 8, ["--logical-shards", "8"], {})]
argv = x.train_argv(a, "/bin/ringtrain", "vgg11", 32, [], "/tmp/d")
assert argv[argv.index("--synthetic-shape") + 1] == "3x32x32" and argv[argv.index("--max-steps") + 1] == "12", argv
assert argv[argv.index("--batch-size") + 1] == "32" and argv.count("--batch-size") == 1, argv
assert "--overlap" not in argv, "the overlap setting is left at its default"


def fake_run(path, shards, step_s, allreduce_s, wait_s, convert_s, bytes_per_step):
    """A 2-rank run of 8 steps, one record each; rank 1's all-reduce phases are twice rank 0's."""
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"world_size": 2}, f)
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump({"world_size": 2, "steps": 8, **({"logical_shards": shards} if shards else {})}, f)
    for r in (0, 1):
        k = r + 1
        with open(os.path.join(path, f"rank-{r}.jsonl"), "w") as f:
            for s in range(1, 9):
                rec = {"type": "step", "t": 0.5 + s * step_s, "step": s, "steps": 1, "allreduce_s": k * allreduce_s,
                       "wait_s": k * wait_s, "bytes_sent": 1000 + s * bytes_per_step}
                if shards:
                    rec["convert_s"] = k * convert_s
                f.write(json.dumps(rec) + "\n")


with tempfile.TemporaryDirectory() as tmp:
    fake_run(os.path.join(tmp, "a"), 0, 0.100, 0.010, 0.008, 0, 2_000_000)
    fake_run(os.path.join(tmp, "b"), 2, 0.150, 0.040, 0.030, 0.006, 4_000_000)
    m = ringtrain.measure(os.path.join(tmp, "b"), 3)  # steps 4..8 timed after the record of step 3
    want = {"shards": 2, "step_ms": 150.0, "allreduce_ms": 60.0, "mpi_ms": 45.0, "convert_ms": 9.0, "rest_ms": 6.0,
            "mb_sent": 4.0}
    for key, v in want.items():
        assert abs(m[key] - v) < 1e-9, (key, m[key], v)
    assert ringtrain.measure(os.path.join(tmp, "b"), 8) is None, "no timed step after the warm-up"
    assert ringtrain.measure(os.path.join(tmp, "missing"), 3) is None
    base = ringtrain.measure(os.path.join(tmp, "a"), 3)
    assert base["convert_ms"] == 0.0 and abs(base["rest_ms"] - 3.0) < 1e-9, base

    results = {("mlp", "fp32"): [base, dict(base, step_ms=200.0)],
               ("mlp", "S=2"): [m, dict(m, step_ms=220.0)]}
    args = parse(["--models", "mlp"])
    table = x.report(args, results, ["fp32", "S=2"], {"fp32": "fp32", "S=2": "fp32"}).splitlines()
    rows = [line for line in table if line.startswith("| mlp")]
    # The ratio is the median of the per-round ratios (1.5 and 1.1), not of the medians.
    assert rows[1].startswith("| mlp | S=2 | 185.0 [150.0-220.0] | 1.300 [1.100-1.500] | 60.0 [60.0-60.0] | "
                              "45.0 [45.0-45.0] | 9.0 [9.0-9.0] | 6.0 [6.0-6.0] | 4.000 [4.000-4.000] |"), rows[1]
    assert rows[0].split(" | ")[3:7] == ["1", "15.0 [15.0-15.0]", "12.0 [12.0-12.0]", "0.0 [0.0-0.0]"], rows[0]
print("ok")
