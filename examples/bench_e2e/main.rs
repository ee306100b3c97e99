//! The kiln half of the end-to-end benchmark against onnxruntime (`scripts/bench_e2e.py`).
//!
//! The script writes, for each network `NAME`, `DIR/NAME/weights.safetensors` (PyTorch names)
//! and `DIR/NAME/io.safetensors` (`x`: the input, `y`: onnxruntime's output, `ort_ms`:
//! onnxruntime's single-threaded median), then runs this example on `DIR`. The networks below
//! are the same graphs written in the DSL, without a `weights` line: the weights are loaded at
//! run time with `from_safetensors`, so the benchmark data never has to be committed. For each
//! network this checks kiln's output against onnxruntime's (max |difference| at most 1e-3 of
//! the largest |output|), times kiln on one thread and prints
//!
//! ```text
//! BENCH e2e/NAME kiln_ms=<x> ort_ms=<y> kiln_over_ort=<x/y>
//! ```
//!
//! Run it through the script, which builds the data first:
//!
//! ```text
//! python3 scripts/bench_e2e.py        # = ... && cargo run --release --example bench_e2e -- target/bench_e2e
//! ```
//!
//! `KILN_ISA=avx2` (or `portable`, ...) caps the kernels' ISA as everywhere else.

use std::error::Error;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use safetensors::SafeTensors;

kiln::network! {
    /// torchvision's ResNet-18 at 224x224: 7x7/2 stem, 3x3/2 max pool, four stages of two
    /// basic blocks (the first block of stages 2-4 halves the size, with a 1x1/2 shortcut),
    /// global average pool and a 1000-way classifier.
    pub net ResNet18(x: fm<3xf32[224,224]>) -> vec<1000xf32> {
        let h = conv2d(x, conv1: weights<3 -> 7x7xf32 -> 64>, stride = 2, pad = 3, bias = false);
        let h = batch_norm(h, bn1: norm<64xf32>).relu();
        let h = max_pool(h, 3x3, stride = 2, pad = 1);

        let a = conv2d(h, "layer1.0.conv1": weights<64 -> 3x3xf32 -> 64>, pad = 1, bias = false);
        let a = batch_norm(a, "layer1.0.bn1": norm<64xf32>).relu();
        let a = conv2d(a, "layer1.0.conv2": weights<64 -> 3x3xf32 -> 64>, pad = 1, bias = false);
        let a = batch_norm(a, "layer1.0.bn2": norm<64xf32>);
        let h = add(a, h).relu();
        let a = conv2d(h, "layer1.1.conv1": weights<64 -> 3x3xf32 -> 64>, pad = 1, bias = false);
        let a = batch_norm(a, "layer1.1.bn1": norm<64xf32>).relu();
        let a = conv2d(a, "layer1.1.conv2": weights<64 -> 3x3xf32 -> 64>, pad = 1, bias = false);
        let a = batch_norm(a, "layer1.1.bn2": norm<64xf32>);
        let h = add(a, h).relu();

        let a = conv2d(h, "layer2.0.conv1": weights<64 -> 3x3xf32 -> 128>, stride = 2, pad = 1, bias = false);
        let a = batch_norm(a, "layer2.0.bn1": norm<128xf32>).relu();
        let a = conv2d(a, "layer2.0.conv2": weights<128 -> 3x3xf32 -> 128>, pad = 1, bias = false);
        let a = batch_norm(a, "layer2.0.bn2": norm<128xf32>);
        let s = conv2d(h, "layer2.0.downsample.0": weights<64 -> 1x1xf32 -> 128>, stride = 2, bias = false);
        let s = batch_norm(s, "layer2.0.downsample.1": norm<128xf32>);
        let h = add(a, s).relu();
        let a = conv2d(h, "layer2.1.conv1": weights<128 -> 3x3xf32 -> 128>, pad = 1, bias = false);
        let a = batch_norm(a, "layer2.1.bn1": norm<128xf32>).relu();
        let a = conv2d(a, "layer2.1.conv2": weights<128 -> 3x3xf32 -> 128>, pad = 1, bias = false);
        let a = batch_norm(a, "layer2.1.bn2": norm<128xf32>);
        let h = add(a, h).relu();

        let a = conv2d(h, "layer3.0.conv1": weights<128 -> 3x3xf32 -> 256>, stride = 2, pad = 1, bias = false);
        let a = batch_norm(a, "layer3.0.bn1": norm<256xf32>).relu();
        let a = conv2d(a, "layer3.0.conv2": weights<256 -> 3x3xf32 -> 256>, pad = 1, bias = false);
        let a = batch_norm(a, "layer3.0.bn2": norm<256xf32>);
        let s = conv2d(h, "layer3.0.downsample.0": weights<128 -> 1x1xf32 -> 256>, stride = 2, bias = false);
        let s = batch_norm(s, "layer3.0.downsample.1": norm<256xf32>);
        let h = add(a, s).relu();
        let a = conv2d(h, "layer3.1.conv1": weights<256 -> 3x3xf32 -> 256>, pad = 1, bias = false);
        let a = batch_norm(a, "layer3.1.bn1": norm<256xf32>).relu();
        let a = conv2d(a, "layer3.1.conv2": weights<256 -> 3x3xf32 -> 256>, pad = 1, bias = false);
        let a = batch_norm(a, "layer3.1.bn2": norm<256xf32>);
        let h = add(a, h).relu();

        let a = conv2d(h, "layer4.0.conv1": weights<256 -> 3x3xf32 -> 512>, stride = 2, pad = 1, bias = false);
        let a = batch_norm(a, "layer4.0.bn1": norm<512xf32>).relu();
        let a = conv2d(a, "layer4.0.conv2": weights<512 -> 3x3xf32 -> 512>, pad = 1, bias = false);
        let a = batch_norm(a, "layer4.0.bn2": norm<512xf32>);
        let s = conv2d(h, "layer4.0.downsample.0": weights<256 -> 1x1xf32 -> 512>, stride = 2, bias = false);
        let s = batch_norm(s, "layer4.0.downsample.1": norm<512xf32>);
        let h = add(a, s).relu();
        let a = conv2d(h, "layer4.1.conv1": weights<512 -> 3x3xf32 -> 512>, pad = 1, bias = false);
        let a = batch_norm(a, "layer4.1.bn1": norm<512xf32>).relu();
        let a = conv2d(a, "layer4.1.conv2": weights<512 -> 3x3xf32 -> 512>, pad = 1, bias = false);
        let a = batch_norm(a, "layer4.1.bn2": norm<512xf32>);
        let h = add(a, h).relu();

        let h = flatten(global_avg_pool(h));
        dense(h, fc: weights<512 -> 1000>)
    }
}

kiln::network! {
    /// The digits example's network (examples/digits), weights loaded at run time.
    pub net Digits(x: fm<1xf32[8,8]>) -> vec<10xf32> {
        let h = conv2d(x, conv1: weights<1 -> 3x3xf32 -> 16>, pad = same).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<256 -> 64>).relu();
        softmax(dense(h, fc2: weights<64 -> 10>))
    }
}

/// Time spent running a network before measuring it.
const WARMUP: Duration = Duration::from_millis(300);
/// Aim for this much measured time per network ...
const TARGET: Duration = Duration::from_secs(2);
/// ... in at least this many and at most this many samples ...
const SAMPLES: (usize, usize) = (11, 201);
/// ... each of which repeats the run until it lasts this long (microsecond-sized networks).
const MIN_SAMPLE: Duration = Duration::from_millis(1);

/// Median seconds per call of `f`, after a warm-up; the median ignores the samples that other
/// processes on a shared machine disturbed.
fn median_seconds(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut calls = 0u32;
    while calls < 3 || start.elapsed() < WARMUP {
        f();
        calls += 1;
    }
    let per_call = (start.elapsed().as_secs_f64() / f64::from(calls)).max(1e-9);
    let reps = ((MIN_SAMPLE.as_secs_f64() / per_call).ceil() as usize).max(1);
    let samples = ((TARGET.as_secs_f64() / (per_call * reps as f64)) as usize)
        .clamp(SAMPLES.0, SAMPLES.1)
        | 1;
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// What the script wrote for one network.
struct Case {
    weights: Vec<u8>,
    x: Vec<f32>,
    y: Vec<f32>,
    ort_ms: f64,
}

fn read(path: &Path) -> Result<Vec<u8>, Box<dyn Error>> {
    std::fs::read(path).map_err(|e| {
        format!(
            "{}: {e} (run scripts/bench_e2e.py, which writes it)",
            path.display()
        )
        .into()
    })
}

/// The little-endian elements of a tensor; safetensors data has no alignment guarantee, so
/// it is decoded rather than cast.
fn tensor<const N: usize, T>(
    file: &SafeTensors,
    name: &str,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>, Box<dyn Error>> {
    Ok(file
        .tensor(name)?
        .data()
        .chunks_exact(N)
        .map(|b| decode(b.try_into().expect("chunks_exact yields N bytes")))
        .collect())
}

fn load(dir: &Path, net: &str) -> Result<Case, Box<dyn Error>> {
    let io_bytes = read(&dir.join(net).join("io.safetensors"))?;
    let io = SafeTensors::deserialize(&io_bytes)?;
    let ort_ms = tensor(&io, "ort_ms", f64::from_le_bytes)?;
    Ok(Case {
        weights: read(&dir.join(net).join("weights.safetensors"))?,
        x: tensor(&io, "x", f32::from_le_bytes)?,
        y: tensor(&io, "y", f32::from_le_bytes)?,
        ort_ms: *ort_ms.first().ok_or("io.safetensors: `ort_ms` is empty")?,
    })
}

/// Compares with onnxruntime, prints the `CHECK` and `BENCH` lines; `Ok(false)` if the
/// outputs differ.
fn report(net: &str, case: &Case, got: &[f32], secs: f64) -> Result<bool, Box<dyn Error>> {
    if got.len() != case.y.len() {
        return Err(format!(
            "{net}: kiln gives {} outputs, onnxruntime {}",
            got.len(),
            case.y.len()
        )
        .into());
    }
    let scale = case.y.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let mut diff = 0.0f32;
    for (g, w) in got.iter().zip(&case.y) {
        let d = (g - w).abs();
        if d.is_nan() {
            diff = f32::INFINITY;
        } else if d > diff {
            diff = d;
        }
    }
    let ok = diff <= 1e-3 * scale;
    println!(
        "CHECK e2e/{net} max_abs_diff={diff:e} max_abs_ort={scale:e} {}",
        if ok { "ok" } else { "FAILED (> 1e-3 relative)" }
    );
    let kiln_ms = secs * 1e3;
    println!(
        "BENCH e2e/{net} kiln_ms={} ort_ms={} kiln_over_ort={:.3}",
        sig4(kiln_ms),
        sig4(case.ort_ms),
        kiln_ms / case.ort_ms
    );
    Ok(ok)
}

/// Four significant digits, without exponent notation for the sizes seen here.
fn sig4(x: f64) -> String {
    let decimals = (3 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{x:.decimals$}")
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: bench_e2e <dir written by scripts/bench_e2e.py, e.g. target/bench_e2e>")?;
    let dir = Path::new(&dir);
    println!("# kiln e2e benchmark, 1 thread, kernels: {}", kiln::isa());
    let mut ok = true;

    let case = load(dir, "resnet18")?;
    let mut model = ResNet18::from_safetensors(&case.weights)?;
    let got = model.run(&case.x)?.as_slice().to_vec();
    let secs = median_seconds(|| {
        let y = model.run(&case.x).expect("the same input ran above");
        black_box(y.as_slice());
    });
    ok &= report("resnet18", &case, &got, secs)?;

    let case = load(dir, "digits")?;
    let mut model = Digits::from_safetensors(&case.weights)?;
    let got = model.run(&case.x)?.as_slice().to_vec();
    let secs = median_seconds(|| {
        let y = model.run(&case.x).expect("the same input ran above");
        black_box(y.as_slice());
    });
    ok &= report("digits", &case, &got, secs)?;

    if ok {
        Ok(())
    } else {
        Err("kiln's output differs from onnxruntime's".into())
    }
}
