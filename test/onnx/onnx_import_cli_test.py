#!/usr/bin/env python3
"""ringtrain with a network read from ONNX, through the binary:
- train --model-file at np 2 (and with --precision bf16 where the CPU has native bf16; elsewhere
  only its one-line refusal is accepted), then eval, inspect and export from the checkpoint
  alone; eval --json of the checkpoint equals eval --json of its export (same weights, same bits);
- export --model-file: read -> export -> read -> export gives the same bytes;
- every bad file: exit 1 on every rank with one line naming the file, no run directory;
- --resume without the file ends on the uninterrupted run's parameters: from a checkpoint path,
  from --resume auto (the run directory's newest checkpoint), and from --resume auto finding a
  RAM snapshot kept by a run whose rank 0 died (RINGTRAIN_TEST_SNAPSHOT_KILL_AT); a checkpoint of
  another model is refused at --resume;
- a zoo model exported and read back with --init trains through the same oneDNN primitives
  (kind, implementation, layouts, shapes, in order: ONEDNN_VERBOSE) to the same parameters as the
  zoo model itself, so it runs at the zoo model's speed by construction (resnet20, mobilenetv2);
- eval --logits at np 2 of a one-layer ONNX network on IDX files written here: every logit equals
  numpy's x W^T + b in the test set's order, and the loss and accuracy they give are eval's.

usage: onnx_import_cli_test.py RINGTRAIN FILES_DIR
"""
import json
import os
import shutil
import struct
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


def params_crc(checkpoint):
    return json.loads(run(["inspect", checkpoint]).stdout)["sections"]["params_crc32"]


def write_idx(d, prefix, images, labels):
    """IDX files as the MNIST family ships them (big-endian header, then the bytes)."""
    n, h, w = images.shape
    with open(os.path.join(d, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">4i", 0x803, n, h, w) + images.tobytes())
    with open(os.path.join(d, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">2i", 0x801, n) + labels.tobytes())


def primitive_calls(args, run_dir):
    """The oneDNN primitives a 2-step run executes, in order, without their times."""
    p = subprocess.run([RINGTRAIN, "train", *args, "--dataset", "synthetic", "--synthetic-shape", "3x32x32",
                        "--synthetic-train", "8", "--synthetic-test", "4", "--batch-size", "4", "--max-steps", "2",
                        "--eval-every", "0", "--no-tensorboard", "--quiet", "--run-dir", run_dir],
                       env=dict(ENV, ONEDNN_VERBOSE="1"), capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: train {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return [",".join(line.split(",")[:-1]) for line in p.stdout.splitlines() if line.startswith("onednn_verbose,exec,")]


def check_same_primitives(tmp):
    """The ONNX export of a zoo model, read back with --init, runs the zoo model's primitives."""
    for model in ("resnet20", "mobilenetv2"):
        d = os.path.join(tmp, f"same-{model}")
        run(["train", "--model", model, "--dataset", "synthetic", "--synthetic-shape", "3x32x32", "--synthetic-train", "2",
             "--synthetic-test", "2", "--batch-size", "2", "--max-steps", "1", "--eval-every", "0", "--no-tensorboard",
             "--quiet", "--run-dir", os.path.join(d, "export")])
        path = os.path.join(d, f"{model}.onnx")
        run(["export", "--checkpoint", os.path.join(d, "export", "model.rtck"), "--onnx", path])
        zoo = primitive_calls(["--model", model], os.path.join(d, "zoo"))
        onnx_side = primitive_calls(["--model-file", path, "--init"], os.path.join(d, "onnx"))
        check(len(zoo) > 100 and zoo == onnx_side,
              f"{model}: the ONNX-read model runs the zoo's {len(zoo)} primitive calls ({len(onnx_side)} calls)")
        check(params_crc(os.path.join(d, "zoo", "model.rtck")) == params_crc(os.path.join(d, "onnx", "model.rtck")),
              f"{model}: the ONNX-read model ends on the zoo model's parameters")


def check_logits(tmp):
    """eval --logits under mpirun (two shards, a short last batch) against numpy."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    d = os.path.join(tmp, "idx")
    os.makedirs(d)
    write_idx(d, "train", rng.integers(0, 256, (8, 28, 28), dtype=np.uint8), rng.integers(0, 10, 8, dtype=np.uint8))
    images = rng.integers(0, 256, (37, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 37, dtype=np.uint8)
    write_idx(d, "t10k", images, labels)
    w = (rng.standard_normal((10, 784)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(10) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["input"], ["f"], name="flatten"),
         helper.make_node("Gemm", ["f", "w", "b"], ["logits"], name="fc", transB=1)], "linear",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    net = os.path.join(tmp, "linear.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), net)
    out = os.path.join(tmp, "logits.npy")
    r = json.loads(run(["eval", "--model-file", net, "--dataset", "fashion-mnist", "--data-dir", d, "--no-normalize",
                        "--batch-size", "8", "--json", "--logits", out], np=2).stdout)
    got = np.load(out)
    want = (images.reshape(37, 784).astype(np.float64) / 255.0) @ w.T.astype(np.float64) + b
    err = float(np.abs(got - want).max() / np.abs(want).max())
    check(got.dtype == np.float32 and got.shape == (37, 10) and err < 1e-5 and r["logits_file"] == out,
          f"eval --logits: {got.dtype} {got.shape}, max |error| / max |logit| {err:.1e} against numpy")
    z = got.astype(np.float64)
    loss = float(np.mean(np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1) - z[np.arange(37), labels]))
    accuracy = float(np.mean(z.argmax(1) == labels))
    check(abs(loss - r["loss"]) <= 1e-6 * r["loss"] and accuracy == r["accuracy"],
          f"the logits give eval's loss and accuracy ({loss!r} vs {r['loss']!r}, {accuracy} vs {r['accuracy']})")
    p = run(["eval", "--model-file", net, "--dataset", "fashion-mnist", "--data-dir", d, "--logits",
             os.path.join(tmp, "no", "such", "dir", "x.npy")], ok=False)
    check(p.returncode == 2 and "--logits" in p.stderr and "does not exist" in p.stderr,
          "eval --logits into a missing directory: a usage error before evaluating")


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
        # bf16 compute with a graph from a file, where the CPU has native bf16 (else the one-line refusal).
        bf = run(["train", "--model-file", net, *DATA, "--batch-size", "8", "--max-steps", "2", "--precision", "bf16",
                  "--run-dir", os.path.join(tmp, "bf16")], np=2, ok=False)
        if bf.returncode != 0 and "--precision bf16 needs a CPU with native bf16" in bf.stderr:
            print("skip bf16 --model-file: " + next(l for l in bf.stderr.splitlines() if "native bf16" in l))
        else:
            bf_meta = json.loads(run(["inspect", os.path.join(tmp, "bf16", "model.rtck")]).stdout) if bf.returncode == 0 else {}
            check(bf.returncode == 0 and bf_meta.get("model") == "onnx:all_ops" and bf_meta.get("global_step") == 2,
                  f"train --model-file --precision bf16 at np 2 (exit {bf.returncode}: {bf.stderr.strip()[-200:]})")
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
        # --resume auto finds the same checkpoint in the run directory: the graph comes from it.
        auto_dir = os.path.join(tmp, "auto")
        os.makedirs(os.path.join(auto_dir, "checkpoints"))
        shutil.copy(os.path.join(rd, "checkpoints", "ckpt-000000002.rtck"), os.path.join(auto_dir, "checkpoints"))
        p = run(["train", *DATA, "--batch-size", "8", "--max-steps", "4", "--run-dir", auto_dir, "--resume", "auto"], np=2)
        check("resumed from" in p.stdout and params_crc(os.path.join(auto_dir, "model.rtck")) == meta["sections"]["params_crc32"],
              "--resume auto without --model-file ends on the uninterrupted run's parameters")
        # A run whose rank 0 dies writing its step-4 snapshot keeps step 2's in RAM; --resume auto
        # without the file continues from it (no checkpoint directory) to the same end.
        ram, killed = os.path.join(tmp, "ram"), os.path.join(tmp, "killed")
        snap = [*DATA, "--batch-size", "8", "--max-steps", "4", "--run-dir", killed, "--snapshot-every", "2",
                "--snapshot-dir", ram]
        p = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                            "-x", "RINGTRAIN_TEST_SNAPSHOT_KILL_AT=4", RINGTRAIN, "train", "--model-file", net, *snap],
                           env=ENV, capture_output=True, text=True, timeout=120)
        kept = os.path.join(ram, "node-0-of-1", "snap-000000002.rtck")
        check(p.returncode != 0 and os.path.exists(kept), "a run killed while writing a snapshot keeps the previous one")
        p = run(["train", *snap, "--resume", "auto"], np=2)
        check("resumed from snapshot" in p.stdout and params_crc(os.path.join(killed, "model.rtck")) == meta["sections"]["params_crc32"],
              "--resume auto from a snapshot without --model-file ends on the uninterrupted run's parameters")
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
        check_same_primitives(tmp)
        check_logits(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed")


if __name__ == "__main__":
    main()
