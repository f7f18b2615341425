#!/usr/bin/env python3
"""Writes the QDQ import test data (tests/test_qdq_import.cc): a small float32 ONNX model (Conv, a 1x1
Conv, Add, ConvTranspose, Flatten, Gemm; opset 13) quantized by ONNX Runtime's quantize_static in the QDQ
format with per-channel int8 weights (Conv axis 0, ConvTranspose axis 1, Gemm axis 0) and int32 biases,
once with uint8 activations (qdq_u8) and once with int8 activations (qdq_s8); an input and ONNX
Runtime's output for it, run with graph optimizations off so that ORT computes the QDQ graph as written
(fake quantization in float32; optimized, it would run its own int8 kernels). Needs onnxruntime and
onnx >= 1.16 (a venv: docs/format.md "Quantized tensors"). Usage: make_qdq.py [out_dir]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(30)


def init(name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def float_model():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1], name="conv3x3"),
        helper.make_node("Relu", ["a"], ["ar"], name="relu"),
        helper.make_node("Conv", ["x", "w2", "b2"], ["b"], name="conv1x1"),
        helper.make_node("Add", ["ar", "b"], ["c"], name="add"),
        helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["d"], strides=[2, 2], pads=[1, 1, 1, 1],
                         output_padding=[1, 1], name="tconv"),
        helper.make_node("Flatten", ["d"], ["e"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["e", "wg", "bg"], ["y"], transB=1, name="gemm"),
    ]
    inits = [init("w1", (4, 3, 3, 3)), init("b1", (4,), 0.1), init("w2", (4, 3, 1, 1)), init("b2", (4,), 0.1),
             init("wt", (4, 2, 3, 3)), init("bt", (2,), 0.1), init("wg", (10, 2 * 12 * 12), 0.05),
             init("bg", (10,), 0.1)]
    graph = helper.make_graph(nodes, "qdq_net",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class Reader(CalibrationDataReader):
    def __init__(self):
        r = np.random.default_rng(1)
        self.data = iter([{"x": r.standard_normal((2, 3, 6, 6)).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def main():
    os.makedirs(OUT, exist_ok=True)
    fp32 = os.path.join(OUT, "float.onnx.tmp")
    onnx.save(float_model(), fp32)
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.save(os.path.join(OUT, "input.npy"), x)
    for name, act in (("qdq_u8", QuantType.QUInt8), ("qdq_s8", QuantType.QInt8)):
        path = os.path.join(OUT, name + ".onnx")
        quantize_static(fp32, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=act, weight_type=QuantType.QInt8,
                        op_types_to_quantize=["Conv", "ConvTranspose", "Gemm", "Add", "Relu"])
        m = onnx.load(path)
        ops = sorted({n.op_type for n in m.graph.node})
        print(name, "opset", [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")], ops)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
        np.save(os.path.join(OUT, name + "_ort.npy"), y)
        print(name, "output", y.shape, float(np.abs(y).max()))
    os.remove(fp32)


if __name__ == "__main__":
    main()
