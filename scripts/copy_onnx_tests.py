"""Copies ONNX backend test cases from the onnx pip package into tests/data/onnx/ for the
conformance runner (tests/tests/conformance.rs, compiled through tests/build/conformance.rs).

Each case becomes tests/data/onnx/<suite>/<case>/model.onnx plus io.safetensors holding the
first test data set: `input_<k>` and `output_<k>` in the model's order, with their dtypes.
When the data would exceed MAX_BYTES but every input is f32, the inputs are made by the seeded
generator of scripts/gen_light_zoo.py instead (`uniform("input_<k>", n)`, which the runner
computes identically), only their shapes are stored (`seeded_input_<k>`, i64) and the outputs
are onnxruntime's on them. Cases that fit neither way keep only the model (the runner reports
them unsupported, naming why). Deterministic: rerunning rewrites identical files.

    python3 scripts/copy_onnx_tests.py
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from safetensors.numpy import save

from gen_light_zoo import uniform

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx")
SRC = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
MAX_BYTES = 1 << 20

SUITES = {
    "pytorch-converted": ("pytorch-converted", None),
    "pytorch-operator": ("pytorch-operator", None),
    "sequence": ("simple", "test_sequence_model"),
}


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def copy_case(src, dst):
    os.makedirs(dst, exist_ok=True)
    shutil.copyfile(os.path.join(src, "model.onnx"), os.path.join(dst, "model.onnx"))
    data = os.path.join(src, "test_data_set_0")
    tensors = {}
    for kind in ("input", "output"):
        k = 0
        while os.path.exists(os.path.join(data, f"{kind}_{k}.pb")):
            try:
                a = read_pb(os.path.join(data, f"{kind}_{k}.pb"))
            except Exception:  # sequences are SequenceProto: no tensor data for them
                tensors = None
                break
            # np.ascontiguousarray would make a scalar 1-D; np.require keeps its rank.
            tensors[f"{kind}_{k}"] = np.require(a, requirements="C")
            k += 1
        if tensors is None:
            break
    io = os.path.join(dst, "io.safetensors")
    if tensors is not None and sum(a.nbytes for a in tensors.values()) > MAX_BYTES:
        tensors = seeded(os.path.join(src, "model.onnx"), tensors)
    if tensors is not None and sum(a.nbytes for a in tensors.values()) <= MAX_BYTES:
        with open(io, "wb") as f:
            f.write(save(tensors))
    elif os.path.exists(io):
        os.remove(io)


def seeded(model, tensors):
    """The case with seeded f32 inputs (shapes only, as `seeded_input_<k>`) and onnxruntime's
    outputs on them; None when an input is not f32."""
    inputs = [tensors[k] for k in sorted(tensors) if k.startswith("input_")]
    if any(a.dtype != np.float32 for a in inputs):
        return None
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds, out = {}, {}
    for k, (a, meta) in enumerate(zip(inputs, sess.get_inputs())):
        feeds[meta.name] = uniform(f"input_{k}", a.size).reshape(a.shape)
        out[f"seeded_input_{k}"] = np.array(a.shape, dtype=np.int64)
    for k, o in enumerate(sess.run(None, feeds)):
        out[f"output_{k}"] = np.ascontiguousarray(o)
    return out


def main():
    for suite, (folder, prefix) in SUITES.items():
        src = os.path.join(SRC, folder)
        for case in sorted(os.listdir(src)):
            if prefix and not case.startswith(prefix):
                continue
            copy_case(os.path.join(src, case), os.path.join(ROOT, suite, case))


if __name__ == "__main__":
    main()
