#!/usr/bin/env python3
"""ringtrain with a network read from ONNX, through the binary:
- train --model-file at np 2, then eval, inspect and export from the checkpoint alone; eval
  --json of the checkpoint equals eval --json of its export (same weights, same bits);
- export --model-file: read -> export -> read -> export gives the same bytes;
- every bad file: exit 1 on every rank with one line naming the file, no run directory;
- --resume without the file ends on the uninterrupted run's parameters; a checkpoint of another
  model is refused at --resume.

usage: onnx_import_cli_test.py RINGTRAIN FILES_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

RINGTRAIN, FILES = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
DATA = ["--dataset", "synthetic", "--synthetic-shape", "3x12x12", "--synthetic-classes", "5",
        "--synthetic-train", "64", "--synthetic-test", "37"]
failures = []


def run(args, np=0, ok=True):
    cmd = (["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none"] if np else []) + [RINGTRAIN] + args
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def main():
    tmp = tempfile.mkdtemp(prefix="onnx_cli_")
    try:
        net = os.path.join(FILES, "all_ops.onnx")
        described = run(["models", "--model-file", net]).stdout
        check("onnx:all_ops, input N x 3x12x12, 5 classes, 4309 params" in described, "models --model-file")
        plan = run(["models", "--model-file", net, "--plan", "--plan-batch", "2"]).stdout
        check("plan onnx:all_ops input 3x12x12 batch 2" in plan and "fused: 1 batch norm + ReLU" in plan,
              "models --model-file --plan")

        rd = os.path.join(tmp, "run")
        run(["train", "--model-file", net, *DATA, "--batch-size", "8", "--max-steps", "4", "--run-dir", rd,
             "--checkpoint-every-steps", "2"], np=2)
        ck = os.path.join(rd, "model.rtck")
        meta = json.loads(run(["inspect", ck]).stdout)
        check(meta["model"] == "onnx:all_ops" and "characters of base64 ONNX" in meta["model_graph"],
              "inspect: the checkpoint names the model and carries its graph")
        by_ck = json.loads(run(["eval", "--checkpoint", ck, "--json"], np=2).stdout)
        exported = os.path.join(tmp, "a", "net.onnx")
        os.makedirs(os.path.dirname(exported))
        run(["export", "--checkpoint", ck, "--onnx", exported])
        by_file = json.loads(run(["eval", "--model-file", exported, *DATA, "--json"], np=2).stdout)
        check(by_ck["samples"] == 37 and by_ck["loss"] == by_file["loss"] and by_ck["accuracy"] == by_file["accuracy"],
              f"eval of the checkpoint equals eval of its export ({by_ck['loss']!r} vs {by_file['loss']!r})")

        # read -> export -> read -> export: the same bytes (same file stem, so the same graph name).
        b = os.path.join(tmp, "b", "net.onnx")
        c = os.path.join(tmp, "c", "net.onnx")
        for src, dst in ((exported, b), (b, c)):
            os.makedirs(os.path.dirname(dst))
            run(["export", "--model-file", src, "--onnx", dst])
        with open(b, "rb") as fb, open(c, "rb") as fc:
            check(fb.read() == fc.read(), "export --model-file twice: byte-identical files")

        # Resume from the mid-run checkpoint without the file: the checkpoint's graph, the same end.
        resumed_dir = os.path.join(tmp, "resumed")
        run(["train", *DATA, "--batch-size", "8", "--max-steps", "4", "--run-dir", resumed_dir,
             "--resume", os.path.join(rd, "checkpoints", "ckpt-000000002.rtck")], np=2)
        end = json.loads(run(["inspect", os.path.join(resumed_dir, "model.rtck")]).stdout)
        check(end["model"] == "onnx:all_ops" and end["sections"]["params_crc32"] == meta["sections"]["params_crc32"],
              "--resume without --model-file ends on the uninterrupted run's parameters")
        other = run(["train", "--model", "resnet20", *DATA, "--batch-size", "8", "--resume", ck, "--run-dir", os.path.join(tmp, "other")],
                    np=2, ok=False)
        check(other.returncode != 0 and "onnx:all_ops" in other.stderr, "a checkpoint of another model is refused")

        with open(os.path.join(FILES, "bad_cases.json")) as f:
            cases = json.load(f)
        for name, expected in cases.items():
            path = os.path.join(FILES, name)
            p = run(["models", "--model-file", path], ok=False)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 1 and len(lines) == 1 and path in lines[0] and all(e in lines[0] for e in expected),
                  f"{name}: {lines[-1] if lines else '(no error)'}")
        # Under mpirun: every rank fails alike, nothing is written.
        bad = os.path.join(FILES, "bad_unsupported_op.onnx")
        out = os.path.join(tmp, "bad_run")
        p = run(["train", "--model-file", bad, *DATA, "--run-dir", out], np=2, ok=False)
        check(p.returncode != 0 and "op Sigmoid is not supported" in p.stderr and not os.path.exists(out),
              "train with a bad file: error, no run directory")
        onnx_out = os.path.join(tmp, "never.onnx")
        p = run(["export", "--model-file", bad, "--onnx", onnx_out], ok=False)
        check(p.returncode == 1 and not os.path.exists(onnx_out), "export of a bad file writes nothing")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
