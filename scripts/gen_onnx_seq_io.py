"""Writes tests/data/onnx-seq-io/: an ONNX model with a sequence-typed input and a
sequence-typed output (which none of the backend test models has), and onnxruntime's outputs
for it, for tests/tests/onnx_sequences.rs (the model is compiled by the tests' build script
through kiln_dsl::Builder with `.seq_input("S", 3)`).

The graph: S (3 tensors f32[2,3]) gets X appended (S1) and then, at a position given at run
time, Y inserted (T); the model returns S1 (a sequence: kiln returns sequences whose order is
known at compile time), T's length, T's element at the run-time position `at` and S1's
elements stacked along a new axis.
Deterministic: a fixed seed, rerunning rewrites identical files.

    python3 scripts/gen_onnx_seq_io.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from safetensors.numpy import save

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx-seq-io")


def model():
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])
    seq = helper.make_sequence_type_proto(elem)
    nodes = [
        helper.make_node("SequenceInsert", ["S", "X"], ["S1"], name="append_x"),
        helper.make_node("SequenceInsert", ["S1", "Y", "pos"], ["T"], name="insert_y"),
        helper.make_node("SequenceLength", ["T"], ["n"], name="length"),
        helper.make_node("SequenceAt", ["T", "at"], ["e"], name="pick"),
        helper.make_node("ConcatFromSequence", ["S1"], ["stacked"], name="stack", axis=0, new_axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "seq_io",
        [
            helper.make_value_info("S", seq),
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("pos", TensorProto.INT64, []),
            helper.make_tensor_value_info("at", TensorProto.INT64, []),
        ],
        [
            helper.make_value_info("S1", seq),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("stacked", TensorProto.FLOAT, [4, 2, 3]),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    m = model()
    path = os.path.join(OUT, "model.onnx")
    onnx.save(m, path)
    rng = np.random.default_rng(7)
    s = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    pos, at = np.array(-2, dtype=np.int64), np.array(1, dtype=np.int64)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    s1, n, e, stacked = sess.run(None, {"S": s, "X": x, "Y": y, "pos": pos, "at": at})
    tensors = {f"S.{k}": a for k, a in enumerate(s)}
    tensors.update({"X": x, "Y": y, "pos": pos, "at": at, "n": np.require(n, requirements="C"),
                    "e": e, "stacked": stacked})
    tensors.update({f"S1.{k}": np.asarray(a) for k, a in enumerate(s1)})
    with open(os.path.join(OUT, "io.safetensors"), "wb") as f:
        f.write(save(tensors))


if __name__ == "__main__":
    main()
