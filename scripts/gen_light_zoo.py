"""The light-zoo conformance cases: the nine `light_*` models of the onnx pip package, with
reference outputs from onnxruntime that are a real numeric check.

The stored outputs of light_* are a uniform softmax (every weight is 0.02), which any
shape-correct implementation matches. So for each model this script writes
tests/data/onnx/light-zoo/<name>/model.onnx, the model without its final Softmax (logits), and
io.safetensors with onnxruntime's logits for two weight sets on one input:

* `output_const`: the model's own weights (ConstantOfShape 0.02 and its initializers);
* `output_random`: every f32 weight replaced by seeded random values.

The input and the random weights are NOT checked in: `gen(key, shape)` below makes them, and
tests/tests/conformance.rs has the same generator (SplitMix64 on a counter, seeded with the
FNV-1a hash of the tensor's name), so both sides compute identical bits. Deterministic.

    python3 scripts/gen_light_zoo.py
"""
import math
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from safetensors.numpy import save

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx", "light-zoo")
SRC = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]
M64 = (1 << 64) - 1


def fnv1a(key):
    h = 0xCBF29CE484222325
    for b in key.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def uniform(key, n):
    """n values in [-1, 1): SplitMix64 of seed + (i + 1) * gamma, top 24 bits."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(fnv1a(key)) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / (1 << 24))
    return u * np.float32(2.0) - np.float32(1.0)


def gen(key, shape):
    """The tensor `key` of `shape`: rank >= 2 (after dropping leading size-1 axes) scaled by
    sqrt(3 / fan_in) (variance-preserving), rank 1 (biases, scales, batch-norm statistics) as
    1 + 0.1 u, so variances stay positive."""
    n = int(np.prod(shape)) if shape else 1
    u = uniform(key, n)
    core = list(shape)
    while core and core[0] == 1:  # [1, 1, 1000, 1024] is a [1000, 1024] matrix reshaped
        core = core[1:]
    if len(core) >= 2:
        fan_in = int(np.prod(core[1:]))
        v = u * np.float32(math.sqrt(3.0 / fan_in))
    else:
        v = np.float32(1.0) + np.float32(0.1) * u
    return v.reshape(shape).astype(np.float32)


def logits_model(m):
    """The model without its final Softmax: its input becomes the output."""
    last = m.graph.node[-1]
    if last.op_type != "Softmax":
        return m
    out = m.graph.output[0]
    del m.graph.node[-1]
    shape = [d.dim_value for d in out.type.tensor_type.shape.dim]
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info(last.input[0], onnx.TensorProto.FLOAT, shape))
    return m


def random_weights(m):
    """Every f32 initializer and ConstantOfShape result replaced by `gen` data of its name."""
    r = onnx.ModelProto()
    r.CopyFrom(m)
    g = r.graph
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(gen(t.name, list(t.dims)), t.name))
    shapes = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    keep = []
    for n in g.node:
        if n.op_type == "ConstantOfShape":
            value = next((a.t for a in n.attribute if a.name == "value"), None)
            if value is None or value.data_type == onnx.TensorProto.FLOAT:
                shape = [int(d) for d in shapes[n.input[0]]]
                g.initializer.append(numpy_helper.from_array(gen(n.output[0], shape), n.output[0]))
                continue
        keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    return r


def run(m, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3  # not the unused-initializer warnings of the light models
    s = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def main():
    for name in MODELS:
        m = onnx.load(os.path.join(SRC, f"light_{name}.onnx"))
        inits = {t.name for t in m.graph.initializer}
        (inp,) = [i for i in m.graph.input if i.name not in inits]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        x = uniform("input", int(np.prod(shape))).reshape(shape)
        stored = numpy_helper.to_array(onnx.load_tensor(os.path.join(SRC, f"light_{name}_output_0.pb")))
        full = run(m, {inp.name: x})
        # The shipped reference is the uniform softmax the constant weights give.
        assert np.allclose(full, stored, rtol=1e-3, atol=1e-6), name
        lm = logits_model(m)
        const = run(lm, {inp.name: x})
        rand = run(random_weights(lm), {inp.name: x})
        assert np.std(rand) > 1e-3 * (np.abs(rand).max() + 1e-30), f"{name}: random logits are flat"
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(lm, os.path.join(d, "model.onnx"))
        with open(os.path.join(d, "io.safetensors"), "wb") as f:
            f.write(save({"output_const": np.ascontiguousarray(const), "output_random": np.ascontiguousarray(rand)}))
        print(name, shape, "logits", const.shape, "random std", float(np.std(rand)))


if __name__ == "__main__":
    main()
