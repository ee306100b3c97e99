"""The networks of the end-to-end benchmark, each described once and emitted twice: as an ONNX
graph (for onnxruntime) and as a `kiln::network!` (for kiln), so the two cannot drift.

`Net` is a small graph builder: every method adds one operation to the ONNX graph *and* one
`let` statement to the DSL text, tracking the shape so the DSL's declared types (`weights<Cin ->
KxKxf32 -> Cout>`, the output type) come out right, and draws the parameters (seeded, under
torchvision's `state_dict` names, which the DSL reads) as it goes. `MODELS` maps each name to
the function that describes it. Used by `scripts/bench_e2e.py`; imports nothing from it.

The descriptions follow the published architectures at batch 1, 3x224x224 (see each function).
Pools that the original defines with `ceil_mode` are written as ONNX `ceil_mode = 1` and as an
explicit bottom/right padding in the DSL (kiln has no ceil mode; for a max pool the two are the
same computation), so onnxruntime checks that equivalence too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
BN_EPS = 1e-5


@dataclass(frozen=True)
class V:
    """A value: its ONNX tensor name, its DSL variable and its shape without the batch."""

    onnx: str
    dsl: str
    shape: tuple[int, ...]


class Net:
    """Builds one network as ONNX and DSL at once (see the module doc)."""

    def __init__(self, name: str, type_name: str, doc: str, seed: int,
                 shape: tuple[int, ...] = (3, 224, 224)):
        self.name = name
        self.type_name = type_name
        self.doc = doc
        self.rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.lines: list[str] = []
        self.counter = 0
        self.input = V("x", "x", shape)

    # -- bookkeeping --------------------------------------------------------------------

    def _param(self, name: str, value: np.ndarray) -> str:
        assert name not in self.params, f"duplicate tensor name {name}"
        self.params[name] = np.ascontiguousarray(value, dtype=np.float32)
        return name

    def _const(self, value: np.ndarray) -> str:
        name = f"const_{len(self.consts)}"
        self.consts[name] = value
        return name

    def _emit(self, op_type: str, inputs: list[str], expr: str, shape: tuple[int, ...],
              outputs: int = 1, **attrs) -> list[V]:
        """One ONNX node and one DSL `let` with `outputs` results."""
        names = []
        for _ in range(outputs):
            self.counter += 1
            names.append(f"v{self.counter}")
        self.nodes.append(helper.make_node(op_type, inputs, names, name=names[0], **attrs))
        bind = names[0] if outputs == 1 else "(" + ", ".join(names) + ")"
        self.lines.append(f"let {bind} = {expr};")
        return [V(n, n, shape) for n in names]

    def _one(self, op_type: str, inputs: list[str], expr: str, shape: tuple[int, ...],
             **attrs) -> V:
        return self._emit(op_type, inputs, expr, shape, **attrs)[0]

    @staticmethod
    def _pads(pad: int | tuple[int, int, int, int]) -> tuple[list[int], str]:
        """ONNX `pads` (begins, then ends) and the DSL's `pad = ...` for one padding."""
        if isinstance(pad, int):
            return [pad] * 4, f"{pad}"
        top, left, bottom, right = pad
        return [top, left, bottom, right], f"({top}, {left}, {bottom}, {right})"

    @staticmethod
    def _out(size: int, k: int, stride: int, begin: int, end: int) -> int:
        return (size + begin + end - k) // stride + 1

    # -- operations ---------------------------------------------------------------------

    def conv(self, x: V, name: str, cout: int, k: int, stride: int = 1, pad: int = 0,
             groups: int = 1, bias: bool = True) -> V:
        cin, h, w = x.shape
        fan_in = cin // groups * k * k
        # He initialisation keeps the activations' scale roughly constant through the ReLUs,
        # so the logits are neither tiny nor huge and a relative check means something.
        wname = self._param(f"{name}.weight",
                            self.rng.normal(0.0, np.sqrt(2.0 / fan_in),
                                            (cout, cin // groups, k, k)))
        inputs = [x.onnx, wname]
        if bias:
            inputs.append(self._param(f"{name}.bias", self.rng.normal(0.0, 0.01, (cout,))))
        pads, dsl_pad = self._pads(pad)
        args = [f'"{name}": weights<{cin} -> {k}x{k}xf32 -> {cout}>']
        if stride != 1:
            args.append(f"stride = {stride}")
        if pads != [0, 0, 0, 0]:
            args.append(f"pad = {dsl_pad}")
        if groups != 1:
            args.append(f"groups = {groups}")
        if not bias:
            args.append("bias = false")
        shape = (cout, self._out(h, k, stride, pads[0], pads[2]),
                 self._out(w, k, stride, pads[1], pads[3]))
        return self._one("Conv", inputs, f"conv2d({x.dsl}, {', '.join(args)})", shape,
                         kernel_shape=[k, k], strides=[stride, stride], pads=pads,
                         group=groups)

    def bn(self, x: V, name: str) -> V:
        c = x.shape[0]
        names = [
            self._param(f"{name}.weight", self.rng.uniform(0.5, 1.0, (c,))),
            self._param(f"{name}.bias", self.rng.normal(0.0, 0.1, (c,))),
            self._param(f"{name}.running_mean", self.rng.normal(0.0, 0.1, (c,))),
            self._param(f"{name}.running_var", self.rng.uniform(0.5, 1.5, (c,))),
        ]
        return self._one("BatchNormalization", [x.onnx] + names,
                         f'batch_norm({x.dsl}, "{name}": norm<{c}xf32>)', x.shape,
                         epsilon=BN_EPS)

    def relu(self, x: V) -> V:
        return self._one("Relu", [x.onnx], f"relu({x.dsl})", x.shape)

    def relu6(self, x: V) -> V:
        lo = self._const(np.array(0.0, dtype=np.float32))
        hi = self._const(np.array(6.0, dtype=np.float32))
        return self._one("Clip", [x.onnx, lo, hi], f"relu6({x.dsl})", x.shape)

    def conv_bn(self, x: V, conv: str, bn: str, cout: int, k: int, stride: int = 1,
                pad: int = 0, groups: int = 1, act: str | None = "relu") -> V:
        """Conv without bias, batch norm, then `act` (`relu`, `relu6` or None)."""
        h = self.bn(self.conv(x, conv, cout, k, stride, pad, groups, bias=False), bn)
        return h if act is None else getattr(self, act)(h)

    def _pool(self, op: str, dsl: str, x: V, k: int, stride: int, pad: int,
              ceil: bool) -> V:
        c, h, w = x.shape
        pads = [pad] * 4
        attrs = {}
        if ceil:
            # ceil_mode as an explicit end padding for the DSL: as many extra rows as the
            # ceiling adds windows (each starting inside the input, as ONNX requires).
            attrs["ceil_mode"] = 1
            for i, size in ((2, h), (3, w)):
                windows = -(-(size + 2 * pad - k) // stride) + 1
                pads[i] += max(0, (windows - 1) * stride + k - size - 2 * pad)
        args = [f"{k}x{k}", f"stride = {stride}"]
        if pads != [0, 0, 0, 0]:
            args.append(f"pad = ({pads[0]}, {pads[1]}, {pads[2]}, {pads[3]})")
        shape = (c, self._out(h, k, stride, pads[0], pads[2]),
                 self._out(w, k, stride, pads[1], pads[3]))
        onnx_pads = [pad] * 4 if ceil else pads
        return self._one(op, [x.onnx], f"{dsl}({x.dsl}, {', '.join(args)})", shape,
                         kernel_shape=[k, k], strides=[stride, stride], pads=onnx_pads,
                         **attrs)

    def max_pool(self, x: V, k: int, stride: int, pad: int = 0, ceil: bool = False) -> V:
        return self._pool("MaxPool", "max_pool", x, k, stride, pad, ceil)

    def avg_pool(self, x: V, k: int, stride: int, pad: int = 0) -> V:
        # Both ONNX (count_include_pad = 0) and kiln divide by the window's valid elements.
        return self._pool("AveragePool", "avg_pool", x, k, stride, pad, False)

    def gap(self, x: V) -> V:
        return self._one("GlobalAveragePool", [x.onnx], f"global_avg_pool({x.dsl})",
                         (x.shape[0], 1, 1))

    def flatten(self, x: V) -> V:
        return self._one("Flatten", [x.onnx], f"flatten({x.dsl})",
                         (int(np.prod(x.shape)),), axis=1)

    def dense(self, x: V, name: str, out: int) -> V:
        (n,) = x.shape
        self._param(f"{name}.weight", self.rng.normal(0.0, np.sqrt(2.0 / n), (out, n)))
        self._param(f"{name}.bias", self.rng.normal(0.0, 0.01, (out,)))
        return self._one("Gemm", [x.onnx, f"{name}.weight", f"{name}.bias"],
                         f'dense({x.dsl}, "{name}": weights<{n} -> {out}>)', (out,), transB=1)

    def add(self, a: V, b: V) -> V:
        assert a.shape == b.shape
        return self._one("Add", [a.onnx, b.onnx], f"add({a.dsl}, {b.dsl})", a.shape)

    def concat(self, *xs: V) -> V:
        c = sum(x.shape[0] for x in xs)
        assert all(x.shape[1:] == xs[0].shape[1:] for x in xs)
        return self._one("Concat", [x.onnx for x in xs],
                         f"concat({', '.join(x.dsl for x in xs)})", (c,) + xs[0].shape[1:],
                         axis=1)

    def split_half(self, x: V) -> tuple[V, V]:
        c, h, w = x.shape
        sizes = self._const(np.array([c // 2, c // 2], dtype=np.int64))
        a, b = self._emit("Split", [x.onnx, sizes],
                          f"split({x.dsl}, axis = 1, sizes = [{c // 2}, {c // 2}])",
                          (c // 2, h, w), outputs=2, axis=1)
        return a, b

    def shuffle(self, x: V, groups: int) -> V:
        """ShuffleNet's channel shuffle: reshape to [1, g, C/g, H, W], swap the two channel
        axes, reshape back. The last reshape names the feature-map type: kiln's `concat` does
        not accept a `tensor<f32[1,C,H,W]>` next to an `fm` although the two are the same
        type (reported to the lead), and the split halves of a shuffled value meet conv
        outputs (`fm`s) in the next unit's concat."""
        c, h, w = x.shape
        split = self._const(np.array([1, groups, c // groups, h, w], dtype=np.int64))
        back = self._const(np.array([1, c, h, w], dtype=np.int64))
        self.counter += 1
        a, b = f"v{self.counter}a", f"v{self.counter}b"
        self.nodes.append(helper.make_node("Reshape", [x.onnx, split], [a], name=a))
        self.nodes.append(helper.make_node("Transpose", [a], [b], name=b, perm=[0, 2, 1, 3, 4]))
        expr = (f"reshape(transpose(reshape({x.dsl}, [1, {groups}, {c // groups}, {h}, {w}]), "
                f"[0, 2, 1, 3, 4]), {self._dsl_type(x.shape)})")
        return self._one("Reshape", [b, back], expr, x.shape)

    # -- output -------------------------------------------------------------------------

    @staticmethod
    def _dsl_type(shape: tuple[int, ...]) -> str:
        if len(shape) == 1:
            return f"vec<{shape[0]}xf32>"
        c, h, w = shape
        return f"fm<{c}xf32[{h},{w}]>"

    def onnx_model(self, y: V) -> onnx.ModelProto:
        nodes = self.nodes + [helper.make_node("Identity", [y.onnx], ["y"], name="output")]
        inits = {**self.params, **self.consts}
        graph = helper.make_graph(
            nodes, self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *self.input.shape])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, *y.shape])],
            initializer=[numpy_helper.from_array(v, name=k) for k, v in inits.items()],
        )
        model = helper.make_model(graph, producer_name="kiln/scripts/bench_e2e.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model

    def dsl(self, y: V) -> str:
        """The network as a `macro_rules!` named after the model whose arguments are spliced
        in before the first `let`: `name!();` gives the run-time-weights type (loaded with
        `from_safetensors`), `name!(weights "file";)` the embedded one (`new()`)."""
        body = "\n".join(" " * 16 + line for line in self.lines + [y.dsl])
        doc = "\n".join(" " * 12 + "/// " + line for line in self.doc.strip().splitlines())
        return (
            "// @generated by `python3 scripts/bench_e2e.py --emit` from the description in\n"
            "// scripts/bench_models.py, which also builds the ONNX graph onnxruntime runs; do\n"
            "// not edit. Included by examples/bench_e2e (no `//!`: `include!` takes items only).\n"
            f"macro_rules! {self.name} {{\n"
            "    ($($weights:tt)*) => {\n"
            "        kiln::network! {\n"
            f"{doc}\n"
            f"            pub net {self.type_name}(x: {self._dsl_type(self.input.shape)})"
            f" -> {self._dsl_type(y.shape)} {{\n"
            "                $($weights)*\n"
            f"{body}\n"
            "            }\n"
            "        }\n"
            "    };\n"
            "}\n"
        )


# ------------------------------------------------------------------------------------------
# The models
# ------------------------------------------------------------------------------------------


def resnet_stem(n: Net) -> V:
    h = n.conv_bn(n.input, "conv1", "bn1", 64, 7, 2, 3)
    return n.max_pool(h, 3, 2, 1)


def resnet18() -> tuple[Net, V]:
    n = Net("resnet18", "ResNet18", """
torchvision's ResNet-18 at 224x224: 7x7/2 stem, 3x3/2 max pool, four stages of two basic
blocks (the first block of stages 2-4 halves the size, with a 1x1/2 shortcut), global
average pool and a 1000-way classifier.""", seed=18)
    h = resnet_stem(n)
    cin = 64
    for stage, cout in enumerate([64, 128, 256, 512], start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            p = f"layer{stage}.{block}"
            a = n.conv_bn(h, f"{p}.conv1", f"{p}.bn1", cout, 3, stride, 1)
            a = n.conv_bn(a, f"{p}.conv2", f"{p}.bn2", cout, 3, 1, 1, act=None)
            if stride != 1 or cin != cout:
                h = n.conv_bn(h, f"{p}.downsample.0", f"{p}.downsample.1", cout, 1, stride,
                              act=None)
            h = n.relu(n.add(a, h))
            cin = cout
    return n, n.dense(n.flatten(n.gap(h)), "fc", 1000)


def resnet50() -> tuple[Net, V]:
    n = Net("resnet50", "ResNet50", """
torchvision's ResNet-50 (v1.5: the stride on the 3x3) at 224x224: 7x7/2 stem, 3x3/2 max
pool, bottleneck blocks 3-4-6-3 (1x1, 3x3, 1x1 with 4x expansion; a 1x1 projection
shortcut on each stage's first block), global average pool, 1000-way classifier.""", seed=50)
    h = resnet_stem(n)
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            p = f"layer{stage}.{block}"
            a = n.conv_bn(h, f"{p}.conv1", f"{p}.bn1", width, 1)
            a = n.conv_bn(a, f"{p}.conv2", f"{p}.bn2", width, 3, stride, 1)
            a = n.conv_bn(a, f"{p}.conv3", f"{p}.bn3", width * 4, 1, act=None)
            if block == 0:
                h = n.conv_bn(h, f"{p}.downsample.0", f"{p}.downsample.1", width * 4, 1,
                              stride, act=None)
            h = n.relu(n.add(a, h))
            cin = width * 4
    assert cin == 2048
    return n, n.dense(n.flatten(n.gap(h)), "fc", 1000)


def squeezenet() -> tuple[Net, V]:
    n = Net("squeezenet", "SqueezeNet", """
SqueezeNet 1.0 (torchvision's squeezenet1_0) at 224x224: 7x7/2 conv, fire modules
(1x1 squeeze, then 1x1 and 3x3 expands concatenated) between three 3x3/2 max pools in
ceil mode, a 1x1 conv to 1000 classes and global average pooling.""", seed=10)
    h = n.relu(n.conv(n.input, "features.0", 96, 7, 2))

    def fire(h: V, i: int, squeeze: int, expand: int) -> V:
        s = n.relu(n.conv(h, f"features.{i}.squeeze", squeeze, 1))
        a = n.relu(n.conv(s, f"features.{i}.expand1x1", expand, 1))
        b = n.relu(n.conv(s, f"features.{i}.expand3x3", expand, 3, pad=1))
        return n.concat(a, b)

    h = n.max_pool(h, 3, 2, ceil=True)
    h = fire(h, 3, 16, 64)
    h = fire(h, 4, 16, 64)
    h = fire(h, 5, 32, 128)
    h = n.max_pool(h, 3, 2, ceil=True)
    h = fire(h, 7, 32, 128)
    h = fire(h, 8, 48, 192)
    h = fire(h, 9, 48, 192)
    h = fire(h, 10, 64, 256)
    h = n.max_pool(h, 3, 2, ceil=True)
    h = fire(h, 12, 64, 256)
    h = n.relu(n.conv(h, "classifier.1", 1000, 1))
    return n, n.flatten(n.gap(h))


def densenet121() -> tuple[Net, V]:
    n = Net("densenet121", "DenseNet121", """
torchvision's DenseNet-121 at 224x224: 7x7/2 stem with batch norm, 3x3/2 max pool, dense
blocks of 6-12-24-16 layers (batch norm, relu, 1x1 conv to 128, batch norm, relu, 3x3 conv
to 32, concatenated to the block's input), transitions (batch norm, relu, 1x1 conv halving
the channels, 2x2/2 average pool), a final batch norm and relu, global average pool and a
1000-way classifier.""", seed=121)
    h = n.conv_bn(n.input, "features.conv0", "features.norm0", 64, 7, 2, 3)
    h = n.max_pool(h, 3, 2, 1)
    for b, layers in enumerate([6, 12, 24, 16], start=1):
        for i in range(1, layers + 1):
            p = f"features.denseblock{b}.denselayer{i}"
            y = n.relu(n.bn(h, f"{p}.norm1"))
            y = n.conv_bn(y, f"{p}.conv1", f"{p}.norm2", 128, 1)
            y = n.conv(y, f"{p}.conv2", 32, 3, pad=1, bias=False)
            h = n.concat(h, y)
        if b < 4:
            p = f"features.transition{b}"
            y = n.relu(n.bn(h, f"{p}.norm"))
            y = n.conv(y, f"{p}.conv", h.shape[0] // 2, 1, bias=False)
            h = n.avg_pool(y, 2, 2)
    h = n.relu(n.bn(h, "features.norm5"))
    return n, n.dense(n.flatten(n.gap(h)), "classifier", 1000)


def inception_v2() -> tuple[Net, V]:
    n = Net("inception_v2", "InceptionV2", """
BN-Inception (Ioffe & Szegedy 2015, Table 1; the ONNX model zoo's Inception-v2) at 224x224:
7x7/2 conv, max pool, 1x1 and 3x3 convs, max pool, ten inception modules (1x1, 3x3 and
double-3x3 branches and a pooling branch, concatenated; 3c and 4e halve the size) and a 7x7
average pool into a 1000-way classifier. Every conv is followed by batch norm and relu; the
max pools use ceil mode.""", seed=2)

    def cbr(h: V, name: str, cout: int, k: int, stride: int = 1) -> V:
        return n.conv_bn(h, f"{name}.conv", f"{name}.bn", cout, k, stride, k // 2)

    h = cbr(n.input, "conv1_7x7_s2", 64, 7, 2)
    h = n.max_pool(h, 3, 2, ceil=True)
    h = cbr(h, "conv2_3x3_reduce", 64, 1)
    h = cbr(h, "conv2_3x3", 192, 3)
    h = n.max_pool(h, 3, 2, ceil=True)

    # name, 1x1, 3x3 reduce, 3x3, double reduce, double 3x3, pool ("avg"/"max"), pool proj,
    # stride (2: the 3x3 branches halve the size and the pool branch passes through).
    modules = [
        ("3a", 64, 64, 64, 64, 96, "avg", 32, 1),
        ("3b", 64, 64, 96, 64, 96, "avg", 64, 1),
        ("3c", 0, 128, 160, 64, 96, "max", 0, 2),
        ("4a", 224, 64, 96, 96, 128, "avg", 128, 1),
        ("4b", 192, 96, 128, 96, 128, "avg", 128, 1),
        ("4c", 160, 128, 160, 128, 160, "avg", 128, 1),
        ("4d", 96, 128, 192, 160, 192, "avg", 128, 1),
        ("4e", 0, 128, 192, 192, 256, "max", 0, 2),
        ("5a", 352, 192, 320, 160, 224, "avg", 128, 1),
        ("5b", 352, 192, 320, 192, 224, "max", 128, 1),
    ]
    for name, c1, r3, c3, rd, cd, pool, proj, stride in modules:
        p = f"inception_{name}"
        branches = []
        if c1:
            branches.append(cbr(h, f"{p}.1x1", c1, 1))
        b = cbr(h, f"{p}.3x3_reduce", r3, 1)
        branches.append(cbr(b, f"{p}.3x3", c3, 3, stride))
        b = cbr(h, f"{p}.double_3x3_reduce", rd, 1)
        b = cbr(b, f"{p}.double_3x3_1", cd, 3)
        branches.append(cbr(b, f"{p}.double_3x3_2", cd, 3, stride))
        if stride == 2:
            branches.append(n.max_pool(h, 3, 2, ceil=True))
        else:
            b = n.avg_pool(h, 3, 1, 1) if pool == "avg" else n.max_pool(h, 3, 1, 1)
            branches.append(cbr(b, f"{p}.pool_proj", proj, 1))
        h = n.concat(*branches)
    assert h.shape == (1024, 7, 7), h.shape
    return n, n.dense(n.flatten(n.gap(h)), "fc", 1000)


def vgg19() -> tuple[Net, V]:
    n = Net("vgg19", "Vgg19", """
torchvision's VGG-19 (no batch norm) at 224x224: sixteen 3x3 convs with relu in five
stages separated by 2x2/2 max pools, then three dense layers (25088 -> 4096 -> 4096 ->
1000) with relu between them.""", seed=19)
    h = n.input
    i = 0
    for stage in [[64, 64], [128, 128], [256] * 4, [512] * 4, [512] * 4]:
        for cout in stage:
            h = n.relu(n.conv(h, f"features.{i}", cout, 3, pad=1))
            i += 2
        h = n.max_pool(h, 2, 2)
        i += 1
    h = n.relu(n.dense(n.flatten(h), "classifier.0", 4096))
    h = n.relu(n.dense(h, "classifier.3", 4096))
    return n, n.dense(h, "classifier.6", 1000)


def mobilenet_v2() -> tuple[Net, V]:
    n = Net("mobilenet_v2", "MobileNetV2", """
torchvision's MobileNet-v2 (width 1.0) at 224x224: 3x3/2 stem, 17 inverted residual blocks
(1x1 expansion, 3x3 depthwise, 1x1 linear projection, with batch norm and relu6; a residual
add where the shape is kept), a 1x1 conv to 1280, global average pool and a 1000-way
classifier.""", seed=2)
    h = n.conv_bn(n.input, "features.0.0", "features.0.1", 32, 3, 2, 1, act="relu6")
    i = 1
    cin = 32
    for t, c, reps, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for r in range(reps):
            stride = s if r == 0 else 1
            p = f"features.{i}.conv"
            hidden = cin * t
            y = h
            j = 0
            if t != 1:
                y = n.conv_bn(y, f"{p}.0.0", f"{p}.0.1", hidden, 1, act="relu6")
                j = 1
            y = n.conv_bn(y, f"{p}.{j}.0", f"{p}.{j}.1", hidden, 3, stride, 1, groups=hidden,
                          act="relu6")
            y = n.conv_bn(y, f"{p}.{j + 1}", f"{p}.{j + 2}", c, 1, act=None)
            h = n.add(h, y) if stride == 1 and cin == c else y
            cin = c
            i += 1
    h = n.conv_bn(h, f"features.{i}.0", f"features.{i}.1", 1280, 1, act="relu6")
    return n, n.dense(n.flatten(n.gap(h)), "classifier.1", 1000)


def shufflenet_v2() -> tuple[Net, V]:
    n = Net("shufflenet_v2", "ShuffleNetV2", """
torchvision's ShuffleNet-v2 1.0x at 224x224: 3x3/2 conv, 3x3/2 max pool, stages of 4-8-4
units (116, 232, 464 channels; the first unit of a stage halves the size with two
branches, the others split the channels and transform one half: 1x1, 3x3 depthwise, 1x1),
each ending in a channel shuffle (reshape, transpose, reshape), a 1x1 conv to 1024, global
average pool and a 1000-way classifier.""", seed=3)
    h = n.conv_bn(n.input, "conv1.0", "conv1.1", 24, 3, 2, 1)
    h = n.max_pool(h, 3, 2, 1)
    for stage, (cout, units) in enumerate([(116, 4), (232, 8), (464, 4)], start=2):
        half = cout // 2
        for u in range(units):
            p = f"stage{stage}.{u}"
            if u == 0:
                cin = h.shape[0]
                a = n.conv_bn(h, f"{p}.branch1.0", f"{p}.branch1.1", cin, 3, 2, 1,
                              groups=cin, act=None)
                a = n.conv_bn(a, f"{p}.branch1.2", f"{p}.branch1.3", half, 1)
                b = h
                stride = 2
            else:
                a, b = n.split_half(h)
                stride = 1
            b = n.conv_bn(b, f"{p}.branch2.0", f"{p}.branch2.1", half, 1)
            b = n.conv_bn(b, f"{p}.branch2.3", f"{p}.branch2.4", half, 3, stride, 1,
                          groups=half, act=None)
            b = n.conv_bn(b, f"{p}.branch2.5", f"{p}.branch2.6", half, 1)
            h = n.shuffle(n.concat(a, b), 2)
    h = n.conv_bn(h, "conv5.0", "conv5.1", 1024, 1)
    return n, n.dense(n.flatten(n.gap(h)), "fc", 1000)


# Every generated model, in the order the benchmark runs them.
MODELS = {
    "resnet18": resnet18,
    "squeezenet": squeezenet,
    "resnet50": resnet50,
    "densenet121": densenet121,
    "inception_v2": inception_v2,
    "vgg19": vgg19,
    "mobilenet_v2": mobilenet_v2,
    "shufflenet_v2": shufflenet_v2,
}
