#!/usr/bin/env python3
"""Writes the ONNX files the reader's tests and its fuzz target's seed corpus use, with
python3-onnx's helpers (no PyTorch): all_ops.onnx (every supported op, input 3x12x12, 5
classes, written as torch.onnx.export does in training mode: Constant bounds and ratio,
BatchNormalization with its extra outputs), and one file per bad input with bad_cases.json
naming what each error must say.

usage: make_onnx_files.py OUTDIR
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def init(name, *shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], name=name + "_node",
                            value=numpy_helper.from_array(np.array(value, dtype=dtype), name))


def model(nodes, inits, outputs=("logits",), classes=5, opset=13, shape=(3, 12, 12)):
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *shape])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["N", classes]) for o in outputs]
    g = helper.make_graph(nodes, "net", [x], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_onnx_files")


def all_ops():
    n = helper.make_node
    nodes = [
        n("Conv", ["input", "c1.w", "c1.b"], ["c1"], name="conv_bias", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        n("BatchNormalization", ["c1", "bn.s", "bn.b", "bn.m", "bn.v"], ["bn", "bn.rm", "bn.rv"], name="bn",
          epsilon=1e-5, momentum=0.9, training_mode=1),
        n("Relu", ["bn"], ["r"], name="relu"),
        const("lo", 0.0), const("hi", 6.0),
        n("Conv", ["r", "dw.w"], ["dw"], name="depthwise_dilated", group=8, pads=[2, 2, 2, 2], dilations=[2, 2]),
        n("Clip", ["dw", "lo", "hi"], ["r6"], name="relu6"),
        n("Add", ["r6", "r"], ["a"], name="add"),
        n("Relu", ["a"], ["ar"], name="add_relu"),
        n("MaxPool", ["ar"], ["mp", "mp.idx"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
        n("AveragePool", ["r"], ["ap"], name="avgpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          count_include_pad=1),
        n("Concat", ["mp", "ap"], ["cat"], name="concat", axis=1),
        n("LRN", ["cat"], ["lrn"], name="lrn", size=3, alpha=1e-3, beta=0.75, bias=1.0),
        n("Conv", ["lrn", "c3.w", "c3.b"], ["c3"], name="conv1x1", kernel_shape=[1, 1], strides=[1, 1]),
        n("Identity", ["c3"], ["id"], name="identity"),
        n("Sum", ["id", "lrn", "cat"], ["s"], name="sum3"),
        n("GlobalAveragePool", ["s"], ["gap"], name="gap"),
        n("Flatten", ["gap"], ["fl"], name="flatten", axis=1),
        n("Gemm", ["fl", "g1.w", "g1.b"], ["g1"], name="gemm_transB", transB=1),
        const("ratio", 0.25), const("training", True, np.bool_),
        n("Dropout", ["g1", "ratio", "training"], ["dr", "dr.mask"], name="dropout"),
        n("Reshape", ["mp", "shape"], ["rs"], name="reshape"),
        n("Gemm", ["rs", "g2.w"], ["g2"], name="gemm_plain"),
        n("Add", ["dr", "g2"], ["a2"], name="add_fc"),
        n("MatMul", ["a2", "mm.w"], ["mm"], name="matmul"),
        n("Add", ["mm", "mm.b"], ["logits"], name="matmul_bias"),
    ]
    inits = [init("c1.w", 8, 3, 3, 3), init("c1.b", 8), init("bn.s", 8, scale=1.0), init("bn.b", 8),
             init("bn.m", 8, scale=0.1), numpy_helper.from_array(RNG.uniform(0.5, 1.5, 8).astype(np.float32), "bn.v"),
             init("dw.w", 8, 1, 3, 3), init("c3.w", 16, 16, 1, 1), init("c3.b", 16), init("g1.w", 12, 16),
             init("g1.b", 12), numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "shape"),
             init("g2.w", 288, 12, scale=0.05), init("mm.w", 12, 5), init("mm.b", 5)]
    return model(nodes, inits, opset=15)  # BatchNormalization's training_mode since 14


def small(op_node, inits=(), extra=()):
    """input -> op_node ("y", 8 channels at 6x6 or less) -> global pool -> flatten -> Gemm to 5."""
    n = helper.make_node
    nodes = [op_node, *extra, n("GlobalAveragePool", ["y"], ["gp"], name="gap"),
             n("Flatten", ["gp"], ["f"], name="flatten"),
             n("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1)]
    return model(nodes, [*inits, init("fc.w", 5, 8), init("fc.b", 5)])


def bad_cases(good_bytes):
    n = helper.make_node
    conv_w = init("w", 8, 3, 3, 3)
    cases = {}
    cases["unsupported_op"] = (small(n("Sigmoid", ["input"], ["y"], name="sig")).SerializeToString(),
                               ["node 'sig' (Sigmoid)", "op Sigmoid is not supported", "supported: Conv,"])
    cases["ceil_mode"] = (small(n("MaxPool", ["input"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
                                  ceil_mode=1)).SerializeToString(), ["node 'pool' (MaxPool)", "ceil_mode 1"])
    cases["same_upper_stride2"] = (small(n("Conv", ["input", "w"], ["y"], name="conv", auto_pad="SAME_UPPER",
                                           strides=[2, 2]), [conv_w]).SerializeToString(),
                                   ["node 'conv' (Conv)", "auto_pad SAME_UPPER with stride 2"])
    cases["missing_initializer"] = (small(n("Conv", ["input", "w_missing"], ["y"], name="conv")).SerializeToString(),
                                    ["node 'conv' (Conv)", "'w_missing'", "missing initializer"])
    cases["bad_shape"] = (small(n("Conv", ["input", "w4"], ["y"], name="conv"),
                                [init("w4", 8, 4, 3, 3)]).SerializeToString(),
                          ["node 'conv' (Conv)", "shapes do not fit", "3 channels"])
    cycle = small(n("Add", ["input", "y2"], ["y"], name="add_cycle"), [],
                  [n("Relu", ["y"], ["y1"], name="r1"), n("Relu", ["y1"], ["y2"], name="r2")])
    cases["cycle"] = (cycle.SerializeToString(), ["cycle"])
    two = model([n("Flatten", ["input"], ["f"], name="flatten"),
                 n("Gemm", ["f", "a.w"], ["logits"], name="fa", transB=1),
                 n("Gemm", ["f", "b.w"], ["other"], name="fb", transB=1)],
                [init("a.w", 5, 432), init("b.w", 5, 432)], outputs=("logits", "other"))
    cases["two_outputs"] = (two.SerializeToString(), ["2 graph outputs"])
    old = all_ops()
    old.opset_import[0].version = 9
    cases["old_opset"] = (old.SerializeToString(), ["opset 9"])
    cases["truncated"] = (good_bytes[: len(good_bytes) // 2], ["not an ONNX model"])
    cases["not_onnx"] = (b"ringtrain: this is not a protobuf message\n" * 4, ["not an ONNX model"])
    return cases


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    good = all_ops()
    onnx.checker.check_model(good)
    good_bytes = good.SerializeToString()
    with open(os.path.join(out, "all_ops.onnx"), "wb") as f:
        f.write(good_bytes)
    manifest = {}
    for name, (data, expected) in bad_cases(good_bytes).items():
        with open(os.path.join(out, f"bad_{name}.onnx"), "wb") as f:
            f.write(data)
        manifest[f"bad_{name}.onnx"] = expected
    with open(os.path.join(out, "bad_cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote all_ops.onnx and {len(manifest)} bad files to {out}")


if __name__ == "__main__":
    main()
