//! The kiln half of the end-to-end benchmark against onnxruntime (`scripts/bench_e2e.py`).
//!
//! The networks are the DSL translations the script generated from its model descriptions
//! (`models/NAME.rs`, checked in, one `macro_rules!` each that expands to the `network!`;
//! here without a `weights` line, so the weights are loaded at run time with
//! `from_safetensors` and the benchmark data never has to be committed), plus the digits
//! example's network, written by hand below.
//!
//! The script drives this program as a server, so that it can interleave kiln's samples with
//! onnxruntime's in one run. On standard input it reads lines:
//!
//! ```text
//! load NAME   loads DIR/NAME/weights.safetensors and DIR/NAME/io.safetensors (`x`, `y`),
//!             runs once and compares with onnxruntime's `y` (max |difference| at most 1e-3
//!             of the largest |y|); answers `CHECK e2e/NAME max_abs_diff=.. max_abs_ort=.. ok`
//!             (or `FAILED`)
//! threads N   runs the loaded network on N threads from now on (`set_threads`), runs it
//!             once and compares with the first run's output; answers `CHECK e2e/NAME
//!             threads=N same_as_one_thread ok` (or `FAILED`) and `THREADS N`
//! time N      runs the loaded network N times; answers `TIME wall_s=<x> cpu_s=<x>` (the
//!             process CPU time of those runs: the calling thread's and the workers')
//! stats N     runs the loaded network N times and answers how its parallel kernels shared
//!             their tasks with the workers (`kiln::Threads::stats`): `STATS jobs=<per run>
//!             tasks=<per job> worker_share=<tasks the workers ran / all> entered=<jobs a
//!             worker entered / all> entry_delay_us=<mean> job_share=<time in parallel jobs /
//!             wall> caller_task_ms=<per run> worker_task_ms=<per run>` (the time the caller
//!             and the workers spent running tasks)
//! ```
//!
//! and it starts by printing `ISA <name>`, the kernels it runs (`KILN_ISA` caps them as
//! everywhere else). Run it through the script, which writes DIR first:
//!
//! ```text
//! python3 scripts/bench_e2e.py     # ... cargo build --release --example bench_e2e; bench_e2e --serve target/bench_e2e
//! ```

use std::error::Error;
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

use safetensors::SafeTensors;

mod check;
use check::{matches, max_diff, tensor};

include!("models/resnet18.rs");
include!("models/squeezenet.rs");
include!("models/resnet50.rs");
include!("models/densenet121.rs");
include!("models/inception_v2.rs");
include!("models/vgg19.rs");
include!("models/mobilenet_v2.rs");
include!("models/shufflenet_v2.rs");

resnet18!();
squeezenet!();
resnet50!();
densenet121!();
inception_v2!();
vgg19!();
mobilenet_v2!();
shufflenet_v2!();

kiln::network! {
    /// The digits example's network (examples/digits), weights loaded at run time.
    pub net Digits(x: fm<1xf32[8,8]>) -> vec<10xf32> {
        let h = conv2d(x, conv1: weights<1 -> 3x3xf32 -> 16>, pad = same).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<256 -> 64>).relu();
        softmax(dense(h, fc2: weights<64 -> 10>))
    }
}

/// One network of any of the generated types, behind one interface.
trait Network {
    /// Runs on `x`, returning the (single) output.
    fn infer(&mut self, x: &[f32]) -> Result<&[f32], kiln::Error>;
    /// Runs on `n` threads from now on.
    fn set_threads(&mut self, n: usize) -> Result<(), kiln::Error>;
}

/// `Network` for each type and the `load` function that picks one by name.
macro_rules! networks {
    ($($name:literal => $ty:ident),* $(,)?) => {
        $(impl Network for $ty {
            fn infer(&mut self, x: &[f32]) -> Result<&[f32], kiln::Error> {
                Ok(self.run(x)?.as_slice())
            }
            fn set_threads(&mut self, n: usize) -> Result<(), kiln::Error> {
                $ty::set_threads(self, n)
            }
        })*

        /// The network `name` with the weights in `bytes` (safetensors).
        fn load(name: &str, bytes: &[u8]) -> Result<Box<dyn Network>, Box<dyn Error>> {
            match name {
                $($name => Ok(Box::new($ty::from_safetensors(bytes)?)),)*
                _ => Err(format!("unknown network `{name}`").into()),
            }
        }
    };
}

networks! {
    "resnet18" => ResNet18,
    "squeezenet" => SqueezeNet,
    "resnet50" => ResNet50,
    "densenet121" => DenseNet121,
    "inception_v2" => InceptionV2,
    "vgg19" => Vgg19,
    "mobilenet_v2" => MobileNetV2,
    "shufflenet_v2" => ShuffleNetV2,
    "digits" => Digits,
}

/// CPU time this process has used, in seconds: every thread's, so the workers of a network
/// on several threads count too (the process does nothing else while it times).
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable `timespec`; CLOCK_PROCESS_CPUTIME_ID exists on every
    // Linux, and on failure `t` stays zero (reported as a zero time, never UB).
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
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

/// A loaded network and its input.
struct Loaded {
    name: String,
    net: Box<dyn Network>,
    x: Vec<f32>,
    /// The output of the first run (one thread), for the `threads` check.
    first: Vec<f32>,
}

/// `load NAME`: loads, runs once, compares with onnxruntime; prints the `CHECK` line.
fn load_case(dir: &Path, name: &str) -> Result<Loaded, Box<dyn Error>> {
    let io_bytes = read(&dir.join(name).join("io.safetensors"))?;
    let io = SafeTensors::deserialize(&io_bytes)?;
    let (x, y) = (tensor(&io, "x")?, tensor(&io, "y")?);
    let mut net = load(name, &read(&dir.join(name).join("weights.safetensors"))?)?;
    let got = net.infer(&x)?;
    if got.len() != y.len() {
        return Err(format!(
            "{name}: kiln gives {} outputs, onnxruntime {}",
            got.len(),
            y.len()
        )
        .into());
    }
    let (diff, scale) = max_diff(got, &y);
    let verdict = if matches(got, &y) {
        "ok"
    } else {
        "FAILED (> 1e-3 relative)"
    };
    println!("CHECK e2e/{name} max_abs_diff={diff:e} max_abs_ort={scale:e} {verdict}");
    let first = got.to_vec();
    Ok(Loaded {
        name: name.to_owned(),
        net,
        x,
        first,
    })
}

/// `time N`: N runs; their wall and process CPU seconds.
fn time_runs(case: &mut Loaded, reps: u64) -> Result<(f64, f64), kiln::Error> {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    for _ in 0..reps {
        black_box(case.net.infer(black_box(&case.x))?);
    }
    Ok((wall.elapsed().as_secs_f64(), cpu_seconds() - cpu))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [flag, dir] = args.as_slice() else {
        return Err(
            "usage: bench_e2e --serve <dir written by scripts/bench_e2e.py> (run the script)"
                .into(),
        );
    };
    if flag != "--serve" {
        return Err(format!("unknown flag `{flag}`; usage: bench_e2e --serve <dir>").into());
    }
    let dir = Path::new(dir);
    let mut out = std::io::stdout().lock();
    writeln!(out, "ISA {}", kiln::isa())?;
    out.flush()?;
    let mut case: Option<Loaded> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["load", name] => {
                // Drop the previous network first: VGG-19's weights alone are 575 MB.
                drop(case.take());
                case = Some(load_case(dir, name)?);
            }
            ["threads", n] => {
                let case = case.as_mut().ok_or("`threads` before `load`")?;
                case.net.set_threads(n.parse()?)?;
                // The kernels split only whole parts of their outputs: the same bits.
                let same = case.net.infer(&case.x)? == case.first.as_slice();
                let verdict = if same { "ok" } else { "FAILED" };
                writeln!(
                    out,
                    "CHECK e2e/{} threads={n} same_as_one_thread {verdict}",
                    case.name
                )?;
                writeln!(out, "THREADS {n}")?;
            }
            ["time", reps] => {
                let case = case.as_mut().ok_or("`time` before `load`")?;
                let (wall, cpu) = time_runs(case, reps.parse()?)?;
                writeln!(out, "TIME wall_s={wall:e} cpu_s={cpu:e}")?;
            }
            // Built with `--features profile` (`scripts/bench_e2e.py --kiln-profile`): each
            // op's mean time over `reps` runs, slowest first.
            #[cfg(feature = "profile")]
            ["profile", reps] => {
                let case = case.as_mut().ok_or("`profile` before `load`")?;
                let reps: u64 = reps.parse()?;
                kiln::profile::take();
                let (wall, _) = time_runs(case, reps)?;
                let mut ops = kiln::profile::take();
                ops.sort_by_key(|o| std::cmp::Reverse(o.total));
                for o in &ops {
                    let s = o.total.as_secs_f64();
                    writeln!(
                        out,
                        "LAYER ms={:.4} share={:.4} calls={} {}",
                        s * 1e3 / reps as f64,
                        s / wall,
                        o.calls / reps,
                        o.label
                    )?;
                }
                writeln!(out, "PROFILED ms={:.4}", wall * 1e3 / reps as f64)?;
            }
            ["stats", reps] => {
                let case = case.as_mut().ok_or("`stats` before `load`")?;
                let reps: u64 = reps.parse()?;
                kiln::Threads::reset_stats();
                let (wall, _) = time_runs(case, reps)?;
                let s = kiln::Threads::stats();
                let per = |a: u64, b: u64| a as f64 / (b.max(1)) as f64;
                writeln!(
                    out,
                    "STATS jobs={:.1} tasks={:.2} worker_share={:.3} entered={:.3} entry_delay_us={:.1} job_share={:.3} caller_task_ms={:.2} worker_task_ms={:.2}",
                    per(s.jobs, reps),
                    per(s.tasks, s.jobs),
                    per(s.worker_tasks, s.tasks),
                    per(s.entries, s.jobs),
                    per(s.entry_delay_ns, s.entries) / 1e3,
                    s.job_ns as f64 / 1e9 / wall,
                    s.caller_task_ns as f64 / 1e6 / reps as f64,
                    s.worker_task_ns as f64 / 1e6 / reps as f64,
                )?;
            }
            _ => return Err(format!("unknown command `{line}`").into()),
        }
        out.flush()?;
    }
    Ok(())
}
