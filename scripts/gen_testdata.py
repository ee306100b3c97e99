"""Generate the reference data that kiln's integration tests compare against.

kiln compiles networks written in its DSL at compile time, so the only way to know
that the generated code computes the right numbers is to run the same network in an
independent engine.  This script builds small networks (`mlp`, `lenet`, `block`,
`wino`, `wino_wide`, `deep`, `residual`, `blocked`) as ONNX graphs with random
weights, runs them in onnxruntime with all graph
optimisations disabled (so it computes exactly the graph we wrote, not a fused
rewrite of it), and writes, for each network NAME, into `tests/data/`:

* `NAME.safetensors`    the weights, float32, under PyTorch-style names
                        (`conv1.weight`, `bn1.running_mean`, ...), which are the
                        names the kiln DSL reads;
* `NAME_io.safetensors` `x`, the input, and `y`, onnxruntime's output (float32,
                        full shapes including the batch dimension);
* `NAME.onnx`           the graph itself, self-contained, for ONNX import work.

Before writing anything the script also evaluates every network with a plain numpy
(float64) implementation written straight from the operator definitions, and asserts
that it agrees with onnxruntime.  That catches a mistake in the ONNX graph itself
(a wrong pad order, a missing `group` attribute), which would otherwise be baked into
the reference data and make kiln's tests check the wrong thing.

The output is deterministic: one seeded numpy Generator per network, and both file
formats serialise in a fixed order, so rerunning the script gives identical files.

Usage: python3 scripts/gen_testdata.py [NAME ...]  (from anywhere; paths are repo-relative;
with names, only those networks' files are written)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "data"

OPSET = 17
# IR version 8 is the one that goes with opset 17; pinning it (rather than taking
# onnx's newest default) keeps the files loadable by older importers and runtimes.
IR_VERSION = 8
BN_EPS = 1e-5
# float32 engine vs float64 reference: differences are rounding only, ~1e-7.
REF_ATOL = 1e-5


# --------------------------------------------------------------------------------------
# Random parameters
# --------------------------------------------------------------------------------------


class Params:
    """Collects named float32 tensors drawn from one seeded generator.

    The draws happen in the order the network is described, so the values are a pure
    function of the seed and of that order.
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.tensors: dict[str, np.ndarray] = {}

    def _put(self, name: str, value: np.ndarray) -> np.ndarray:
        assert name not in self.tensors, f"duplicate tensor name {name}"
        value = np.ascontiguousarray(value, dtype=np.float32)
        self.tensors[name] = value
        return value

    def conv(self, name: str, cout: int, cin_per_group: int, kh: int, kw: int, bias: bool):
        fan_in = cin_per_group * kh * kw
        self._put(f"{name}.weight",
                  self.rng.normal(0.0, 1.0 / np.sqrt(fan_in), (cout, cin_per_group, kh, kw)))
        if bias:
            self._put(f"{name}.bias", self.rng.normal(0.0, 0.1, (cout,)))

    def dense(self, name: str, n_in: int, n_out: int):
        self._put(f"{name}.weight", self.rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_out, n_in)))
        self._put(f"{name}.bias", self.rng.normal(0.0, 0.1, (n_out,)))

    def batch_norm(self, name: str, c: int):
        self._put(f"{name}.weight", self.rng.uniform(0.5, 1.5, (c,)))
        self._put(f"{name}.bias", self.rng.normal(0.0, 0.1, (c,)))
        self._put(f"{name}.running_mean", self.rng.normal(0.0, 0.1, (c,)))
        self._put(f"{name}.running_var", self.rng.uniform(0.5, 1.5, (c,)))

    def input(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.ascontiguousarray(self.rng.normal(0.0, 1.0, shape), dtype=np.float32)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]


# --------------------------------------------------------------------------------------
# ONNX graph building
# --------------------------------------------------------------------------------------


class Graph:
    """A thin builder over `onnx.helper` that names intermediate values automatically."""

    def __init__(self, params: Params):
        self.params = params
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

    def const(self, name: str, value: np.ndarray) -> str:
        """A constant that is part of the graph but not a learned weight (Clip bounds, pads)."""
        self.consts.append(numpy_helper.from_array(value, name=name))
        return name

    # Layers, named the way the safetensors file names their weights.

    def conv(self, x: str, name: str, *, pads=(0, 0, 0, 0), strides=(1, 1),
             dilations=(1, 1), group=1) -> str:
        w = self.params[f"{name}.weight"]
        inputs = [x, f"{name}.weight"]
        if f"{name}.bias" in self.params.tensors:
            inputs.append(f"{name}.bias")
        # ONNX pads are [top, left, bottom, right] (all begins, then all ends).
        return self.op("Conv", inputs, kernel_shape=list(w.shape[2:]), pads=list(pads),
                       strides=list(strides), dilations=list(dilations), group=group)

    def dense(self, x: str, name: str) -> str:
        # Weights are stored [out, in] (PyTorch), so Gemm multiplies by B transposed.
        return self.op("Gemm", [x, f"{name}.weight", f"{name}.bias"], transB=1)

    def batch_norm(self, x: str, name: str) -> str:
        return self.op("BatchNormalization",
                       [x, f"{name}.weight", f"{name}.bias",
                        f"{name}.running_mean", f"{name}.running_var"],
                       epsilon=BN_EPS)

    def clip(self, x: str, lo: float, hi: float) -> str:
        # Since opset 11 Clip takes its bounds as inputs, not attributes.
        lo_name = self.const(f"clip_min_{self.counter + 1}", np.array(lo, dtype=np.float32))
        hi_name = self.const(f"clip_max_{self.counter + 1}", np.array(hi, dtype=np.float32))
        return self.op("Clip", [x, lo_name, hi_name])

    def model(self, name: str, x_shape, x: str, y: str, y_shape) -> onnx.ModelProto:
        # Rename the final value to "y" with an Identity so the graph's output name is
        # stable no matter how many nodes precede it.
        self.nodes.append(helper.make_node("Identity", [y], ["y"], name="output"))
        initializers = [numpy_helper.from_array(v, name=k)
                        for k, v in self.params.tensors.items()] + self.consts
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
            initializer=initializers,
        )
        model = helper.make_model(graph, producer_name="kiln/scripts/gen_testdata.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


# --------------------------------------------------------------------------------------
# Independent numpy reference (float64), written from the operator definitions
# --------------------------------------------------------------------------------------


def ref_conv(x, w, b=None, *, pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), group=1):
    """Direct convolution: for each kernel tap, a strided slice of the padded input
    times that tap's [Cout_g, Cin_g] weight matrix, summed over taps."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, cin, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    assert cin == cin_g * group and cout % group == 0
    cout_g = cout // group
    pt, pl, pb, pr = pads
    sh, sw = strides
    dh, dw = dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, cout, oh, ow))
    for g in range(group):
        xg = xp[:, g * cin_g:(g + 1) * cin_g]
        wg = w[g * cout_g:(g + 1) * cout_g]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                           j * dw: j * dw + sw * (ow - 1) + 1: sw]
                y[:, g * cout_g:(g + 1) * cout_g] += np.einsum("ncyx,oc->noyx", patch, wg[:, :, i, j])
    if b is not None:
        y += np.asarray(b, np.float64)[None, :, None, None]
    return y


def ref_pool(x, k, s, *, kind, pads=(0, 0, 0, 0), count_include_pad=False):
    """Max or average pooling by explicit windows; padding never wins a max and, with
    count_include_pad false, is left out of an average's divisor."""
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - k) // s + 1
    ow = (w + pl + pr - k) // s + 1
    y = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s - pt, ox * s - pl
            ys, xs = max(y0, 0), max(x0, 0)
            ye, xe = min(y0 + k, h), min(x0 + k, w)
            win = x[:, :, ys:ye, xs:xe]
            if kind == "max":
                y[:, :, oy, ox] = win.max(axis=(2, 3))
            else:
                divisor = k * k if count_include_pad else (ye - ys) * (xe - xs)
                y[:, :, oy, ox] = win.sum(axis=(2, 3)) / divisor
    return y


def ref_dense(x, p: Params, name: str):
    return x @ p[f"{name}.weight"].astype(np.float64).T + p[f"{name}.bias"]


def ref_bn(x, p: Params, name: str):
    shape = (1, -1, 1, 1)
    g, b, m, v = (p[f"{name}.{k}"].astype(np.float64).reshape(shape)
                  for k in ("weight", "bias", "running_mean", "running_var"))
    return (x - m) / np.sqrt(v + BN_EPS) * g + b


def ref_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def leaky(z, alpha):
    return np.where(z >= 0, z, alpha * z)


def relu(z):
    return np.maximum(z, 0.0)


def relu6(z):
    return np.clip(z, 0.0, 6.0)


# --------------------------------------------------------------------------------------
# The three networks: each returns (onnx model, x, numpy reference output, weights)
# --------------------------------------------------------------------------------------


def build_mlp():
    p = Params(seed=1001)
    p.dense("fc1", 20, 32)
    p.dense("fc2", 32, 16)
    p.dense("fc3", 16, 5)
    x = p.input((3, 20))

    g = Graph(p)
    h = g.op("Relu", [g.dense("x", "fc1")])
    h = g.op("Tanh", [g.dense(h, "fc2")])
    h = g.op("Softmax", [g.dense(h, "fc3")], axis=-1)
    model = g.model("mlp", x.shape, "x", h, (3, 5))

    r = relu(ref_dense(x.astype(np.float64), p, "fc1"))
    r = np.tanh(ref_dense(r, p, "fc2"))
    r = ref_softmax(ref_dense(r, p, "fc3"))
    return model, x, r, p.tensors


def build_lenet():
    p = Params(seed=1002)
    p.conv("conv1", 6, 1, 5, 5, bias=True)
    p.conv("conv2", 16, 6, 5, 5, bias=True)
    p.dense("fc1", 400, 120)
    p.dense("fc2", 120, 84)
    p.dense("fc3", 84, 10)
    x = p.input((1, 1, 28, 28))

    g = Graph(p)
    h = g.op("Relu", [g.conv("x", "conv1", pads=(2, 2, 2, 2))])
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.clip(g.conv(h, "conv2"), 0.0, 6.0)
    h = g.op("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.op("Flatten", [h], axis=1)
    h = g.op("Sigmoid", [g.dense(h, "fc1")])
    h = g.op("LeakyRelu", [g.dense(h, "fc2")], alpha=0.1)
    h = g.dense(h, "fc3")
    model = g.model("lenet", x.shape, "x", h, (1, 10))

    r = relu(ref_conv(x, p["conv1.weight"], p["conv1.bias"], pads=(2, 2, 2, 2)))
    assert r.shape == (1, 6, 28, 28)
    r = ref_pool(r, 2, 2, kind="max")
    assert r.shape == (1, 6, 14, 14)
    r = relu6(ref_conv(r, p["conv2.weight"], p["conv2.bias"]))
    assert r.shape == (1, 16, 10, 10)
    r = ref_pool(r, 2, 2, kind="avg")
    assert r.shape == (1, 16, 5, 5)
    r = r.reshape(1, 400)
    r = sigmoid(ref_dense(r, p, "fc1"))
    r = leaky(ref_dense(r, p, "fc2"), 0.1)
    r = ref_dense(r, p, "fc3")
    return model, x, r, p.tensors


def build_block():
    p = Params(seed=1003)
    p.conv("expand", 16, 8, 1, 1, bias=False)
    p.batch_norm("bn1", 16)
    p.conv("dw", 16, 1, 3, 3, bias=False)
    p.batch_norm("bn2", 16)
    p.conv("project", 8, 16, 1, 1, bias=False)
    p.batch_norm("bn3", 8)
    p.batch_norm("bn4", 8)
    p.conv("side", 8, 8, 3, 3, bias=True)
    p.conv("dil", 8, 8, 3, 3, bias=True)
    p.dense("head", 24, 10)
    x = p.input((1, 8, 16, 16))

    g = Graph(p)
    a = g.clip(g.batch_norm(g.conv("x", "expand"), "bn1"), 0.0, 6.0)
    a = g.op("Relu", [g.batch_norm(g.conv(a, "dw", pads=(1, 1, 1, 1), group=16), "bn2")])
    a = g.batch_norm(g.conv(a, "project"), "bn3")
    r = g.op("Add", [a, "x"])
    r = g.batch_norm(r, "bn4")
    # Pad (opset 11+) takes pads as an int64 input: [x1_begin, x2_begin, ..., x1_end, ...].
    pads = g.const("side_pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64))
    zero = g.const("side_pad_value", np.array(0.0, dtype=np.float32))
    b = g.op("Pad", ["x", pads, zero], mode="constant")
    b = g.op("LeakyRelu", [g.conv(b, "side", strides=(2, 2))], alpha=0.2)
    d = g.conv("x", "dil", pads=(2, 2, 2, 2), strides=(2, 2), dilations=(2, 2))
    r = g.op("MaxPool", [r], kernel_shape=[2, 2], strides=[2, 2])
    c = g.op("Concat", [r, b, d], axis=1)
    s = g.op("Sigmoid", [g.op("GlobalAveragePool", [c])])
    c = g.op("Mul", [c, s])
    c = g.op("AveragePool", [c], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             count_include_pad=0)
    h = g.op("Flatten", [g.op("GlobalAveragePool", [c])], axis=1)
    h = g.op("Softmax", [g.dense(h, "head")], axis=-1)
    model = g.model("block", x.shape, "x", h, (1, 10))

    x64 = x.astype(np.float64)
    a = relu6(ref_bn(ref_conv(x64, p["expand.weight"]), p, "bn1"))
    a = relu(ref_bn(ref_conv(a, p["dw.weight"], pads=(1, 1, 1, 1), group=16), p, "bn2"))
    a = ref_bn(ref_conv(a, p["project.weight"]), p, "bn3")
    r = ref_bn(a + x64, p, "bn4")
    assert r.shape == (1, 8, 16, 16)
    b = np.pad(x64, ((0, 0), (0, 0), (1, 1), (1, 1)))
    assert b.shape == (1, 8, 18, 18)
    b = leaky(ref_conv(b, p["side.weight"], p["side.bias"], strides=(2, 2)), 0.2)
    assert b.shape == (1, 8, 8, 8)
    d = ref_conv(x64, p["dil.weight"], p["dil.bias"], pads=(2, 2, 2, 2), strides=(2, 2),
                 dilations=(2, 2))
    assert d.shape == (1, 8, 8, 8)
    r = ref_pool(r, 2, 2, kind="max")
    c = np.concatenate([r, b, d], axis=1)
    assert c.shape == (1, 24, 8, 8)
    c = c * sigmoid(c.mean(axis=(2, 3), keepdims=True))
    c = ref_pool(c, 3, 2, kind="avg", pads=(1, 1, 1, 1), count_include_pad=False)
    assert c.shape == (1, 24, 4, 4)
    h = ref_softmax(ref_dense(c.mean(axis=(2, 3)), p, "head"))
    return model, x, h, p.tensors


def build_wino():
    """Two 3x3 stride-1 convolutions wide enough for kiln's Winograd rule (64 channels in and
    more than 64 out, at least 49 output tiles of 4x4): the first with a batch norm folded into
    it and a ReLU, the second with asymmetric padding (ragged tiles at the bottom and right), a
    bias and a leaky ReLU."""
    p = Params(seed=1004)
    p.conv("c1", 72, 64, 3, 3, bias=False)
    p.batch_norm("bn1", 72)
    p.conv("c2", 72, 72, 3, 3, bias=True)
    x = p.input((1, 64, 28, 28))

    g = Graph(p)
    a = g.op("Relu", [g.batch_norm(g.conv("x", "c1", pads=(1, 1, 1, 1)), "bn1")])
    b = g.op("LeakyRelu", [g.conv(a, "c2", pads=(2, 1, 1, 0))], alpha=0.1)
    model = g.model("wino", x.shape, "x", b, (1, 72, 29, 27))

    x64 = x.astype(np.float64)
    a = relu(ref_bn(ref_conv(x64, p["c1.weight"], pads=(1, 1, 1, 1)), p, "bn1"))
    b = leaky(ref_conv(a, p["c2.weight"], p["c2.bias"], pads=(2, 1, 1, 0)), 0.1)
    assert b.shape == (1, 72, 29, 27)
    return model, x, b, p.tensors


def build_wino_wide():
    """A 3x3 stride-1 convolution of 256 channels on a 14x14 map (16 output tiles of 4x4), as
    ResNet-50's: a Winograd layer whose algorithm the CPU decides (kiln's
    `contract::few_tiles`), so kiln keeps both weight preparations; with a batch norm folded
    into it and a ReLU."""
    p = Params(seed=1008)
    p.conv("c1", 256, 256, 3, 3, bias=False)
    p.batch_norm("bn1", 256)
    x = p.input((1, 256, 14, 14))

    g = Graph(p)
    a = g.op("Relu", [g.batch_norm(g.conv("x", "c1", pads=(1, 1, 1, 1)), "bn1")])
    model = g.model("wino_wide", x.shape, "x", a, (1, 256, 14, 14))

    x64 = x.astype(np.float64)
    a = relu(ref_bn(ref_conv(x64, p["c1.weight"], pads=(1, 1, 1, 1)), p, "bn1"))
    assert a.shape == (1, 256, 14, 14)
    return model, x, a, p.tensors


def build_deep():
    """Convolutions deeper than one block of the x86 GEMM (k = c_in/groups * kh * kw > 384),
    whose weights kiln stores pre-packed: one with a folded batch norm and a bias, one grouped."""
    p = Params(seed=1004)
    p.conv("c1", 100, 8, 1, 1, bias=False)
    p.batch_norm("bn1", 100)
    p.conv("c2", 16, 100, 3, 3, bias=True)
    p.batch_norm("bn2", 16)
    p.conv("c3", 8, 50, 3, 3, bias=True)
    p.dense("head", 24, 10)
    x = p.input((1, 8, 6, 6))

    g = Graph(p)
    a = g.op("Relu", [g.batch_norm(g.conv("x", "c1"), "bn1")])
    b = g.batch_norm(g.conv(a, "c2", pads=(1, 1, 1, 1)), "bn2")
    c = g.op("Relu", [g.conv(a, "c3", pads=(1, 1, 1, 1), group=2)])
    d = g.op("Concat", [b, c], axis=1)
    h = g.op("Flatten", [g.op("GlobalAveragePool", [d])], axis=1)
    h = g.dense(h, "head")
    model = g.model("deep", x.shape, "x", h, (1, 10))

    x64 = x.astype(np.float64)
    a = relu(ref_bn(ref_conv(x64, p["c1.weight"]), p, "bn1"))
    b = ref_bn(ref_conv(a, p["c2.weight"], p["c2.bias"], pads=(1, 1, 1, 1)), p, "bn2")
    c = relu(ref_conv(a, p["c3.weight"], p["c3.bias"], pads=(1, 1, 1, 1), group=2))
    d = np.concatenate([b, c], axis=1)
    assert d.shape == (1, 24, 6, 6)
    h = ref_dense(d.mean(axis=(2, 3)), p, "head")
    return model, x, h, p.tensors


def build_residual():
    """Residual blocks (kiln fuses each Add into the convolution feeding it): an im2col grouped
    convolution plus the input, then ReLU; a pointwise convolution with a batch norm plus an
    earlier value, then ReLU6; two convolutions added together; a convolution deeper
    than one GEMM depth block plus a sigmoid branch, then tanh."""
    p = Params(seed=1005)
    p.conv("c1", 100, 8, 1, 1, bias=False)
    p.batch_norm("bn1", 100)
    p.conv("c3", 8, 50, 3, 3, bias=True)
    p.conv("c4", 100, 8, 1, 1, bias=False)
    p.batch_norm("bn4", 100)
    p.conv("c5", 8, 50, 3, 3, bias=True)
    p.conv("c6", 8, 50, 3, 3, bias=True)
    p.conv("c2", 16, 100, 3, 3, bias=True)
    p.conv("c7", 16, 100, 3, 3, bias=True)
    p.dense("head", 24, 10)
    x = p.input((1, 8, 10, 10))

    g = Graph(p)
    same = (1, 1, 1, 1)
    a = g.op("Relu", [g.batch_norm(g.conv("x", "c1"), "bn1")])
    c = g.op("Relu", [g.op("Add", [g.conv(a, "c3", pads=same, group=2), "x"])])
    q = g.batch_norm(g.conv(c, "c4"), "bn4")
    q = g.clip(g.op("Add", [q, a]), 0.0, 6.0)
    s = g.op("Add", [g.conv(q, "c5", pads=same, group=2), g.conv(a, "c6", pads=same, group=2)])
    u = g.op("Sigmoid", [g.conv(a, "c7", pads=same)])
    b = g.op("Tanh", [g.op("Add", [g.conv(q, "c2", pads=same), u])])
    d = g.op("Concat", [b, s], axis=1)
    h = g.op("Flatten", [g.op("GlobalAveragePool", [d])], axis=1)
    h = g.dense(h, "head")
    model = g.model("residual", x.shape, "x", h, (1, 10))

    x64 = x.astype(np.float64)
    a = relu(ref_bn(ref_conv(x64, p["c1.weight"]), p, "bn1"))
    c = relu(ref_conv(a, p["c3.weight"], p["c3.bias"], pads=same, group=2) + x64)
    q = np.clip(ref_bn(ref_conv(c, p["c4.weight"]), p, "bn4") + a, 0.0, 6.0)
    s = (ref_conv(q, p["c5.weight"], p["c5.bias"], pads=same, group=2)
         + ref_conv(a, p["c6.weight"], p["c6.bias"], pads=same, group=2))
    u = sigmoid(ref_conv(a, p["c7.weight"], p["c7.bias"], pads=same))
    b = np.tanh(ref_conv(q, p["c2.weight"], p["c2.bias"], pads=same) + u)
    d = np.concatenate([b, s], axis=1)
    assert d.shape == (1, 24, 10, 10)
    h = ref_dense(d.mean(axis=(2, 3)), p, "head")
    return model, x, h, p.tensors


def build_blocked():
    """A network whose convolutions kiln runs in the blocked channel layout NCHW16c where the
    kernel table says so (3x3 convolutions through im2col on 28x28 maps, channels in whole
    blocks of 16 and at least four blocks out, a batch of two): values stored blocked between
    convolutions, a residual stored blocked (`a`) and one converted from the model's input
    (`x`), the input converted on the way in, a stride-2 result converted back for the
    pool, and a 64 -> 32 3x3 layer that runs through the blocked Winograd convolution (fewer
    than four output blocks), its result converted back for the other pool."""
    p = Params(seed=1006)
    p.conv("c1", 64, 64, 3, 3, bias=False)
    p.batch_norm("bn1", 64)
    p.conv("c2", 64, 64, 3, 3, bias=True)
    p.conv("c5", 64, 64, 3, 3, bias=True)
    p.conv("c3", 64, 64, 3, 3, bias=True)
    p.conv("c4", 64, 64, 3, 3, bias=True)
    p.conv("c8", 32, 64, 3, 3, bias=True)
    p.dense("head", 96, 10)
    x = p.input((2, 64, 28, 28))

    g = Graph(p)
    same = (1, 1, 1, 1)
    a = g.op("Relu", [g.batch_norm(g.conv("x", "c1", pads=same), "bn1")])
    b = g.op("Relu", [g.conv(a, "c2", pads=same)])
    e = g.op("Add", [g.conv(b, "c5", pads=same), a])
    c = g.op("Relu", [g.op("Add", [g.conv(e, "c3", pads=same), "x"])])
    d = g.op("Relu", [g.conv(c, "c4", pads=same, strides=(2, 2))])
    f = g.op("Relu", [g.conv(c, "c8", pads=same)])
    h = g.op("Concat", [g.op("GlobalAveragePool", [d]), g.op("GlobalAveragePool", [f])], axis=1)
    h = g.op("Flatten", [h], axis=1)
    h = g.dense(h, "head")
    model = g.model("blocked", x.shape, "x", h, (2, 10))

    x64 = x.astype(np.float64)
    a = relu(ref_bn(ref_conv(x64, p["c1.weight"], pads=same), p, "bn1"))
    b = relu(ref_conv(a, p["c2.weight"], p["c2.bias"], pads=same))
    e = ref_conv(b, p["c5.weight"], p["c5.bias"], pads=same) + a
    c = relu(ref_conv(e, p["c3.weight"], p["c3.bias"], pads=same) + x64)
    d = relu(ref_conv(c, p["c4.weight"], p["c4.bias"], pads=same, strides=(2, 2)))
    assert d.shape == (2, 64, 14, 14)
    f = relu(ref_conv(c, p["c8.weight"], p["c8.bias"], pads=same))
    assert f.shape == (2, 32, 28, 28)
    h = ref_dense(np.concatenate([d.mean(axis=(2, 3)), f.mean(axis=(2, 3))], axis=1), p, "head")
    return model, x, h, p.tensors


# --------------------------------------------------------------------------------------
# Running and writing
# --------------------------------------------------------------------------------------


def run_onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    # Disabled optimisations: onnxruntime must compute the graph as written (no
    # Conv+BN folding, no fused activations), since that is what kiln is checked against.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    (y,) = sess.run(["y"], {"x": x})
    return np.ascontiguousarray(y, dtype=np.float32)


def write(path: Path, write_fn) -> None:
    write_fn(str(path))
    print(f"  wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def main() -> int:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    builds = (("mlp", build_mlp), ("lenet", build_lenet), ("block", build_block),
              ("wino", build_wino), ("wino_wide", build_wino_wide), ("deep", build_deep), ("residual", build_residual),
              ("blocked", build_blocked))
    # `gen_testdata.py NAME ...` writes only those networks' files.
    wanted = set(sys.argv[1:])
    for name, build in builds:
        if wanted and name not in wanted:
            continue
        model, x, ref, weights = build()
        y = run_onnxruntime(model, x)
        assert y.shape == ref.shape, f"{name}: onnxruntime shape {y.shape} vs reference {ref.shape}"
        diff = float(np.max(np.abs(y.astype(np.float64) - ref)))
        assert diff < REF_ATOL, f"{name}: onnxruntime and numpy reference differ by {diff}"
        print(f"{name}: x {list(x.shape)} -> y {list(y.shape)}, max |y| = {np.max(np.abs(y)):.6g}, "
              f"max |onnxruntime - numpy| = {diff:.3g}")
        write(OUT_DIR / f"{name}.safetensors", lambda p: save_file(weights, p))
        write(OUT_DIR / f"{name}_io.safetensors", lambda p: save_file({"x": x, "y": y}, p))
        write(OUT_DIR / f"{name}.onnx", lambda p: onnx.save(model, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
