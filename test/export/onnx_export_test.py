#!/usr/bin/env python3
"""ringtrain export against ringtrain eval, through an independent reading of the ONNX file.

For each model: train a few steps on a small generated CIFAR-10-format dataset (so every
model's shape fits and the test needs no download), let the run keep its model.rtck, export
it, check the file with onnx's own checker, run the graph with the numpy evaluator below on
the test split, and compare its mean cross-entropy and accuracy with `ringtrain eval`'s.
The evaluator knows only the ONNX operators' definitions, none of ringtrain's code.

usage: onnx_export_test.py RINGTRAIN [MODEL...]
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
except ImportError:
    print("onnx_export_test: python3-onnx is not installed (apt-get install python3-onnx); skipping")
    sys.exit(77)

# alexnet: LRN, dropout; vgg11: BN; the layer graphs: Add (+ ReLU), GlobalAveragePool, and in
# mobilenetv2 depthwise (grouped) Conv and Clip for ReLU6.
MODELS = ["logreg", "lenet5", "mlp", "svhn-cnn", "alexnet", "vgg11", "resnet20", "resnet18", "mobilenetv2"]


def write_cifar(directory, rng):
    """CIFAR-10 binary files: label byte + 3072 pixel bytes (R, G, B planes) per record,
    with a class-dependent brightness so a few steps of training move the weights."""
    os.makedirs(directory)

    def batch(name, count):
        labels = rng.integers(0, 10, count, dtype=np.uint8)
        pixels = rng.integers(0, 160, (count, 3072)).astype(np.int64) + labels[:, None] * 9
        records = np.concatenate([labels[:, None], pixels.astype(np.uint8)], axis=1)
        records.tofile(os.path.join(directory, name))
        return labels, pixels.astype(np.uint8)

    for b in range(1, 6):
        batch(f"data_batch_{b}.bin", 32)
    return batch("test_batch.bin", 48)


def windows(x, k, stride, pad, fill):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    w = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    return w[:, :, ::stride, ::stride]  # (N, C, OH, OW, k, k)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def run_node(node, inputs, a):
    x = inputs[0]
    op = node.op_type
    if op == "Conv":
        k, s, p, g = a["kernel_shape"][0], a["strides"][0], a["pads"][0], a.get("group", 1)
        assert a.get("dilations", [1, 1]) == [1, 1]
        w = windows(x, k, s, p, 0.0)
        ci, co = x.shape[1] // g, inputs[1].shape[0] // g  # per group
        y = np.concatenate([np.tensordot(w[:, i * ci:(i + 1) * ci], inputs[1][i * co:(i + 1) * co],
                                         axes=([1, 4, 5], [1, 2, 3])) for i in range(g)], axis=3)  # (N, OH, OW, O)
        y = y.transpose(0, 3, 1, 2)
        return y + inputs[2][None, :, None, None] if len(inputs) > 2 else y
    if op in ("Add", "Sum"):
        return sum(inputs)
    if op == "Concat":
        return np.concatenate(inputs, axis=a["axis"])
    if op == "Clip":
        return np.clip(x, inputs[1], inputs[2])
    if op == "GlobalAveragePool":
        return x.mean(axis=(2, 3), keepdims=True)
    if op == "Gemm":
        assert a.get("transB") == 1
        y = x @ inputs[1].T
        return y + inputs[2] if len(inputs) > 2 else y
    if op == "Relu":
        return np.maximum(x, 0.0)
    if op == "MaxPool":
        return windows(x, a["kernel_shape"][0], a["strides"][0], a["pads"][0], -np.inf).max(axis=(4, 5))
    if op == "AveragePool":
        assert a.get("count_include_pad") == 1
        return windows(x, a["kernel_shape"][0], a["strides"][0], a["pads"][0], 0.0).mean(axis=(4, 5))
    if op == "Flatten":
        return x.reshape(x.shape[0], -1)
    if op in ("Identity", "Dropout"):  # Dropout: an identity at inference
        return x
    if op == "BatchNormalization":
        scale, bias, mean, var = (t[None, :, None, None] for t in inputs[1:])
        return (x - mean) / np.sqrt(var + a["epsilon"]) * scale + bias
    if op == "LRN":
        size = a["size"]
        sq = np.pad(x * x, ((0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)))
        total = sum(sq[:, i:i + x.shape[1]] for i in range(size))
        return x / (a["bias"] + a["alpha"] / size * total) ** a["beta"]
    raise AssertionError(f"unexpected operator {op}")


def evaluate(model, images):
    values = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    values[model.graph.input[0].name] = images
    for node in model.graph.node:
        values[node.output[0]] = run_node(node, [values[i] for i in node.input], attrs(node))
    return values[model.graph.output[0].name]


def cross_entropy(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(labels)), labels].mean()
    accuracy = (logits.argmax(axis=1) == labels).mean()
    return loss, accuracy


def check_model(binary, name, data, test_labels, test_pixels, work):
    run_dir = os.path.join(work, f"run-{name}")
    subprocess.run([binary, "train", "--model", name, "--dataset", "cifar10", "--data-dir", data, "--no-normalize",
                    "--max-steps", "4", "--batch-size", "8", "--lr", "0.01", "--run-dir", run_dir, "--quiet",
                    "--no-tensorboard"], check=True, timeout=300)
    checkpoint = os.path.join(run_dir, "model.rtck")
    out = subprocess.run([binary, "eval", "--checkpoint", checkpoint, "--batch-size", "16"], check=True,
                         capture_output=True, text=True, timeout=300).stdout
    found = re.search(r"loss ([0-9.]+), accuracy ([0-9.]+)", out)
    assert found, f"{name}: unexpected eval output: {out!r}"
    eval_loss, eval_accuracy = float(found.group(1)), float(found.group(2))

    onnx_path = os.path.join(work, f"{name}.onnx")
    subprocess.run([binary, "export", "--checkpoint", checkpoint, "--onnx", onnx_path], check=True,
                   capture_output=True, timeout=120)
    model = onnx.load(onnx_path)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 13, model.opset_import
    constants = check_attributes(binary, checkpoint, model)

    images = test_pixels.reshape(-1, 3, 32, 32).astype(np.float64) / 255.0
    loss, accuracy = cross_entropy(evaluate(model, images), test_labels.astype(np.int64))
    print(f"{name}: eval loss {eval_loss:.4f} acc {eval_accuracy:.4f}; onnx+numpy loss {loss:.4f} acc {accuracy:.4f}; "
          f"{constants} LRN/BN constants equal")
    # eval prints four decimals; the graph in float64 against oneDNN in float32.
    assert abs(loss - eval_loss) <= 1e-4 + 1e-3 * abs(eval_loss), f"{name}: loss {loss} vs eval {eval_loss}"
    assert abs(accuracy - eval_accuracy) <= 1.0 / len(test_labels) + 1e-4, f"{name}: accuracy {accuracy} vs {eval_accuracy}"


def check_attributes(binary, checkpoint, model):
    """The small constants the loss comparison cannot see (an LRN's alpha of 1e-4 moves the
    loss below eval's four decimals): each LRN and batch-norm node carries the values of the
    layer in the checkpoint's signature. oneDNN's LRN and ONNX's both divide alpha by size,
    so the values carry over unchanged."""
    import json
    meta = json.loads(subprocess.run([binary, "inspect", checkpoint], check=True, capture_output=True, text=True,
                                     timeout=60).stdout)
    layers = {}
    for line in meta["signature"].splitlines()[1:]:
        _, name, description = line.split()[:3]
        found = re.match(r"\w+\((.*)\)", description)
        layers[name] = dict(kv.split("=") for kv in found.group(1).split(",")) if found else {}
    expected = {"LRN": {"size": "size", "alpha": "alpha", "beta": "beta", "bias": "k"},
                "BatchNormalization": {"epsilon": "eps"}}
    checked = 0
    for node in model.graph.node:
        for onnx_name, ours in expected.get(node.op_type, {}).items():
            value, want = attrs(node)[onnx_name], float(layers[node.name][ours])
            assert abs(value - want) <= 1e-6 * abs(want), f"{node.name}.{onnx_name} = {value}, layer has {want}"
            checked += 1
    return checked


def check_errors(binary, work):
    bad = os.path.join(work, "corrupt.rtck")
    with open(bad, "wb") as f:
        f.write(b"not a checkpoint at all")
    out = os.path.join(work, "never.onnx")
    for checkpoint in (bad, os.path.join(work, "missing.rtck")):
        r = subprocess.run([binary, "export", "--checkpoint", checkpoint, "--onnx", out], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0, f"export of {checkpoint} succeeded"
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and checkpoint in lines[0], f"expected one line naming {checkpoint}: {r.stderr!r}"
        assert not os.path.exists(out) and not os.path.exists(out + ".tmp"), "a failed export left a file"


def main():
    binary = sys.argv[1]
    models = sys.argv[2:] or MODELS
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "cifar")
        test_labels, test_pixels = write_cifar(data, rng)
        check_errors(binary, work)
        for name in models:
            check_model(binary, name, data, test_labels, test_pixels, work)
    print("onnx_export_test: ok")


if __name__ == "__main__":
    main()
