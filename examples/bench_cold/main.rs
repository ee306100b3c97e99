//! Cold start and memory of ResNet-50 with *embedded* weights, for `scripts/bench_e2e.py`.
//!
//! The same network as the end-to-end benchmark's (`examples/bench_e2e/models/resnet50.rs`),
//! here with `weights "..."`: the 102 MB safetensors file the script writes to
//! `target/bench_e2e/resnet50/` is embedded in the binary and `new()` prepares it. That file
//! only exists after the script ran, so this example needs the cargo feature
//! `bench-embedded` and stays out of `cargo build`/`cargo test --workspace`:
//!
//! ```text
//! cargo build --release --example bench_cold --features bench-embedded   # the script does this
//! target/release/examples/bench_cold target/bench_e2e/resnet50/io.safetensors
//! ```
//!
//! One run per process (a cold start is only cold once): it reads the input `x` (untimed),
//! times `ResNet50::new()` and the first `run`, checks the output against onnxruntime's `y`
//! (max |difference| at most 1e-3 of the largest |y|) and prints
//!
//! ```text
//! COLD new_ms=<x> first_run_ms=<x> kiln_ms=<x> peak_rss_bytes=<x> weights_bytes=<x> arena_bytes=<x>
//! ```
//!
//! `peak_rss_bytes` is the process's peak resident set (`VmHWM`), `weights_bytes` the
//! prepared parameter buffer (`PARAMS_LEN` f32s) and `arena_bytes` the planned arena.

use std::error::Error;
use std::time::Instant;

use safetensors::SafeTensors;

#[path = "../bench_e2e/check.rs"]
mod check;
use check::{matches, tensor};

include!("../bench_e2e/models/resnet50.rs");

resnet50!(weights "../../../target/bench_e2e/resnet50/weights.safetensors";);

/// The process's peak resident set in bytes: `VmHWM` in `/proc/self/status`. Not
/// `getrusage`'s `ru_maxrss`, which Linux carries over `execve` from the forked parent (a
/// Python process holding other networks' weights).
fn peak_rss_bytes() -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .ok_or("/proc/self/status has no VmHWM line")?;
    Ok(kb.trim().parse::<u64>()? * 1024)
}

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: bench_cold <target/bench_e2e/resnet50/io.safetensors>")?;
    let bytes =
        std::fs::read(&path).map_err(|e| format!("{path}: {e} (run scripts/bench_e2e.py)"))?;
    let io = SafeTensors::deserialize(&bytes)?;
    let (x, y) = (tensor(&io, "x")?, tensor(&io, "y")?);

    let start = Instant::now();
    let mut model = ResNet50::new();
    let new_s = start.elapsed().as_secs_f64();
    let got = model.run(&x)?;
    let total_s = start.elapsed().as_secs_f64();

    if !matches(got.as_slice(), &y) {
        return Err("kiln's output differs from onnxruntime's".into());
    }
    println!(
        "COLD new_ms={} first_run_ms={} kiln_ms={} peak_rss_bytes={} weights_bytes={} arena_bytes={}",
        new_s * 1e3,
        (total_s - new_s) * 1e3,
        total_s * 1e3,
        peak_rss_bytes()?,
        ResNet50::PARAMS_LEN * 4,
        ResNet50::ARENA_BYTES
    );
    Ok(())
}
