#!/usr/bin/env python3
"""ringtrain against PyTorch on torchvision models read from ONNX (optional: needs python3-torch
1.13 and torchvision 0.14; never run by the test suite).

For each model: export it with torch.onnx.export in training mode (opset 13), write one batch
of random images as a CIFAR-10 binary set, then
- eval: ringtrain eval --model-file --json (eval mode, running statistics) against PyTorch's
  mean cross-entropy of the same batch in eval mode;
- one SGD step (lr 0.1, no momentum, no weight decay) in training mode over the same batch:
  every parameter's update (before minus after) against PyTorch's, as the relative error
  ||u_rt - u_pt|| / ||u_pt|| per tensor (worst and median), and both against PyTorch in fp64,
  which shows how much of the difference fp32 rounding alone makes.

usage: onnx_torch_check.py RINGTRAIN [--models resnet18,mobilenet_v2] [--batch 16] [--verbose]
"""
import argparse
import copy
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


def write_cifar(d, images, labels):
    """CIFAR-10 binary: label byte then 3x32x32 bytes; the training set is the batch (5 files)."""
    os.makedirs(d, exist_ok=True)
    rec = lambda i: bytes([labels[i]]) + images[i].tobytes()
    parts = np.array_split(np.arange(len(labels)), 5)
    for b, idx in enumerate(parts, 1):
        with open(os.path.join(d, f"data_batch_{b}.bin"), "wb") as f:
            f.write(b"".join(rec(i) for i in idx))
    with open(os.path.join(d, "test_batch.bin"), "wb") as f:
        f.write(b"".join(rec(i) for i in range(len(labels))))


def sgd_updates(model, x, y, dtype):
    """before - after of one SGD step (lr 0.1, no momentum) of a copy of model, per parameter, as float64."""
    model = copy.deepcopy(model).to(dtype).train()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x.to(dtype)), y).backward()
    opt.step()
    return {k: (before[k] - v.detach()).double().numpy() for k, v in model.named_parameters()}


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def check(ringtrain, name, batch, tmp, verbose):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(num_classes=10)
    if name == "mobilenet_v2":
        m.classifier[0].p = 0.0  # dropout off: the step must see the same network
    images = np.random.default_rng(1).integers(0, 256, (batch, 3, 32, 32), dtype=np.uint8)
    labels = np.random.default_rng(2).integers(0, 10, batch).astype(np.uint8)
    data = os.path.join(tmp, name + "-data")
    write_cifar(data, images, labels)
    path = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(m, torch.zeros(2, 3, 32, 32), path, training=torch.onnx.TrainingMode.TRAINING, opset_version=13,
                      do_constant_folding=False, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    flags = ["--dataset", "cifar10", "--data-dir", data, "--no-normalize"]

    m.eval()
    with torch.no_grad():
        pt_loss = torch.nn.functional.cross_entropy(m(x), y).item()
    out = subprocess.run([ringtrain, "eval", "--model-file", path, *flags, "--batch-size", str(batch), "--json"],
                         env=ENV, capture_output=True, text=True, check=True).stdout
    rt_loss = json.loads(out)["loss"]

    # One SGD step in training mode, in fp32 and, as the reference both are judged by, in fp64.
    pt_update = sgd_updates(m, x, y, torch.float32)
    ref_update = sgd_updates(m, x, y, torch.float64)
    run_dir = os.path.join(tmp, name + "-run")
    subprocess.run([ringtrain, "train", "--model-file", path, *flags, "--batch-size", str(batch), "--max-steps", "1",
                    "--epochs", "1", "--lr", "0.1", "--momentum", "0", "--lr-schedule", "constant", "--quiet",
                    "--run-dir", run_dir], env=ENV, check=True)
    after_file = os.path.join(tmp, name + "-after.onnx")
    subprocess.run([ringtrain, "export", "--checkpoint", os.path.join(run_dir, "model.rtck"), "--onnx", after_file],
                   env=ENV, check=True, capture_output=True)
    # PyTorch's initializer names -> (node, input slot) -> ringtrain's initializer at that slot.
    src = onnx.load(path).graph
    inits = {t.name for t in src.initializer}
    slot = {i: (n.name, k) for n in src.node for k, i in enumerate(n.input) if i in inits}
    after_graph = onnx.load(after_file).graph
    by_node = {n.name: list(n.input) for n in after_graph.node}
    after = {t.name: numpy_helper.to_array(t) for t in after_graph.initializer}
    rt_update = {}
    for pname, p in m.named_parameters():
        node, k = slot[pname]
        # ringtrain names each layer after its node and keeps PyTorch's layouts (Gemm transB = 1).
        rt_update[pname] = p.detach().double().numpy() - after[by_node[node][k]].astype(np.float64)
    # An update that is zero in exact arithmetic (the shift of a batch norm whose output only a
    # training-mode batch norm reads: its gradient sums to 0) is rounding noise in all three:
    # left out of the relative figures.
    largest = max(np.linalg.norm(v) for v in ref_update.values())
    kept = [k for k in ref_update if np.linalg.norm(ref_update[k]) >= 1e-5 * largest]
    vs_pt = sorted(((rel(rt_update[k], pt_update[k]), k) for k in kept), reverse=True)
    vs_ref = sorted(((rel(rt_update[k], ref_update[k]), k) for k in kept), reverse=True)
    pt_ref = sorted(((rel(pt_update[k], ref_update[k]), k) for k in kept), reverse=True)
    if verbose:
        for e, k in vs_pt:
            if e > 1e-4:
                print(f"  {k}: vs PyTorch fp32 {e:.2e}, vs fp64 {rel(rt_update[k], ref_update[k]):.2e} "
                      f"(PyTorch fp32 vs fp64 {rel(pt_update[k], ref_update[k]):.2e})")
    med = lambda e: e[len(e) // 2][0]
    worst = vs_pt[0][0]
    print(f"{name}: eval loss ringtrain {rt_loss:.9g} PyTorch {pt_loss:.9g} rel {abs(rt_loss - pt_loss) / pt_loss:.2e}")
    print(f"{name}: SGD step updates over {len(kept)} tensors ({len(ref_update) - len(kept)} zero up to rounding left out), "
          f"relative error worst / median: ringtrain vs PyTorch fp32 {worst:.2e} ({vs_pt[0][1]}) / {med(vs_pt):.2e}; "
          f"ringtrain vs fp64 {vs_ref[0][0]:.2e} / {med(vs_ref):.2e}; PyTorch fp32 vs fp64 {pt_ref[0][0]:.2e} / "
          f"{med(pt_ref):.2e}")
    return abs(rt_loss - pt_loss) / pt_loss <= 1e-4 and worst <= 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ringtrain")
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--verbose", action="store_true", help="print every tensor whose update is off by more than 1e-4")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="onnx_torch_") as tmp:
        ok = [check(args.ringtrain, n, args.batch, tmp, args.verbose) for n in args.models.split(",")]
    print("within 1e-4" if all(ok) else "OUTSIDE 1e-4")
    raise SystemExit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
