"""End-to-end benchmark: kiln against onnxruntime on the same networks, 1 and 2 threads.

kiln's kernel benchmark (`cargo bench -p kiln-kernels --features std --bench kernels`)
measures kernels in isolation; this one measures what a user gets: whole networks compiled by
`kiln::network!` against the same networks in onnxruntime.

The networks (scripts/bench_models.py describes each once and emits it both as ONNX and as the
kiln DSL; batch 1, 3x224x224, seeded random weights): ResNet-18, SqueezeNet 1.0, ResNet-50,
DenseNet-121, Inception-v2 (BN-Inception), VGG-19, MobileNet-v2, ShuffleNet-v2; plus the
digits example's trained CNN (`tests/data/digits.onnx`, its DSL written by hand in the example).
The DSL of each generated network is checked in as `examples/bench_e2e/models/NAME.rs`, so
`cargo build` never needs Python; `--emit` rewrites those files, and every run first checks
that they still match the descriptions.

For each network NAME the script writes into `target/bench_e2e/NAME/` (never committed):
`model.onnx`, `weights.safetensors` (PyTorch `state_dict` names, which kiln loads at run time
with `from_safetensors`) and `io.safetensors` (`x`, the input, and `y`, onnxruntime's output).

Timing. The kiln example (`examples/bench_e2e`) runs as a server: the script sends it `load
NAME` (it loads the weights, runs once and checks its output against `y`: max |difference| at
most 1e-3 of the largest |y|) and then `time N` (N runs, answered with their wall and thread
CPU time). onnxruntime runs in this process with every graph optimisation, sequential
execution, inputs and outputs bound once (`run_with_iobinding`, so no per-call allocation), with
1 intra-op thread and then 2. The two are sampled alternately, one batch of kiln runs then one
of onnxruntime's, so a disturbance on the shared machine hits both; the figures are medians of
the samples. With several threads each sample is followed by a pause (`SETTLE_S`), so that
the other side's next sample does not share the cores with onnxruntime's workers, which spin
for tens of milliseconds after a run. Per network and thread count it prints

    E2E model=<m> threads=<t> isa=<isa> kiln_ms=<x> ort_ms=<x> kiln_over_ort=<x>
    CPU model=<m> threads=<t> isa=<isa> kiln_cpu_ms=<x> ort_cpu_ms=<x> kiln_over_ort=<x>

(one pair per kiln ISA with `--isa avx512,avx2`: a kiln server per ISA, all in the same
alternation; E2E: wall time per run; CPU: CPU time per run summed over threads: each server's
process CPU time, which includes the worker threads with 2 threads), and per thread
count the geometric means over the seven CNNs of issue 10 (not ResNet-18 and digits):

    E2E geomean threads=<t> kiln_over_ort=<x>
    CPU geomean threads=<t> kiln_over_ort=<x>

At threads=T both run on T threads: onnxruntime with T intra-op threads, kiln with
`set_threads(T)` (the server's `threads T`; its CPU time is its process's, workers included).
onnxruntime's time includes the Python call
(a few microseconds: it matters for digits only).

Cold start and memory (ResNet-50 with *embedded* weights: `weights "..."` and `new()`): the
example `bench_cold` (cargo feature `bench-embedded`, since it embeds the 102 MB file this
script writes) is run in fresh processes, alternately with fresh onnxruntime processes, and
prints construct + first-run time and its peak RSS (VmHWM). The script prints

    E2E model=resnet50 cold_start_ratio=<kiln (new + first run) / ort (session + first run)>
                       rss_ratio=<kiln's peak RSS / (prepared weights + arena bytes)>

Usage (from anywhere; `pip install -r scripts/requirements.txt`):

    python3 scripts/bench_e2e.py                     # every network, 1 and 2 threads, cold start
    python3 scripts/bench_e2e.py --models resnet50,vgg19 --threads 1 --no-cold
    KILN_ISA=avx2 python3 scripts/bench_e2e.py --no-cold   # kiln's kernels capped at AVX2
    python3 scripts/bench_e2e.py --isa avx512,avx2 --threads 1 --no-cold   # both in one run
    python3 scripts/bench_e2e.py --models inception_v2 --profile   # each layer beside onnxruntime's
    python3 scripts/bench_e2e.py --emit              # rewrite examples/bench_e2e/models/*.rs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_models  # noqa: E402  (next to this script)

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "target" / "bench_e2e"
MODELS_DIR = ROOT / "examples" / "bench_e2e" / "models"
KILN_BIN = ROOT / "target" / "release" / "examples" / "bench_e2e"
# The per-layer timing build (`--profile`) has a target directory of its own, so that it never
# replaces the plain build above, which `scripts/ab_e2e.py` users copy to compare builds (a
# profile build copied as the baseline once made a change look 5 % faster than it was).
PROFILE_TARGET = ROOT / "target" / "profile"
PROFILE_BIN = PROFILE_TARGET / "release" / "examples" / "bench_e2e"
COLD_BIN = ROOT / "target" / "release" / "examples" / "bench_cold"

# The seven CNNs of issue 10, whose geometric mean is the headline.
GEOMEAN_MODELS = ["squeezenet", "resnet50", "densenet121", "inception_v2", "vgg19",
                  "mobilenet_v2", "shufflenet_v2"]
ALL_MODELS = ["resnet18", "digits"] + GEOMEAN_MODELS

# Timing budget per (network, thread count): warm each side up for WARMUP_S, then alternate
# samples of at least MIN_SAMPLE_S (several runs for fast networks) until each side has about
# TARGET_S of samples, between MIN_SAMPLES and MAX_SAMPLES of them.
WARMUP_S = 0.3
TARGET_S = 2.0
MIN_SAMPLE_S = 5e-3
MIN_SAMPLES = 7
MAX_SAMPLES = 101
# With several threads, a pause after every sample: onnxruntime's intra-op workers keep
# spinning for tens of milliseconds after a run returns (measured: ~40 ms of CPU in the 50 ms
# after a 2-thread ResNet-50 run), and kiln's for half a millisecond; without the pause the
# next sample of the other side ran with one of the two cores taken by those spinners.
SETTLE_S = 0.1
COLD_REPEATS = 5


# --------------------------------------------------------------------------------------
# Building the data
# --------------------------------------------------------------------------------------


def emit(names: list[str]) -> None:
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    for name in names:
        net, y = bench_models.MODELS[name]()
        (MODELS_DIR / f"{name}.rs").write_text(net.dsl(y))
        print(f"wrote {(MODELS_DIR / f'{name}.rs').relative_to(ROOT)}")


def build(name: str, dir_: Path) -> tuple[Path, np.ndarray]:
    """Writes the network's ONNX graph and weights; returns the ONNX path and the input."""
    dir_.mkdir(parents=True, exist_ok=True)
    if name == "digits":
        shutil.copyfile(ROOT / "examples" / "digits" / "data" / "digits.safetensors",
                        dir_ / "weights.safetensors")
        x = load_file(str(ROOT / "tests" / "data" / "digits_io.safetensors"))["x"][:1]
        return ROOT / "tests" / "data" / "digits.onnx", np.ascontiguousarray(
            x.reshape(1, 1, 8, 8), dtype=np.float32)
    net, y = bench_models.MODELS[name]()
    checked_in = MODELS_DIR / f"{name}.rs"
    if not checked_in.exists() or checked_in.read_text() != net.dsl(y):
        sys.exit(f"{checked_in.relative_to(ROOT)} differs from scripts/bench_models.py: "
                 "run `python3 scripts/bench_e2e.py --emit` and rebuild")
    onnx.save(net.onnx_model(y), str(dir_ / "model.onnx"))
    save_file(net.params, str(dir_ / "weights.safetensors"))
    x = net.rng.normal(0.0, 1.0, (1, *net.input.shape)).astype(np.float32)
    return dir_ / "model.onnx", x


def prepare(name: str) -> Path:
    """`build`, then `io.safetensors` with the input and onnxruntime's (1 thread) output."""
    model_path, x = build(name, OUT_DIR / name)
    sess = session(model_path, 1)
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    save_file({"x": np.ascontiguousarray(x), "y": np.ascontiguousarray(y)},
              str(OUT_DIR / name / "io.safetensors"))
    return model_path


# --------------------------------------------------------------------------------------
# onnxruntime
# --------------------------------------------------------------------------------------


def session(model_path: Path, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
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


def ort_profile(name: str, model_path: Path, runs: int = 30, top: int = 12,
                quiet: bool = False) -> dict[str, float]:
    """onnxruntime's per-node profile (`SessionOptions.enable_profiling`), one thread: prints
    `PROFILE model=<m> op=<type> ms=<x> share=<x>` per operator type and the `top` slowest
    nodes with their input shapes, the per-layer side of a comparison with kiln (whose kernels
    `perf record` on the `bench_e2e` server names; see README "Performance")."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = str(OUT_DIR / name / "ort_profile")
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    x = load_file(str(OUT_DIR / name / "io.safetensors"))["x"]
    for _ in range(runs):
        sess.run(None, {sess.get_inputs()[0].name: x})
    trace = Path(sess.end_profiling())
    by_op: dict[str, float] = {}
    by_node: dict[str, tuple[float, str, object]] = {}
    for e in json.loads(trace.read_text()):
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        op, node = e["args"]["op_name"], e["name"][: -len("_kernel_time")]
        by_op[op] = by_op.get(op, 0.0) + e["dur"] / 1e3 / runs
        prev = by_node.get(node, (0.0, op, None))[0]
        by_node[node] = (prev + e["dur"] / 1e3 / runs, op, e["args"].get("input_type_shape"))
    trace.unlink()
    if quiet:
        return {node: ms for node, (ms, _, _) in by_node.items()}
    total = sum(by_op.values())
    for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f"PROFILE model={name} op={op} ms={fmt(ms)} share={ms / total:.3f}")
    for node, (ms, op, shapes) in sorted(by_node.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"PROFILE model={name} node={node} op={op} ms={fmt(ms)} inputs={shapes}")
    return {node: ms for node, (ms, _, _) in by_node.items()}


def layer_profile(name: str, model_path: Path, runs: int = 100) -> None:
    """kiln's per-layer times (`bench_e2e` built with `--features profile`: `kiln::profile`)
    beside onnxruntime's per-node ones, one thread, matched by the layer's result name (ort's
    fused nodes carry it with a suffix such as `_nchwc`). Prints, biggest loss first,

        LAYER model=<m> node=<name> kiln_ms=<x> ort_ms=<x> diff_ms=<x> <kiln's label>

    (`ort_ms=-` for kiln ops onnxruntime has no node of that name for, e.g. those it fused
    away), then the nodes onnxruntime ran that kiln has no op of that name for, and totals.
    The two sides run one after the other, not alternately: for finding the layers to work
    on, not for the ratio the E2E lines measure."""
    ort_ms: dict[str, float] = {}
    for node, ms in ort_profile(name, model_path, quiet=True).items():
        key = re.sub(r"(_nchwc|_token_\d+)+$", "", node)
        ort_ms[key] = ort_ms.get(key, 0.0) + ms
    kiln = Server([str(PROFILE_BIN), "--serve", str(OUT_DIR)], "ISA")
    kiln.send(f"load {name}")
    kiln.expect("CHECK")
    kiln.send("time 10")
    kiln.expect("TIME")
    kiln.send(f"profile {runs}")
    rows = []
    while True:
        line = kiln.proc.stdout.readline().split(None, 4)
        if line[0] == "PROFILED":
            break
        ms, label = float(line[1].split("=")[1]), line[4].rstrip("\n")
        node = label.split(":")[0]
        rows.append((node, ms, ort_ms.pop(node, None), label))
    kiln.close()
    rows.sort(key=lambda r: -(r[1] - (r[2] or 0.0)))
    for node, ms, o, label in rows:
        o_txt, d = ("-", ms) if o is None else (fmt(o), ms - o)
        print(f"LAYER model={name} node={node} kiln_ms={fmt(ms)} ort_ms={o_txt} "
              f"diff_ms={d:+.4f} {label}")
    for node, o in sorted(ort_ms.items(), key=lambda kv: -kv[1]):
        print(f"LAYER model={name} node={node} kiln_ms=- ort_ms={fmt(o)} diff_ms={-o:+.4f}")
    k_total = sum(r[1] for r in rows)
    o_total = sum(r[2] or 0.0 for r in rows) + sum(ort_ms.values())
    print(f"LAYERS model={name} kiln_ms={fmt(k_total)} ort_ms={fmt(o_total)}", flush=True)


# --------------------------------------------------------------------------------------
# kiln, as a server
# --------------------------------------------------------------------------------------


class Server:
    """A timing server in a process of its own: the kiln example (`--serve`) or this script
    (`--ort-serve`), both answering `time N` with `TIME wall_s=<x> cpu_s=<x>` (see
    examples/bench_e2e/main.rs for the protocol). Both sides being fresh processes that sleep
    between requests keeps the scheduler's treatment of them alike on a shared machine: an
    onnxruntime timed inside this long-running, CPU-heavy driver would wait behind other
    processes more often than a mostly sleeping kiln server."""

    def __init__(self, cmd: list[str], hello: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.hello = self.expect(hello)[0]

    def expect(self, tag: str) -> list[str]:
        """The words after `tag` on the next line that starts with it; other lines are
        passed through."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit(f"{self.proc.args[0]} exited (code {self.proc.wait()})")
            words = line.split()
            if words and words[0] == tag:
                return words[1:]
            print(line, end="", flush=True)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def time(self, reps: int) -> tuple[float, float]:
        """Wall and CPU seconds of `reps` runs."""
        self.send(f"time {reps}")
        fields = dict(w.split("=") for w in self.expect("TIME"))
        return float(fields["wall_s"]), float(fields["cpu_s"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def ort_serve() -> None:
    """The onnxruntime timing server (`--ort-serve`): `load IO MODEL THREADS` binds `x` from
    IO to a session on MODEL with THREADS intra-op threads; `time N` runs it N times and
    reports wall and process CPU time (every onnxruntime thread's)."""
    print(f"ORT {ort.__version__}", flush=True)
    keep = None
    for line in sys.stdin:
        words = line.split()
        if words[0] == "load":
            keep = None
            x = np.ascontiguousarray(load_file(words[1])["x"])
            sess = session(Path(words[2]), int(words[3]))
            io, y = bound(sess, x)
            # The binding points at `x` and `y`: they live as long as it does.
            keep = (sess, io, x, y)
            print("LOADED", flush=True)
        elif words[0] == "time":
            sess, io = keep[0], keep[1]
            w, c = time.perf_counter(), time.process_time()
            for _ in range(int(words[1])):
                sess.run_with_iobinding(io)
            print(f"TIME wall_s={time.perf_counter() - w:e} cpu_s={time.process_time() - c:e}",
                  flush=True)


def per_call(run) -> float:
    """Warms `run` up; returns its wall seconds per call."""
    calls, spent = 0, 0.0
    while calls < 3 or spent < WARMUP_S:
        spent += run(1)[0]
        calls += 1
    return spent / calls


def compare(timers: list, settle: float) -> list[tuple[float, float]]:
    """Alternating samples of every timer (one round: one sample of each, in order, each
    followed by `settle` seconds of rest); per timer, the medians of wall and CPU
    milliseconds per run."""
    calls = [per_call(t) for t in timers]
    time.sleep(settle)
    reps = [max(1, math.ceil(MIN_SAMPLE_S / c)) for c in calls]
    longest = max(c * r for c, r in zip(calls, reps))
    rounds = int(min(MAX_SAMPLES, max(MIN_SAMPLES, TARGET_S / longest))) | 1
    samples: list[list[tuple[float, float]]] = [[] for _ in timers]
    for _ in range(rounds):
        for timer, n, got in zip(timers, reps, samples):
            wall, cpu = timer(n)
            got.append((wall / n, cpu / n))
            time.sleep(settle)
    return [(statistics.median(w for w, _ in got) * 1e3,
             statistics.median(c for _, c in got) * 1e3) for got in samples]


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def fmt(x: float) -> str:
    """Four significant digits."""
    return f"{x:.4g}"


# --------------------------------------------------------------------------------------
# Cold start
# --------------------------------------------------------------------------------------


def peak_rss_bytes() -> int:
    """VmHWM of this process (not `ru_maxrss`, which Linux carries over `execve` from the
    forked parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line")


def ort_cold(model_path: str) -> None:
    """In a fresh process (`--ort-cold`): session creation + first run, and peak RSS."""
    x = load_file(str(Path(model_path).parent / "io.safetensors"))["x"]
    start = time.perf_counter()
    sess = session(Path(model_path), 1)
    sess.run(None, {sess.get_inputs()[0].name: x})
    ms = (time.perf_counter() - start) * 1e3
    rss = peak_rss_bytes()
    print(f"COLD ort_ms={ms:.4g} peak_rss_bytes={rss}")


def cold_fields(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    line = next(line for line in out.splitlines() if line.startswith("COLD "))
    return {k: float(v) for k, v in (w.split("=") for w in line.split()[1:])}


def cold_start() -> None:
    cmd = ["cargo", "build", "--release", "--example", "bench_cold", "--features",
           "bench-embedded"]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    model = str(OUT_DIR / "resnet50" / "model.onnx")
    kiln, onnx_rt = [], []
    for _ in range(COLD_REPEATS):
        kiln.append(cold_fields([str(COLD_BIN), str(OUT_DIR / "resnet50" / "io.safetensors")]))
        onnx_rt.append(cold_fields([sys.executable, __file__, "--ort-cold", model]))

    def med(xs, key):
        return statistics.median(x[key] for x in xs)

    k_ms, o_ms = med(kiln, "kiln_ms"), med(onnx_rt, "ort_ms")
    rss = med(kiln, "peak_rss_bytes")
    base = kiln[0]["weights_bytes"] + kiln[0]["arena_bytes"]
    print(f"COLD model=resnet50 kiln_new_ms={fmt(med(kiln, 'new_ms'))} "
          f"kiln_first_run_ms={fmt(med(kiln, 'first_run_ms'))} kiln_ms={fmt(k_ms)} "
          f"ort_ms={fmt(o_ms)} kiln_peak_rss_mb={rss / 1e6:.1f} "
          f"weights_mb={kiln[0]['weights_bytes'] / 1e6:.1f} "
          f"arena_mb={kiln[0]['arena_bytes'] / 1e6:.1f} "
          f"ort_peak_rss_mb={med(onnx_rt, 'peak_rss_bytes') / 1e6:.1f} "
          f"(medians of {COLD_REPEATS} fresh processes each)")
    print(f"E2E model=resnet50 cold_start_ratio={k_ms / o_ms:.3f} rss_ratio={rss / base:.3f}",
          flush=True)


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(ALL_MODELS),
                        help="comma-separated subset of " + ",".join(ALL_MODELS))
    parser.add_argument("--threads", default="1,2", help="onnxruntime thread counts")
    parser.add_argument("--isa", help="comma-separated KILN_ISA caps, each timed by a kiln "
                        "server of its own in the same alternation (e.g. avx512,avx2); "
                        "default: one server with the environment's KILN_ISA")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-start run")
    parser.add_argument("--ort-profile", action="store_true",
                        help="print onnxruntime's per-operator and slowest-node times (1 "
                        "thread) for each model and stop")
    parser.add_argument("--profile", action="store_true",
                        help="build kiln with per-layer timing and print each layer's time "
                        "beside onnxruntime's (1 thread), biggest loss first, and stop")
    parser.add_argument("--emit", action="store_true",
                        help="rewrite examples/bench_e2e/models/*.rs and stop")
    parser.add_argument("--ort-cold", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--ort-serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ort_serve:
        ort_serve()
        return 0
    if args.ort_cold:
        ort_cold(args.ort_cold)
        return 0
    if args.emit:
        emit(list(bench_models.MODELS))
        return 0
    names = args.models.split(",")
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {ALL_MODELS}")
    threads = [int(t) for t in args.threads.split(",")]
    if args.ort_profile:
        for name in names:
            ort_profile(name, prepare(name))
        return 0

    cmd = ["cargo", "build", "--release", "--example", "bench_e2e"]
    if args.profile:
        cmd += ["--features", "profile", "--target-dir", str(PROFILE_TARGET)]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    if args.profile:
        for name in names:
            layer_profile(name, prepare(name))
        return 0
    # One kiln server per ISA asked for (`KILN_ISA` caps each), or one with the environment's.
    kilns = []
    for cap in args.isa.split(",") if args.isa else [None]:
        env = os.environ.copy() if cap is None else {**os.environ, "KILN_ISA": cap}
        kilns.append(Server([str(KILN_BIN), "--serve", str(OUT_DIR)], "ISA", env))
    isas = [k.hello for k in kilns]
    onnx_rt = Server([sys.executable, __file__, "--ort-serve"], "ORT")
    print(f"# kiln kernels: {', '.join(isas)}; onnxruntime {onnx_rt.hello}, ORT_ENABLE_ALL, "
          "sequential; both on the same number of threads (kiln: set_threads)", flush=True)
    print("# load average before: %.2f %.2f %.2f (the machine is shared; wall times above the "
          "CPU times mean other processes took turns)" % os.getloadavg(), flush=True)
    # Per (ISA, thread count), per network: the wall-time and the CPU-time ratios.
    ratios: dict[tuple[str, int], dict[str, tuple[float, float]]] = {
        (isa, t): {} for isa in isas for t in threads}
    ok = True
    for name in names:
        model_path = prepare(name)
        for kiln in kilns:
            kiln.send(f"load {name}")
            check = kiln.expect("CHECK")
            print(f"CHECK isa={kiln.hello} " + " ".join(check), flush=True)
            ok &= check[-1] == "ok"
        for t in threads:
            for kiln in kilns:
                kiln.send(f"threads {t}")
                # One run on t threads, compared with the first run's output: the same bits.
                check = kiln.expect("CHECK")
                print(f"CHECK isa={kiln.hello} " + " ".join(check), flush=True)
                ok &= check[-1] == "ok"
                kiln.expect("THREADS")
            onnx_rt.send(f"load {OUT_DIR / name / 'io.safetensors'} {model_path} {t}")
            onnx_rt.expect("LOADED")
            *ks, (ort_ms, ort_cpu_ms) = compare([k.time for k in kilns] + [onnx_rt.time],
                                                SETTLE_S if t > 1 else 0.0)
            for isa, (kiln_ms, kiln_cpu_ms) in zip(isas, ks):
                ratio, cpu_ratio = kiln_ms / ort_ms, kiln_cpu_ms / ort_cpu_ms
                ratios[isa, t][name] = (ratio, cpu_ratio)
                print(f"E2E model={name} threads={t} isa={isa} kiln_ms={fmt(kiln_ms)} "
                      f"ort_ms={fmt(ort_ms)} kiln_over_ort={ratio:.3f}")
                print(f"CPU model={name} threads={t} isa={isa} kiln_cpu_ms={fmt(kiln_cpu_ms)} "
                      f"ort_cpu_ms={fmt(ort_cpu_ms)} kiln_over_ort={cpu_ratio:.3f}", flush=True)
    for kiln in kilns:
        kiln.close()
    onnx_rt.close()
    print("# load average after: %.2f %.2f %.2f" % os.getloadavg())
    for (isa, t), per_model in ratios.items():
        got = [per_model[m] for m in GEOMEAN_MODELS if m in per_model]
        if got:
            # The exact line for the default (one ISA); the ISA appended when there are several.
            note = "" if len(isas) == 1 else f" isa={isa}"
            if len(got) != len(GEOMEAN_MODELS):
                note += f" (over {len(got)} of 7 CNNs)"
            print(f"E2E geomean threads={t} kiln_over_ort={geomean(r[0] for r in got):.3f}"
                  f"{note}")
            print(f"CPU geomean threads={t} kiln_over_ort={geomean(r[1] for r in got):.3f}"
                  f"{note}", flush=True)
    if not args.no_cold:
        if "resnet50" not in names:
            prepare("resnet50")
        cold_start()
    if not ok:
        print("kiln's output differs from onnxruntime's on some network", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
