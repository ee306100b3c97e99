"""End-to-end benchmark: kiln against onnxruntime, single-threaded, on the same networks.

kiln's kernel benchmark (`cargo bench -p kiln-kernels --features std --bench kernels`)
measures kernels in isolation; this one measures what a user gets: a whole network
compiled by `kiln::network!` against the same network in onnxruntime. Two networks:

* `resnet18`: torchvision's ResNet-18 (7x7/2 stem, max pool, 4 stages of 2 basic blocks,
  global average pool, 1000-way classifier) at batch 1, 3x224x224, random weights;
* `digits`: the digits example's trained CNN (`tests/data/digits.onnx`), batch 1.

For each network NAME the script writes into `target/bench_e2e/NAME/` (build output, never
committed):

* `model.onnx`            the graph onnxruntime runs (resnet18 only; digits uses the checked-in
                          `tests/data/digits.onnx`);
* `weights.safetensors`   the weights under PyTorch `state_dict` names, which kiln loads at run
                          time with `Net::from_safetensors`;
* `io.safetensors`        `x` (the input), `y` (onnxruntime's output) and `ort_ms`.

then runs `cargo run --release --example bench_e2e -- target/bench_e2e`. That example defines
the same networks in the kiln DSL (examples/bench_e2e/main.rs), checks kiln's output against
`y` (max |difference| <= 1e-3 * max |y|), times kiln and prints, per network:

    BENCH e2e/NAME kiln_ms=<x> ort_ms=<y> kiln_over_ort=<x/y>

onnxruntime runs the fair way: one intra-op and one inter-op thread, sequential execution,
every graph optimisation on (it folds batch norms into convolutions and fuses activations, as
kiln does). Its time is measured twice: around `run_with_iobinding` from Python (inputs and
outputs bound once, so no per-call allocation), and inside the engine (the `model_run` events
of onnxruntime's own profiler, which exclude Python). `ort_ms` is the smaller median of the
two, so neither the binding overhead nor the profiler's cost ever flatters kiln.

Every time is the median of many runs after a warm-up: the machine is shared and noisy.

Usage (from anywhere; paths are repo-relative; `pip install -r scripts/requirements.txt`):

    python3 scripts/bench_e2e.py               # build, time onnxruntime, run the kiln example
    python3 scripts/bench_e2e.py --no-cargo    # only write target/bench_e2e/ and time onnxruntime
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "target" / "bench_e2e"

OPSET = 17
IR_VERSION = 8
BN_EPS = 1e-5

# Timing budget per measurement: warm up for this long, then take samples for about this
# long, each sample at least MIN_SAMPLE_S (several calls for fast networks, so the timer's
# resolution does not matter), between MIN_SAMPLES and MAX_SAMPLES of them.
WARMUP_S = 0.3
TARGET_S = 2.0
MIN_SAMPLE_S = 1e-3
MIN_SAMPLES = 11
MAX_SAMPLES = 201


# --------------------------------------------------------------------------------------
# ResNet-18 with random weights
# --------------------------------------------------------------------------------------


class ResNet18:
    """Builds torchvision's ResNet-18 as an ONNX graph, drawing each parameter as its layer
    is added, named as in torchvision's `state_dict` (the names the kiln DSL reads)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.counter = 0

    def _put(self, name: str, value: np.ndarray) -> str:
        assert name not in self.params, f"duplicate tensor name {name}"
        self.params[name] = np.ascontiguousarray(value, dtype=np.float32)
        return name

    def _op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self.counter += 1
        out = f"{op_type.lower()}_{self.counter}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, conv: str, bn: str, cin: int, cout: int, k: int, stride: int,
                relu: bool) -> str:
        # He initialisation keeps the activations' scale roughly constant through the ReLUs,
        # so the 1000 logits are neither tiny nor huge and a relative check means something.
        w = self._put(f"{conv}.weight",
                      self.rng.normal(0.0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)))
        p = k // 2
        h = self._op("Conv", [x, w], kernel_shape=[k, k], pads=[p, p, p, p],
                     strides=[stride, stride])
        self._put(f"{bn}.weight", self.rng.uniform(0.5, 1.0, (cout,)))
        self._put(f"{bn}.bias", self.rng.normal(0.0, 0.1, (cout,)))
        self._put(f"{bn}.running_mean", self.rng.normal(0.0, 0.1, (cout,)))
        self._put(f"{bn}.running_var", self.rng.uniform(0.5, 1.5, (cout,)))
        h = self._op("BatchNormalization",
                     [h, f"{bn}.weight", f"{bn}.bias", f"{bn}.running_mean",
                      f"{bn}.running_var"], epsilon=BN_EPS)
        return self._op("Relu", [h]) if relu else h

    def basic_block(self, x: str, name: str, cin: int, cout: int, stride: int) -> str:
        a = self.conv_bn(x, f"{name}.conv1", f"{name}.bn1", cin, cout, 3, stride, True)
        a = self.conv_bn(a, f"{name}.conv2", f"{name}.bn2", cout, cout, 3, 1, False)
        if stride != 1 or cin != cout:
            x = self.conv_bn(x, f"{name}.downsample.0", f"{name}.downsample.1", cin, cout, 1,
                             stride, False)
        return self._op("Relu", [self._op("Add", [a, x])])

    def build(self) -> tuple[onnx.ModelProto, np.ndarray]:
        h = self.conv_bn("x", "conv1", "bn1", 3, 64, 7, 2, True)
        h = self._op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        cin = 64
        for stage, cout in enumerate([64, 128, 256, 512], start=1):
            for block in range(2):
                stride = 2 if stage > 1 and block == 0 else 1
                h = self.basic_block(h, f"layer{stage}.{block}", cin, cout, stride)
                cin = cout
        h = self._op("Flatten", [self._op("GlobalAveragePool", [h])])
        self._put("fc.weight", self.rng.normal(0.0, 1.0 / np.sqrt(512), (1000, 512)))
        self._put("fc.bias", self.rng.normal(0.0, 0.1, (1000,)))
        h = self._op("Gemm", [h, "fc.weight", "fc.bias"], transB=1)
        self.nodes.append(helper.make_node("Identity", [h], ["y"], name="output"))
        graph = helper.make_graph(
            self.nodes, "resnet18",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
            initializer=[numpy_helper.from_array(v, name=k) for k, v in self.params.items()],
        )
        model = helper.make_model(graph, producer_name="kiln/scripts/bench_e2e.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        x = self.rng.normal(0.0, 1.0, (1, 3, 224, 224)).astype(np.float32)
        return model, x


# --------------------------------------------------------------------------------------
# onnxruntime, single-threaded, timed
# --------------------------------------------------------------------------------------


def session(model_path: Path, profile_prefix: Path | None = None) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_prefix)
    return ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])


def bound(sess: ort.InferenceSession, x: np.ndarray) -> tuple[ort.IOBinding, np.ndarray]:
    """Binds `x` and a preallocated output once, so a timed call does no allocation."""
    out = sess.get_outputs()[0]
    y = np.empty([x.shape[0]] + [int(d) for d in out.shape[1:]], dtype=np.float32)
    io = sess.io_binding()
    io.bind_cpu_input(sess.get_inputs()[0].name, x)
    io.bind_output(name=out.name, device_type="cpu", device_id=0, element_type=np.float32,
                   shape=list(y.shape), buffer_ptr=y.ctypes.data)
    return io, y


def median_seconds(call) -> tuple[float, int]:
    """Median seconds per call of `call`, and how many calls the measurement made."""
    start = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() - start < WARMUP_S:
        call()
        calls += 1
    per_call = (time.perf_counter() - start) / calls
    reps = max(1, int(np.ceil(MIN_SAMPLE_S / per_call)))
    samples = int(min(MAX_SAMPLES, max(MIN_SAMPLES, TARGET_S / (per_call * reps)))) | 1
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        for _ in range(reps):
            call()
        times.append((time.perf_counter() - t) / reps)
    return statistics.median(times), samples * reps


def time_ort(model_path: Path, x: np.ndarray, work: Path) -> tuple[np.ndarray, float, float]:
    """Runs the model on `x`; returns the output and the median milliseconds per run
    measured from Python and inside the engine."""
    sess = session(model_path)
    io, y = bound(sess, x)
    python_s, _ = median_seconds(lambda: sess.run_with_iobinding(io))
    # The reference output, from a plain run (not the bound buffer, reused by the timing).
    y_ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    assert np.array_equal(y, y_ref), "bound and plain runs disagree"

    prof = session(model_path, work / "ort_profile")
    io, _ = bound(prof, x)
    _, calls = median_seconds(lambda: prof.run_with_iobinding(io))
    path = Path(prof.end_profiling())
    events = json.loads(path.read_text())
    path.unlink()
    runs = [e["dur"] for e in events if e.get("name") == "model_run"]
    # The last `calls` runs are the measured ones (the earlier ones warmed up).
    inside_ms = statistics.median(runs[-calls:]) / 1e3
    return y_ref, python_s * 1e3, inside_ms


def write_io(dir_: Path, x: np.ndarray, y: np.ndarray, ort_ms: float) -> None:
    save_file({"x": np.ascontiguousarray(x), "y": np.ascontiguousarray(y),
               "ort_ms": np.array([ort_ms], dtype=np.float64)}, str(dir_ / "io.safetensors"))


def prepare(name: str, model_path: Path, x: np.ndarray, dir_: Path) -> None:
    y, python_ms, inside_ms = time_ort(model_path, x, dir_)
    ort_ms = min(python_ms, inside_ms)
    print(f"ORT {name} python_ms={python_ms:.4g} inside_ms={inside_ms:.4g} "
          f"ort_ms={ort_ms:.4g} (1 thread, ORT_ENABLE_ALL, onnxruntime {ort.__version__})",
          flush=True)
    write_io(dir_, x, y, ort_ms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-cargo", action="store_true",
                        help="only write target/bench_e2e/ and time onnxruntime")
    args = parser.parse_args()

    # ResNet-18, random weights.
    dir_ = OUT_DIR / "resnet18"
    dir_.mkdir(parents=True, exist_ok=True)
    model, x = ResNet18(seed=18).build()
    onnx.save(model, str(dir_ / "model.onnx"))
    weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    save_file(weights, str(dir_ / "weights.safetensors"))
    prepare("resnet18", dir_ / "model.onnx", x, dir_)

    # The digits example's trained network and weights, on one held-out-like image.
    dir_ = OUT_DIR / "digits"
    dir_.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "examples" / "digits" / "data" / "digits.safetensors",
                    dir_ / "weights.safetensors")
    x = load_file(str(ROOT / "tests" / "data" / "digits_io.safetensors"))["x"][:1]
    x = np.ascontiguousarray(x.reshape(1, 1, 8, 8), dtype=np.float32)
    prepare("digits", ROOT / "tests" / "data" / "digits.onnx", x, dir_)

    if args.no_cargo:
        return 0
    cmd = ["cargo", "run", "--release", "--example", "bench_e2e", "--", str(OUT_DIR)]
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=os.environ.copy()).returncode


if __name__ == "__main__":
    sys.exit(main())
