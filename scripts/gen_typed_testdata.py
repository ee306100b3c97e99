"""Generate the typed / multi-dimensional reference data for kiln's integration tests.

The companion of `scripts/gen_testdata.py` (read that first: this script follows the
same recipe).  It builds eight small networks that go beyond 2-D float32 image
networks: 1-D and 3-D convolution and pooling, a ShuffleNet-v2 unit (split, grouped
conv, channel shuffle), a two-head attention block written from reduce ops with
several outputs, a mixed-dtype data-movement graph (float32, float64, int64, uint8),
one network run at several input sizes, a slice with run-time bounds, and NonZero
(an output whose length depends on the data).

For each network NAME it writes, into `tests/data/typed/`:

* `NAME.safetensors`     the weights, float32, under the names the kiln DSL reads
                         (`c1.weight`, `bn1.running_var`, `wq`, ...).  Networks
                         without weights get a valid safetensors file with no tensors;
* `NAME.onnx`            the graph, self-contained (weights as initializers);
* `NAME_io.safetensors`  the inputs under their input names and the outputs as `y`
                         (one output) or `y0`, `y1`, ... (several), each in its real
                         dtype and full shape.  Networks run on several inputs write
                         several io files with a suffix (`multishape_io_8x8`,
                         `dynslice_io_2_7`, `nonzero_io_5`, ...).

onnxruntime, with every graph optimisation disabled, is the golden engine.  Every
network also has an independent numpy reference (float64, straight from the
operator definitions), and the script asserts the two agree before writing anything:
float32 outputs to 1e-5, float64 outputs to 1e-10, integer outputs exactly, and the
dtypes and shapes exactly.

Deterministic: one seeded numpy Generator per network, drawn in a fixed order, and
both file formats serialise in a fixed order, so a rerun gives byte-identical files.

Usage: python3 scripts/gen_typed_testdata.py   (from anywhere; paths are repo-relative)
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "data" / "typed"

OPSET = 17
IR_VERSION = 8  # goes with opset 17; see gen_testdata.py
BN_EPS = 1e-5
LN_EPS = 1e-5
# float32 engine vs float64 reference: differences are rounding only.
F32_ATOL = 1e-5
# float64 engine vs float64 reference: summation order only.
F64_ATOL = 1e-10
MAX_FILE_BYTES = 100_000


# --------------------------------------------------------------------------------------
# Random parameters
# --------------------------------------------------------------------------------------


class Params:
    """Named float32 weights drawn, in the order the network is described, from one
    seeded generator; inputs are drawn from the same generator after the weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.tensors: dict[str, np.ndarray] = {}

    def put(self, name: str, value) -> np.ndarray:
        assert name not in self.tensors, f"duplicate tensor name {name}"
        value = np.ascontiguousarray(value, dtype=np.float32)
        self.tensors[name] = value
        return value

    def conv(self, name: str, cout: int, cin_per_group: int, kernel: tuple[int, ...],
             bias: bool = True):
        fan_in = cin_per_group * int(np.prod(kernel))
        self.put(f"{name}.weight",
                 self.rng.normal(0.0, 1.0 / np.sqrt(fan_in), (cout, cin_per_group, *kernel)))
        if bias:
            self.put(f"{name}.bias", self.rng.normal(0.0, 0.1, (cout,)))

    def dense(self, name: str, n_in: int, n_out: int):
        self.put(f"{name}.weight", self.rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_out, n_in)))
        self.put(f"{name}.bias", self.rng.normal(0.0, 0.1, (n_out,)))

    def batch_norm(self, name: str, c: int):
        self.put(f"{name}.weight", self.rng.uniform(0.5, 1.5, (c,)))
        self.put(f"{name}.bias", self.rng.normal(0.0, 0.1, (c,)))
        self.put(f"{name}.running_mean", self.rng.normal(0.0, 0.1, (c,)))
        self.put(f"{name}.running_var", self.rng.uniform(0.5, 1.5, (c,)))

    def input(self, shape, dtype=np.float32) -> np.ndarray:
        return np.ascontiguousarray(self.rng.normal(0.0, 1.0, shape), dtype=dtype)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def f64(self, name: str) -> np.ndarray:
        return self.tensors[name].astype(np.float64)


# --------------------------------------------------------------------------------------
# ONNX graph building
# --------------------------------------------------------------------------------------


def onnx_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class Graph:
    """A thin builder over `onnx.helper` that names intermediate values automatically."""

    def __init__(self, params: Params | None = None):
        self.params = params if params is not None else Params(0)
        self.nodes: list[onnx.NodeProto] = []
        self.consts: list[onnx.TensorProto] = []
        self.counter = 0

    def _fresh(self, op: str) -> str:
        self.counter += 1
        return f"{op.lower()}_{self.counter}"

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self._fresh(op_type)
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def ops(self, op_type: str, inputs: list[str], n_out: int, **attrs) -> list[str]:
        name = self._fresh(op_type)
        outs = [f"{name}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs

    def const(self, name: str, value) -> str:
        """A constant that is part of the graph but not a learned weight (shapes, axes,
        scalars, index lists), stored as an initializer."""
        assert name not in self.params.tensors and all(c.name != name for c in self.consts), name
        self.consts.append(numpy_helper.from_array(np.asarray(value), name=name))
        return name

    def i64(self, stem: str, values) -> str:
        return self.const(f"{stem}_{self.counter + 1}", np.array(values, dtype=np.int64))

    def f32(self, stem: str, value: float) -> str:
        return self.const(f"{stem}_{self.counter + 1}", np.array(value, dtype=np.float32))

    # Layers, named the way the safetensors file names their weights.

    def conv(self, x: str, name: str, *, pad: int = 0, stride: int = 1, dilation: int = 1,
             group: int = 1) -> str:
        w = self.params[f"{name}.weight"]
        nd = w.ndim - 2
        inputs = [x, f"{name}.weight"]
        if f"{name}.bias" in self.params.tensors:
            inputs.append(f"{name}.bias")
        # ONNX pads are all begins, then all ends.
        return self.op("Conv", inputs, kernel_shape=list(w.shape[2:]), pads=[pad] * (2 * nd),
                       strides=[stride] * nd, dilations=[dilation] * nd, group=group)

    def pool(self, op_type: str, x: str, kernel, strides) -> str:
        return self.op(op_type, [x], kernel_shape=list(kernel), strides=list(strides))

    def dense(self, x: str, name: str) -> str:
        return self.op("Gemm", [x, f"{name}.weight", f"{name}.bias"], transB=1)

    def batch_norm(self, x: str, name: str) -> str:
        return self.op("BatchNormalization",
                       [x, f"{name}.weight", f"{name}.bias",
                        f"{name}.running_mean", f"{name}.running_var"],
                       epsilon=BN_EPS)

    def model(self, name: str, inputs, outputs) -> onnx.ModelProto:
        """inputs: [(name, dtype, shape)]; outputs: [(value, out_name, dtype, shape)].
        Shapes may hold strings (symbolic dims).  Each output value is renamed to its
        public name with an Identity node, so output names do not depend on the graph."""
        for value, out_name, _, _ in outputs:
            self.nodes.append(helper.make_node("Identity", [value], [out_name],
                                               name=f"output_{out_name}"))
        initializers = [numpy_helper.from_array(v, name=k)
                        for k, v in self.params.tensors.items()] + self.consts
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, onnx_type(t), list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, onnx_type(t), list(s))
             for _, n, t, s in outputs],
            initializer=initializers,
        )
        model = helper.make_model(graph, producer_name="kiln/scripts/gen_typed_testdata.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


# --------------------------------------------------------------------------------------
# Independent numpy reference (float64), written from the operator definitions
# --------------------------------------------------------------------------------------


def ref_conv(x, w, b=None, *, pad=0, stride=1, dilation=1, group=1):
    """N-d direct convolution: for each kernel tap, a strided slice of the padded input
    times that tap's [Cout_g, Cin_g] weight matrix, summed over taps."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, cin, *sp = x.shape
    cout, cin_g, *k = w.shape
    nd = len(sp)
    assert cin == cin_g * group and cout % group == 0
    cout_g = cout // group
    xp = np.pad(x, ((0, 0), (0, 0)) + ((pad, pad),) * nd)
    out = [(sp[i] + 2 * pad - dilation * (k[i] - 1) - 1) // stride + 1 for i in range(nd)]
    y = np.zeros((n, cout, *out))
    for g in range(group):
        xg = xp[:, g * cin_g:(g + 1) * cin_g]
        wg = w[g * cout_g:(g + 1) * cout_g]
        for tap in itertools.product(*(range(kk) for kk in k)):
            sl = tuple(slice(t * dilation, t * dilation + stride * (o - 1) + 1, stride)
                       for t, o in zip(tap, out))
            patch = xg[(slice(None), slice(None)) + sl]
            y[:, g * cout_g:(g + 1) * cout_g] += np.einsum(
                "nc...,oc->no...", patch, wg[(slice(None), slice(None)) + tap])
    if b is not None:
        y += np.asarray(b, np.float64).reshape((1, -1) + (1,) * nd)
    return y


def ref_conv_transpose(x, w, b, *, stride, pads, dilation, output_padding, group=1):
    """N-d transposed convolution by its definition: every input element times every tap,
    added at `i * stride + t * dilation` of the full result, which is then cropped by `pads`
    (begins, then ends)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, cin, *sp = x.shape
    _, cout_g, *k = w.shape
    nd = len(sp)
    cin_g = cin // group
    full = [(sp[i] - 1) * stride[i] + (k[i] - 1) * dilation[i] + 1 + output_padding[i]
            for i in range(nd)]
    y = np.zeros((n, cout_g * group, *full))
    for c in range(cin):
        g = c // cin_g
        for pos in itertools.product(*(range(s) for s in sp)):
            for tap in itertools.product(*(range(kk) for kk in k)):
                at = tuple(p * st + t * d for p, t, st, d in zip(pos, tap, stride, dilation))
                y[(slice(None), slice(g * cout_g, (g + 1) * cout_g)) + at] += \
                    x[(slice(None), c) + pos][:, None] * w[(c, slice(None)) + tap][None, :]
    y = y[(slice(None), slice(None)) +
          tuple(slice(pads[i], full[i] - pads[i + nd]) for i in range(nd))]
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((1, -1) + (1,) * nd)
    return y


def ref_max_pool_dilated(x, kernel, strides, dilation):
    """N-d max pooling without padding, windows of `kernel` taps `dilation` apart."""
    n, c, *sp = x.shape
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    out = [(s - e) // st + 1 for s, e, st in zip(sp, ext, strides)]
    y = np.zeros((n, c, *out))
    for o in itertools.product(*(range(oo) for oo in out)):
        win = x[(slice(None), slice(None)) +
                tuple(slice(i * st, i * st + e, d)
                      for i, st, e, d in zip(o, strides, ext, dilation))]
        y[(slice(None), slice(None)) + o] = win.max(axis=tuple(range(2, 2 + len(sp))))
    return y


def ref_pool(x, kernel, strides, *, kind):
    """N-d max or average pooling without padding, by explicit windows."""
    n, c, *sp = x.shape
    out = [(s - k) // st + 1 for s, k, st in zip(sp, kernel, strides)]
    y = np.zeros((n, c, *out))
    for o in itertools.product(*(range(oo) for oo in out)):
        win = x[(slice(None), slice(None)) +
                tuple(slice(i * st, i * st + k) for i, st, k in zip(o, strides, kernel))]
        axes = tuple(range(2, 2 + len(sp)))
        y[(slice(None), slice(None)) + o] = win.max(axis=axes) if kind == "max" \
            else win.mean(axis=axes)
    return y


def ref_dense(x, p: Params, name: str):
    return x @ p.f64(f"{name}.weight").T + p.f64(f"{name}.bias")


def ref_bn(x, p: Params, name: str):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    g, b, m, v = (p.f64(f"{name}.{k}").reshape(shape)
                  for k in ("weight", "bias", "running_mean", "running_var"))
    return (x - m) / np.sqrt(v + BN_EPS) * g + b


def ref_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_log_softmax(z):
    s = z - z.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def relu(z):
    return np.maximum(z, 0.0)


def ref_slice_bounds(start: int, end: int, dim: int) -> tuple[int, int]:
    """ONNX Slice, step 1: negative bounds count from the end, then clamp to [0, dim]."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    return min(max(start, 0), dim), min(max(end, 0), dim)


# --------------------------------------------------------------------------------------
# The networks.  Each build_* returns a Case (or several): the model, the weights, and
# one or more runs (suffix, inputs, reference outputs).
# --------------------------------------------------------------------------------------


class Case:
    def __init__(self, name, model, weights, output_names):
        self.name = name
        self.model = model
        self.weights = weights
        self.output_names = output_names
        self.runs: list[tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]] = []

    def run(self, suffix: str, inputs: dict, ref: dict):
        self.runs.append((suffix, inputs, ref))


def build_conv1d():
    p = Params(seed=2001)
    p.conv("c1", 8, 4, (3,))
    p.batch_norm("bn1", 8)
    p.conv("c2", 8, 8, (5,))
    p.dense("fc", 32, 5)
    x = p.input((1, 4, 32))

    g = Graph(p)
    h = g.op("Relu", [g.batch_norm(g.conv("x", "c1", pad=1), "bn1")])
    h = g.pool("MaxPool", h, [2], [2])
    h = g.conv(h, "c2", stride=2, dilation=2, pad=4)
    h = g.pool("AveragePool", h, [2], [2])
    h = g.dense(g.op("Flatten", [h], axis=1), "fc")
    model = g.model("conv1d", [("x", np.float32, x.shape)], [(h, "y", np.float32, (1, 5))])

    r = relu(ref_bn(ref_conv(x, p["c1.weight"], p["c1.bias"], pad=1), p, "bn1"))
    assert r.shape == (1, 8, 32)
    r = ref_pool(r, [2], [2], kind="max")
    assert r.shape == (1, 8, 16)
    r = ref_conv(r, p["c2.weight"], p["c2.bias"], stride=2, dilation=2, pad=4)
    assert r.shape == (1, 8, 8)
    r = ref_pool(r, [2], [2], kind="avg")
    assert r.shape == (1, 8, 4)
    r = ref_dense(r.reshape(1, 32), p, "fc")

    case = Case("conv1d", model, p.tensors, ["y"])
    case.run("", {"x": x}, {"y": r})
    return [case]


def build_deconv():
    """Transposed convolutions (1-D with dilation and output padding, 3-D grouped with
    asymmetric padding, no bias) each followed by a dilated max pool."""
    p = Params(seed=2010)
    # ConvTranspose weights are [Cin, Cout / group, *kernel].
    p.put("u1.weight", p.rng.normal(0.0, 0.3, (4, 6, 3)))
    p.put("u1.bias", p.rng.normal(0.0, 0.1, (6,)))
    p.put("u3.weight", p.rng.normal(0.0, 0.3, (4, 3, 2, 3, 3)))
    a = p.input((1, 4, 10))
    b = p.input((1, 4, 3, 4, 5))

    g = Graph(p)
    h0 = g.op("ConvTranspose", ["a", "u1.weight", "u1.bias"], kernel_shape=[3], strides=[2],
              dilations=[2], pads=[1, 0], output_padding=[1])
    h0 = g.op("MaxPool", [h0], kernel_shape=[3], strides=[2], dilations=[2])
    h1 = g.op("ConvTranspose", ["b", "u3.weight"], kernel_shape=[2, 3, 3], strides=[1, 2, 2],
              pads=[0, 1, 1, 1, 0, 1], group=2)
    h1 = g.op("MaxPool", [h1], kernel_shape=[1, 2, 2], strides=[1, 1, 1], dilations=[1, 2, 2])
    model = g.model("deconv", [("a", np.float32, a.shape), ("b", np.float32, b.shape)],
                    [(h0, "y0", np.float32, (1, 6, 10)), (h1, "y1", np.float32, (1, 6, 3, 6, 7))])

    r0 = ref_conv_transpose(a, p["u1.weight"], p["u1.bias"], stride=[2], pads=[1, 0],
                            dilation=[2], output_padding=[1])
    assert r0.shape == (1, 6, 23)
    r0 = ref_max_pool_dilated(r0, [3], [2], [2])
    assert r0.shape == (1, 6, 10)
    r1 = ref_conv_transpose(b, p["u3.weight"], None, stride=[1, 2, 2], pads=[0, 1, 1, 1, 0, 1],
                            dilation=[1, 1, 1], output_padding=[0, 0, 0], group=2)
    assert r1.shape == (1, 6, 3, 8, 9)
    r1 = ref_max_pool_dilated(r1, [1, 2, 2], [1, 1, 1], [1, 2, 2])
    assert r1.shape == (1, 6, 3, 6, 7)

    case = Case("deconv", model, p.tensors, ["y0", "y1"])
    case.run("", {"a": a, "b": b}, {"y0": r0, "y1": r1})
    return [case]


def build_conv3d():
    p = Params(seed=2002)
    p.conv("c1", 4, 2, (3, 3, 3))
    p.batch_norm("bn1", 4)
    p.conv("c2", 6, 4, (3, 3, 3))
    p.dense("fc", 6, 3)
    x = p.input((1, 2, 6, 8, 8))

    g = Graph(p)
    h = g.op("Relu", [g.batch_norm(g.conv("x", "c1", pad=1), "bn1")])
    h = g.pool("MaxPool", h, [2, 2, 2], [2, 2, 2])
    h = g.conv(h, "c2", pad=1)
    h = g.pool("AveragePool", h, [1, 2, 2], [1, 2, 2])
    h = g.op("GlobalAveragePool", [h])
    h = g.dense(g.op("Flatten", [h], axis=1), "fc")
    model = g.model("conv3d", [("x", np.float32, x.shape)], [(h, "y", np.float32, (1, 3))])

    r = relu(ref_bn(ref_conv(x, p["c1.weight"], p["c1.bias"], pad=1), p, "bn1"))
    assert r.shape == (1, 4, 6, 8, 8)
    r = ref_pool(r, [2, 2, 2], [2, 2, 2], kind="max")
    assert r.shape == (1, 4, 3, 4, 4)
    r = ref_conv(r, p["c2.weight"], p["c2.bias"], pad=1)
    assert r.shape == (1, 6, 3, 4, 4)
    r = ref_pool(r, [1, 2, 2], [1, 2, 2], kind="avg")
    assert r.shape == (1, 6, 3, 2, 2)
    r = r.mean(axis=(2, 3, 4))
    r = ref_dense(r, p, "fc")

    case = Case("conv3d", model, p.tensors, ["y"])
    case.run("", {"x": x}, {"y": r})
    return [case]


def build_shuffle():
    p = Params(seed=2003)
    p.conv("pw1", 8, 8, (1, 1), bias=False)
    p.batch_norm("bn1", 8)
    p.conv("dw", 8, 1, (3, 3), bias=False)
    p.batch_norm("bn2", 8)
    p.conv("pw2", 8, 8, (1, 1), bias=False)
    p.batch_norm("bn3", 8)
    x = p.input((1, 16, 8, 8))

    g = Graph(p)
    # Split (opset 13+) takes the sizes as an int64 input.
    a, b = g.ops("Split", ["x", g.i64("split_sizes", [8, 8])], 2, axis=1)
    b = g.op("Relu", [g.batch_norm(g.conv(b, "pw1"), "bn1")])
    b = g.batch_norm(g.conv(b, "dw", pad=1, group=8), "bn2")
    b = g.op("Relu", [g.batch_norm(g.conv(b, "pw2"), "bn3")])
    y = g.op("Concat", [a, b], axis=1)
    y = g.op("Reshape", [y, g.i64("shape", [1, 2, 8, 8, 8])])
    y = g.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = g.op("Reshape", [y, g.i64("shape", [1, 16, 8, 8])])
    model = g.model("shuffle", [("x", np.float32, x.shape)],
                    [(y, "y", np.float32, (1, 16, 8, 8))])

    x64 = x.astype(np.float64)
    ra, rb = x64[:, :8], x64[:, 8:]
    rb = relu(ref_bn(ref_conv(rb, p["pw1.weight"]), p, "bn1"))
    rb = ref_bn(ref_conv(rb, p["dw.weight"], pad=1, group=8), p, "bn2")
    rb = relu(ref_bn(ref_conv(rb, p["pw2.weight"]), p, "bn3"))
    r = np.concatenate([ra, rb], axis=1)
    # Channel shuffle, written as the index map: output channel 2*i + j is input
    # channel 8*j + i (groups j = 0, 1 of 8 channels each).
    out = np.empty_like(r)
    for j in range(2):
        for i in range(8):
            out[:, 2 * i + j] = r[:, 8 * j + i]

    case = Case("shuffle", model, p.tensors, ["y"])
    case.run("", {"x": x}, {"y": out})
    return [case]


def build_transformer():
    p = Params(seed=2004)
    p.put("ln_g", 1.0 + 0.1 * p.rng.normal(0.0, 1.0, (16,)))
    p.put("ln_b", 0.1 * p.rng.normal(0.0, 1.0, (16,)))
    for w in ("wq", "wk", "wv", "wo"):
        # N(0, 1/16) read as variance 1/16: std 1/4 = 1/sqrt(fan_in).
        p.put(w, p.rng.normal(0.0, 0.25, (16, 16)))
    p.put("bo", p.rng.normal(0.0, 0.1, (16,)))
    x = p.input((1, 6, 16))
    scale = np.float32(0.35355339)

    g = Graph(p)
    # ReduceMean / ReduceMax take axes as an attribute at opset 17; ReduceSum (since
    # opset 13) takes them as an int64 input.
    mu = g.op("ReduceMean", ["x"], axes=[-1])
    d = g.op("Sub", ["x", mu])
    var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=[-1])
    h = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.f32("ln_eps", LN_EPS)])])])
    h = g.op("Add", [g.op("Mul", [h, "ln_g"]), "ln_b"])
    q = g.op("MatMul", [h, "wq"])
    k = g.op("MatMul", [h, "wk"])
    v = g.op("MatMul", [h, "wv"])
    q = g.op("Transpose", [g.op("Reshape", [q, g.i64("shape", [1, 6, 2, 8])])], perm=[0, 2, 1, 3])
    k = g.op("Transpose", [g.op("Reshape", [k, g.i64("shape", [1, 6, 2, 8])])], perm=[0, 2, 3, 1])
    v = g.op("Transpose", [g.op("Reshape", [v, g.i64("shape", [1, 6, 2, 8])])], perm=[0, 2, 1, 3])
    s = g.op("Mul", [g.op("MatMul", [q, k]), g.f32("scale", scale)])
    s = g.op("Softmax", [s], axis=-1)
    o = g.op("MatMul", [s, v])
    o = g.op("Reshape", [g.op("Transpose", [o], perm=[0, 2, 1, 3]), g.i64("shape", [1, 6, 16])])
    o = g.op("Add", [g.op("MatMul", [o, "wo"]), "bo"])
    y0 = g.op("Add", ["x", o])
    y1 = g.op("LogSoftmax", [g.op("ReduceMax", [y0], axes=[1], keepdims=0)], axis=-1)
    y2 = g.op("ReduceSum", [y0, g.i64("axes", [0, 2])], keepdims=0)
    model = g.model("transformer", [("x", np.float32, x.shape)],
                    [(y0, "y0", np.float32, (1, 6, 16)), (y1, "y1", np.float32, (1, 16)),
                     (y2, "y2", np.float32, (6,))])

    x64 = x.astype(np.float64)
    mu = x64.mean(axis=-1, keepdims=True)
    d = x64 - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    h = d / np.sqrt(var + np.float64(np.float32(LN_EPS))) * p.f64("ln_g") + p.f64("ln_b")
    q, k, v = (h @ p.f64(w) for w in ("wq", "wk", "wv"))
    heads = []
    for hd in range(2):
        cols = slice(8 * hd, 8 * hd + 8)
        qh, kh, vh = q[0, :, cols], k[0, :, cols], v[0, :, cols]   # [6, 8] each
        att = ref_softmax((qh @ kh.T) * np.float64(scale))          # [6, 6]
        heads.append(att @ vh)                                       # [6, 8]
    o = np.concatenate(heads, axis=-1)[None]                         # [1, 6, 16]
    o = o @ p.f64("wo") + p.f64("bo")
    r0 = x64 + o
    r1 = ref_log_softmax(r0.max(axis=1))
    r2 = r0.sum(axis=(0, 2))

    case = Case("transformer", model, p.tensors, ["y0", "y1", "y2"])
    case.run("", {"x": x}, {"y0": r0, "y1": r1, "y2": r2})
    return [case]


def build_datamove():
    p = Params(seed=2005)  # no weights; the generator draws the inputs only
    x = p.input((4, 5))
    idx = np.array([3, -1, 0], dtype=np.int64)
    b = p.rng.integers(0, 256, (2, 3, 4), dtype=np.uint8)
    d = p.input((3, 4), np.float64)

    g = Graph(p)
    y0 = g.op("Gather", ["x", "idx"], axis=0)
    y1 = g.op("Transpose", ["b"], perm=[2, 0, 1])
    y2 = g.op("Cast", ["b"], to=onnx.TensorProto.FLOAT)
    y3 = g.op("Slice", ["d", g.i64("starts", [1, 0]), g.i64("ends", [3, 4]),
                        g.i64("axes", [0, 1]), g.i64("steps", [1, 2])])
    y4 = g.op("ReduceSum", ["d", g.i64("axes", [1])])
    y5 = g.op("Cast", ["idx"], to=onnx.TensorProto.DOUBLE)
    y6 = g.op("Reshape", ["x", g.i64("shape", [1, 20, 1])])
    y6 = g.op("Squeeze", [y6, g.i64("axes", [0, 2])])
    y6 = g.op("Unsqueeze", [y6, g.i64("axes", [1])])
    y7 = g.op("Gather", ["b", g.const("idx2", np.array([1, 0, 1], dtype=np.int64))], axis=1)
    y8 = g.op("MatMul", ["d", g.op("Transpose", ["d"], perm=[1, 0])])
    outs = [(y0, np.float32, (3, 5)), (y1, np.uint8, (4, 2, 3)), (y2, np.float32, (2, 3, 4)),
            (y3, np.float64, (2, 2)), (y4, np.float64, (3, 1)), (y5, np.float64, (3,)),
            (y6, np.float32, (20, 1)), (y7, np.uint8, (2, 3, 4)), (y8, np.float64, (3, 3))]
    model = g.model("datamove",
                    [("x", np.float32, x.shape), ("idx", np.int64, idx.shape),
                     ("b", np.uint8, b.shape), ("d", np.float64, d.shape)],
                    [(v, f"y{i}", t, s) for i, (v, t, s) in enumerate(outs)])

    # Reference, element by element from the definitions (and in the output dtypes).
    x64 = x.astype(np.float64)
    r = {}
    r["y0"] = np.array([[x64[i % 4, j] for j in range(5)] for i in idx])
    r["y1"] = np.array([[[b[i, j, k] for j in range(3)] for i in range(2)] for k in range(4)],
                       dtype=np.uint8)
    r["y2"] = b.astype(np.float64)
    r["y3"] = np.array([[d[i, j] for j in range(0, 4, 2)] for i in range(1, 3)])
    r["y4"] = np.array([[sum(d[i, j] for j in range(4))] for i in range(3)])
    r["y5"] = np.array([float(i) for i in idx])
    r["y6"] = np.array([[x64[n // 5, n % 5]] for n in range(20)])
    r["y7"] = np.array([[[b[i, j, k] for k in range(4)] for j in (1, 0, 1)] for i in range(2)],
                       dtype=np.uint8)
    r["y8"] = np.array([[sum(d[i, k] * d[j, k] for k in range(4)) for j in range(3)]
                        for i in range(3)])

    case = Case("datamove", model, p.tensors, [f"y{i}" for i in range(9)])
    case.run("", {"x": x, "idx": idx, "b": b, "d": d}, r)
    return [case]


def build_multishape():
    p = Params(seed=2006)
    p.conv("c1", 8, 3, (3, 3))
    p.conv("c2", 4, 8, (3, 3))

    g = Graph(p)
    h = g.op("Relu", [g.conv("x", "c1", pad=1)])
    h = g.pool("MaxPool", h, [2, 2], [2, 2])
    h = g.op("GlobalAveragePool", [g.conv(h, "c2", pad=1)])
    model = g.model("multishape", [("x", np.float32, (1, 3, "H", "W"))],
                    [(h, "y", np.float32, (1, 4, 1, 1))])

    case = Case("multishape", model, p.tensors, ["y"])
    for hh, ww in ((8, 8), (12, 12), (16, 10)):
        x = p.input((1, 3, hh, ww))
        r = relu(ref_conv(x, p["c1.weight"], p["c1.bias"], pad=1))
        r = ref_pool(r, [2, 2], [2, 2], kind="max")
        r = ref_conv(r, p["c2.weight"], p["c2.bias"], pad=1)
        assert r.shape == (1, 4, hh // 2, ww // 2)
        r = r.mean(axis=(2, 3), keepdims=True)
        case.run(f"_{hh}x{ww}", {"x": x}, {"y": r})
    return [case]


def build_dynslice():
    p = Params(seed=2007)
    x = p.input((10, 4))

    g = Graph(p)
    t = g.op("Slice", ["x", "s", "e", g.i64("axes", [0])])
    y0 = g.op("Mul", [g.op("Relu", [t]), g.f32("two", 2.0)])
    y1 = g.op("ReduceSum", [y0, g.i64("axes", [0])], keepdims=0)
    model = g.model("dynslice",
                    [("x", np.float32, x.shape), ("s", np.int64, (1,)), ("e", np.int64, (1,))],
                    [(y0, "y0", np.float32, ("n", 4)), (y1, "y1", np.float32, (4,))])

    case = Case("dynslice", model, p.tensors, ["y0", "y1"])
    x64 = x.astype(np.float64)
    for s, e in ((2, 7), (0, 10), (-3, 100), (5, 5)):
        lo, hi = ref_slice_bounds(s, e, 10)
        rows = [x64[i] for i in range(lo, hi)]
        r0 = np.array([relu(row) * 2.0 for row in rows]).reshape(len(rows), 4)
        r1 = r0.sum(axis=0)
        case.run(f"_{s}_{e}", {"x": x, "s": np.array([s], np.int64), "e": np.array([e], np.int64)},
                 {"y0": r0, "y1": r1})
    return [case]


def build_nonzero():
    p = Params(seed=2008)
    xs = []
    x = p.input((12,))
    x[5] = 0.0  # an exact zero: Greater is strict, so it must not be selected
    xs.append(x)
    n_first = int((x > 0).sum())
    while True:  # a second draw with a different count (deterministic: same seed)
        x = p.input((12,))
        if int((x > 0).sum()) != n_first:
            break
    xs.append(x)
    xs.append(-np.abs(p.input((12,))))  # nothing positive: n = 0

    g = Graph(p)
    m = g.op("Greater", ["x", g.f32("zero", 0.0)])
    idx = g.op("NonZero", [m])
    y = g.op("Gather", ["x", g.op("Reshape", [idx, g.i64("shape", [-1])])], axis=0)
    model = g.model("nonzero", [("x", np.float32, (12,))], [(y, "y", np.float32, ("n",))])

    case = Case("nonzero", model, p.tensors, ["y"])
    for x in xs:
        r = np.array([float(v) for v in x if v > 0], dtype=np.float64)
        case.run(f"_{len(r)}", {"x": x}, {"y": r})
    assert len({len(r["y"]) for _, _, r in case.runs}) == 3
    return [case]


# --------------------------------------------------------------------------------------
# Running, checking and writing
# --------------------------------------------------------------------------------------


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    # Disabled optimisations: onnxruntime computes the graph as written.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def check(tag: str, name: str, got: np.ndarray, ref: np.ndarray, dtype) -> float:
    assert got.dtype == np.dtype(dtype), f"{tag}/{name}: onnxruntime dtype {got.dtype}, want {dtype}"
    assert got.shape == ref.shape, f"{tag}/{name}: onnxruntime shape {got.shape} vs reference {ref.shape}"
    if got.size == 0:
        return 0.0
    if np.issubdtype(got.dtype, np.integer):
        assert np.array_equal(got, ref), f"{tag}/{name}: integer output differs"
        return 0.0
    atol = F64_ATOL if got.dtype == np.float64 else F32_ATOL
    diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    assert diff < atol, f"{tag}/{name}: onnxruntime and numpy reference differ by {diff}"
    return diff


def out_dtype(model: onnx.ModelProto, name: str):
    for o in model.graph.output:
        if o.name == name:
            return helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
    raise KeyError(name)


def describe(t: np.ndarray) -> str:
    return f"{t.dtype}{list(t.shape)}"


def write(path: Path, write_fn, summary: str) -> None:
    write_fn(str(path))
    size = path.stat().st_size
    assert size < MAX_FILE_BYTES, f"{path} is {size} bytes"
    print(f"{path.relative_to(ROOT)} ({size} bytes): {summary}")


def main() -> int:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    builders = (build_conv1d, build_conv3d, build_deconv, build_shuffle, build_transformer, build_datamove,
                build_multishape, build_dynslice, build_nonzero)
    # Build and check everything first, so a failing check writes nothing.
    checked = []
    for build in builders:
        for case in build():
            sess = session(case.model)
            results = []
            for suffix, inputs, ref in case.runs:
                tag = case.name + suffix
                got = sess.run(case.output_names, inputs)
                outs = {}
                worst = 0.0
                for oname, value in zip(case.output_names, got):
                    value = np.ascontiguousarray(value)
                    worst = max(worst, check(tag, oname, value, ref[oname],
                                             out_dtype(case.model, oname)))
                    outs[oname] = value
                results.append((suffix, inputs, outs, worst))
            checked.append((case, results))

    for case, results in checked:
        w = case.weights
        write(OUT_DIR / f"{case.name}.safetensors", lambda p: save_file(w, p),
              f"{len(w)} weight tensors" + (": " + ", ".join(w) if w else ""))
        write(OUT_DIR / f"{case.name}.onnx", lambda p: onnx.save(case.model, p),
              f"{len(case.model.graph.node)} nodes, opset {OPSET}")
        for suffix, inputs, outs, worst in results:
            tensors = {**inputs, **outs}
            write(OUT_DIR / f"{case.name}_io{suffix}.safetensors",
                  lambda p: save_file(tensors, p),
                  ", ".join(f"{k} {describe(v)}" for k, v in inputs.items()) + " -> " +
                  ", ".join(f"{k} {describe(v)}" for k, v in outs.items()) +
                  f"; max |onnxruntime - numpy| = {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
