"""A/B of kiln builds end to end: alternating single runs of one network in several
`bench_e2e` server binaries (and, optionally, onnxruntime), medians of thread CPU time.

`scripts/bench_e2e.py` compares kiln with onnxruntime; this compares kiln with kiln, which is
how a kernel or compiler change is judged on the shared machines: the two builds take turns,
one inference each, so a slow minute of the host hits both. Build the binaries first, e.g.

    cargo build --release --example bench_e2e && cp target/release/examples/bench_e2e /tmp/new
    git worktree add /tmp/wt_old <commit> && (cd /tmp/wt_old &&
        CARGO_TARGET_DIR=/tmp/wt_old_target cargo build --release --example bench_e2e)
    taskset -c 0 python3 scripts/ab_e2e.py resnet50 21 /tmp/wt_old_target/release/examples/bench_e2e /tmp/new

Pin the run to one core (`taskset -c 0 python3 scripts/ab_e2e.py ...`; the servers inherit it):
unpinned, the servers can land on cores of different speed for the whole run (a busy
hyperthread sibling, another guest), and a binary against a copy of itself gave per-round
ratios with quartiles 0.75-1.09; pinned, 0.97-1.04 (Intel Xeon host, 2026-11-28).

The network's files come from `target/bench_e2e/<model>/` (written by `bench_e2e.py`). `ort`
as a binary name adds onnxruntime (one intra-op thread) to the rotation. Options (environment):
`WARM=1` runs one untimed inference before each timed one (steady state, without the first
run after another process's), `FLUSH=1` writes 64 MiB between runs (cold caches), `THREADS=n`
runs every contender on `n` threads (kiln's `set_threads(n)`, onnxruntime's intra-op threads)
and compares wall time instead of the (then summed over threads) CPU time, pausing after each
sample as `bench_e2e.py` does (onnxruntime's workers spin on after a run and would take a core
from the next contender).

Prints, per contender, `<name> median_ms=<x> q1=<x> q3=<x>`, and for each contender after the
first the median and quartiles of its per-round ratio to the first: `<name> over <first>
paired_median=<x> q1=<x> q3=<x>` (a slow period of the host slows a whole round, so the ratio
within rounds is steadier than the ratio of the medians).
"""

import os
import statistics
import subprocess
import time
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "target" / "bench_e2e"
# Pause after each sample with several threads (bench_e2e.py's SETTLE_S).
SETTLE_S = 0.1


def request(proc: subprocess.Popen, line: str, tag: str) -> str:
    """Sends `line`, returns the next line of the answer that starts with `tag`."""
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    while True:
        got = proc.stdout.readline()
        if not got:
            sys.exit(f"{proc.args[0]} exited (code {proc.wait()})")
        if got.startswith(tag):
            return got


def start(binary: str, model: str, threads: int) -> subprocess.Popen:
    """A timing server with `model` loaded, on `threads` threads: kiln's (`--serve`) or
    onnxruntime's."""
    if binary == "ort":
        cmd = [sys.executable, str(ROOT / "scripts" / "bench_e2e.py"), "--ort-serve"]
        load = f"load {DATA / model / 'io.safetensors'} {DATA / model / 'model.onnx'} {threads}"
        done = "LOADED"
    else:
        cmd = [binary, "--serve", str(DATA)]
        load, done = f"load {model}", None
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if done:
        request(proc, load, done)
    else:
        proc.stdin.write(load + "\n")
        proc.stdin.flush()
        if threads > 1:
            check = request(proc, f"threads {threads}", "CHECK")
            if "FAILED" in check:
                sys.exit(f"{binary}: {check.strip()}")
    request(proc, "time 3", "TIME")  # loaded (kiln checks its output on load) and warm
    return proc


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    model, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    warm = os.environ.get("WARM") == "1"
    flush = bytearray(64 << 20) if os.environ.get("FLUSH") == "1" else None
    lines = bytes(len(flush) // 64) if flush is not None else b""  # one byte per cache line
    threads = int(os.environ.get("THREADS", "1"))
    clock = "cpu_s" if threads == 1 else "wall_s"
    servers = [start(b, model, threads) for b in binaries]
    cpu_ms: list[list[float]] = [[] for _ in binaries]
    for _ in range(rounds):
        for server, got in zip(servers, cpu_ms):
            if flush is not None:
                flush[::64] = lines
            if warm:
                request(server, "time 1", "TIME")
            fields = dict(w.split("=") for w in request(server, "time 1", "TIME").split()[1:])
            got.append(float(fields[clock]) * 1e3)
            if threads > 1:
                time.sleep(SETTLE_S)
    for binary, got in zip(binaries, cpu_ms):
        q1, _, q3 = statistics.quantiles(got, n=4)
        print(f"{binary} median_ms={statistics.median(got):.3f} q1={q1:.2f} q3={q3:.2f}")
    # The host's slow periods last seconds to minutes and slow every contender of a round
    # alike, so the ratio within each round is steadier than the ratio of the medians.
    for binary, got in zip(binaries[1:], cpu_ms[1:]):
        ratios = [x / y for x, y in zip(got, cpu_ms[0])]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(f"{binary} over {binaries[0]} paired_median={statistics.median(ratios):.3f} "
              f"q1={q1:.3f} q3={q3:.3f}")
    for server in servers:
        server.stdin.close()
        server.wait()


if __name__ == "__main__":
    main()
