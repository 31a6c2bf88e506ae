#!/usr/bin/env python3
"""Does ringtrain's training loss fall like PyTorch's? (optional: needs python3-torch 1.13 and
torchvision 0.14; never run by the test suite.)

The model is torchvision's (default: mobilenet_v2 with 10 classes, its dropout 0.2 kept), exported
by torch.onnx.export in training mode, so ringtrain (`train --model-file`) starts from PyTorch's
very weights. The data: the first --train and --test images of Debian's Fashion-MNIST, padded to
32x32 and repeated over 3 channels, written as a CIFAR-10 binary set (x/255, no normalisation on
either side). Both train one process with one thread, SGD with momentum 0.9, a constant lr,
batch --batch (the last partial batch dropped), no augmentation, and evaluate the test images
after every epoch; each side runs with --seeds shuffle seeds (ringtrain's --seed also seeds its
dropout). Per epoch it prints every run's mean training loss and test loss and accuracy, and
whether ringtrain's mean over its seeds lies within PyTorch's range of seeds widened by that
range on each side (two PyTorch runs that differ in their shuffle alone differ that much).

usage: loss_curve_check.py RINGTRAIN [--model mobilenet_v2] [--train 10000] [--test 2000]
                           [--epochs 4] [--batch 64] [--lr 0.01] [--seeds 2]
"""
import argparse
import copy
import gzip
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot"))
import rundata  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def fashion(split, count):
    """(images N x 3 x 32 x 32 uint8, labels) of the first `count` of a Fashion-MNIST split."""
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(FASHION, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:count]
    with gzip.open(os.path.join(FASHION, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:count]
    padded = np.zeros((len(images), 3, 32, 32), np.uint8)
    padded[:, :, 2:30, 2:30] = images[:, None]
    return padded, labels


def write_cifar(d, train, test):
    """CIFAR-10 binary: a label byte, then 3x32x32 bytes; the training set over 5 files."""
    os.makedirs(d, exist_ok=True)
    records = lambda images, labels, idx: b"".join(bytes([labels[i]]) + images[i].tobytes() for i in idx)  # noqa: E731
    for b, idx in enumerate(np.array_split(np.arange(len(train[1])), 5), 1):
        with open(os.path.join(d, f"data_batch_{b}.bin"), "wb") as f:
            f.write(records(*train, idx))
    with open(os.path.join(d, "test_batch.bin"), "wb") as f:
        f.write(records(*test, range(len(test[1]))))


def ringtrain_run(binary, net, data, args, seed, run_dir):
    """Per epoch (train loss, test loss, test accuracy) of `train --model-file`."""
    subprocess.run([binary, "train", "--model-file", net, "--dataset", "cifar10", "--data-dir", data,
                    "--no-normalize", "--batch-size", str(args.batch), "--epochs", str(args.epochs), "--lr",
                    str(args.lr), "--momentum", "0.9", "--weight-decay", "0", "--lr-schedule", "constant", "--seed",
                    str(seed), "--threads", "1", "--eval-every", "1", "--no-tensorboard", "--quiet", "--run-dir",
                    run_dir], env=ENV, check=True)
    rows = rundata.Run(run_dir).epoch_series()
    return [(r["train_loss"], r["test_loss"], r["test_accuracy"]) for r in rows]


def torch_run(model, train, test, args, seed):
    """The same recipe in PyTorch: per epoch (train loss, test loss, test accuracy)."""
    torch.manual_seed(seed)
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    x = torch.from_numpy(train[0].astype(np.float32) / 255.0)
    y = torch.from_numpy(train[1].astype(np.int64))
    xt = torch.from_numpy(test[0].astype(np.float32) / 255.0)
    yt = torch.from_numpy(test[1].astype(np.int64))
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(args.epochs):
        model.train()
        order = torch.randperm(len(y), generator=gen)
        losses = []
        for i in range(0, len(y) - args.batch + 1, args.batch):
            idx = order[i:i + args.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            logits = torch.cat([model(xt[i:i + 256]) for i in range(0, len(yt), 256)])
        out.append((float(np.mean(losses)), torch.nn.functional.cross_entropy(logits, yt).item(),
                    (logits.argmax(1) == yt).float().mean().item()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ringtrain")
    ap.add_argument("--model", default="mobilenet_v2", help="a torchvision classification model")
    ap.add_argument("--train", type=int, default=10000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, default=2, help="shuffle seeds per side (at least 2: the spread)")
    args = ap.parse_args()
    if args.seeds < 2 or min(args.train, args.test, args.epochs, args.batch) < 1:
        ap.error("--seeds must be >= 2 and the counts >= 1")
    torch.set_num_threads(1)
    train, test = fashion("train", args.train), fashion("test", args.test)
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    with tempfile.TemporaryDirectory(prefix="loss_curve_") as tmp:
        data, net = os.path.join(tmp, "data"), os.path.join(tmp, "net.onnx")
        write_cifar(data, train, test)
        warnings.filterwarnings("ignore", message="ONNX Preprocess")
        torch.onnx.export(model, torch.zeros(2, 3, 32, 32), net, training=torch.onnx.TrainingMode.TRAINING,
                          opset_version=13, do_constant_folding=False, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        seeds = range(1, args.seeds + 1)
        rt = [ringtrain_run(args.ringtrain, net, data, args, s, os.path.join(tmp, f"run-{s}")) for s in seeds]
    pt = [torch_run(model, train, test, args, s) for s in seeds]
    print(f"{args.model}: Fashion-MNIST padded to 3x32x32, {args.train} training and {args.test} test images, "
          f"batch {args.batch}, SGD lr {args.lr} momentum 0.9, {args.epochs} epochs, seeds {list(seeds)}")
    print("| epoch | ringtrain train loss | PyTorch train loss | ringtrain test loss | PyTorch test loss | "
          "ringtrain test acc | PyTorch test acc | ringtrain's mean train loss within PyTorch's widened range |")
    print("|---|---|---|---|---|---|---|---|")
    inside = []
    for e in range(args.epochs):
        col = lambda runs, k: [r[e][k] for r in runs]  # noqa: E731
        fmt = lambda v: " / ".join(f"{x:.4f}" for x in v)  # noqa: E731
        lo, hi = min(col(pt, 0)), max(col(pt, 0))
        ok = lo - (hi - lo) <= np.mean(col(rt, 0)) <= hi + (hi - lo)
        inside.append(ok)
        print(f"| {e + 1} | {fmt(col(rt, 0))} | {fmt(col(pt, 0))} | {fmt(col(rt, 1))} | {fmt(col(pt, 1))} | "
              f"{fmt(col(rt, 2))} | {fmt(col(pt, 2))} | {'yes' if ok else 'no'} |")
    print("ringtrain's loss falls like PyTorch's" if all(inside) else
          f"ringtrain's mean training loss is outside PyTorch's widened range in epoch(s) "
          f"{[e + 1 for e, ok in enumerate(inside) if not ok]}")
    raise SystemExit(0 if all(inside) else 1)


if __name__ == "__main__":
    main()
