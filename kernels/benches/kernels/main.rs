//! The kernel benchmark: every kernel path this CPU can run, as a fraction of the machine's
//! measured FMA peak and as a ratio to the best reference crate, in one run.
//!
//! ```text
//! cargo bench -p kiln-kernels --features std --bench kernels             # everything, ~1-2 min
//! cargo bench -p kiln-kernels --features std --bench kernels -- resnet50  # cases matching a filter
//! KILN_BENCH_CLOCK=thread cargo bench ...                                 # thread CPU time, not wall (Linux)
//! KILN_BENCH_COLD=1 cargo bench ... -- mobilenetv2/pw                     # operands from memory, not cache
//! ```
//!
//! It needs run-time ISA detection (the `std` feature; without it the table only offers what
//! the build enables with `-C target-feature`, which is not what users get). The crate's
//! dev-dependency on itself turns `std` on for every bench and test build, so `--features std`
//! is implied.
//!
//! Sketch:
//!
//! ```text
//! print  DEFAULT isa=<what best() picks>
//! peak = max over the SIMD ISAs this CPU has of a register-only FMA loop (peak.rs)
//! for each case (square GEMMs, ResNet-50 convs as GEMM and as conv2d, MobileNet-v2 depthwise,
//! pooling layers):
//!     contenders = the fastest peak loop (this case's denominator)
//!                + matrixmultiply and gemm on the case's GEMM (if it has one)
//!                + every ISA for_isa() hands out (portable only for small cases)
//!     warm each up, then take samples round-robin: one of each contender per round
//!     check every ISA's output against a reference
//!     print  PEAK <case> gflops=<x>                        the peak sampled with this case
//!            REF <case> crate=<crate> gflops=<x> of_peak=<x>                      per crate
//!            BENCH <case> isa=<isa> gflops=<x> of_peak=<x> vs_best_crate=<x or ->  per ISA
//!            NCHWC <case> isa=<isa> nchw_of_peak=<x> blocked_over_nchw=<x>   blocked convolutions:
//!                the same ISA's NCHW conv2d, sampled in the same turns, and the speed ratio
//! print medians of of_peak per family and ISA, and of AVX2 / AVX-512
//! ```
//!
//! Every time is the median of its samples, because the machine is shared and noisy: a median
//! ignores the samples another process disturbed. Sampling the contenders of a case in turns,
//! rather than one after the other, exposes them to the same background load, so the ratios
//! between them (`vs_best_crate`, AVX2 / AVX-512, and `of_peak`, whose peak loop is one of the
//! contenders) hold even when the absolute numbers drift.
//! Kernels are always called through `kiln_kernels::for_isa(isa)`, so the numbers are those
//! of whatever kernels the table currently holds.
//!
//! Run by `cargo test --benches` (no `--bench` argument), it only runs the smallest case of each
//! family once, as a smoke test that the benchmark still works.

mod peak;
mod refs;
mod shapes;

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use kiln_kernels::{for_isa, nchwc, pack, Isa, Kernels, WeightLayout, PORTABLE};

use shapes::{Case, Family, Op};

/// How long to measure.
struct Budget {
    /// Minimum time spent running each contender before measuring (caches, page faults,
    /// clock ramp-up).
    warmup: Duration,
    /// A sample repeats the call until it lasts at least this long, so that timer resolution
    /// and overhead do not matter for microsecond-sized cases.
    min_sample: Duration,
    /// Aim for this much measured time per contender ...
    target: Duration,
    /// ... within this many samples each (odd, so the median is one real sample).
    samples: (usize, usize),
    /// Cases above this many flops are not run with the portable kernels, which would take
    /// most of the run's time for numbers nobody needs.
    portable_max_flops: f64,
    /// Run only the smallest case of each family (smoke mode).
    smallest_only: bool,
    /// Iterations of a peak loop per call.
    peak_iters: u64,
}

const FULL: Budget = Budget {
    warmup: Duration::from_millis(40),
    min_sample: Duration::from_millis(2),
    target: Duration::from_millis(400),
    samples: (7, 31),
    portable_max_flops: 0.3e9,
    smallest_only: false,
    peak_iters: 1 << 20,
};

const SMOKE: Budget = Budget {
    warmup: Duration::ZERO,
    min_sample: Duration::ZERO,
    target: Duration::ZERO,
    samples: (1, 1),
    portable_max_flops: 5e7,
    smallest_only: true,
    peak_iters: 1 << 10,
};

/// Median seconds per call of each of `fs`: each is warmed up, then sampled in turns (one
/// sample of each per round) so that they all see the same background load.
fn time_interleaved(budget: &Budget, fs: &mut [Box<dyn FnMut() + '_>]) -> Vec<f64> {
    let mut reps = Vec::with_capacity(fs.len());
    let mut round = 0.0;
    for f in fs.iter_mut() {
        let start = Instant::now();
        let mut calls = 0u32;
        while calls < 1 || start.elapsed() < budget.warmup {
            f();
            calls += 1;
        }
        let per_call = (start.elapsed().as_secs_f64() / f64::from(calls)).max(1e-9);
        let r = ((budget.min_sample.as_secs_f64() / per_call).ceil() as usize).max(1);
        round += per_call * r as f64;
        reps.push(r);
    }
    let (lo, hi) = budget.samples;
    let wanted = budget.target.as_secs_f64() * fs.len() as f64 / round.max(1e-9);
    let samples = (wanted as usize).clamp(lo, hi) | 1;
    let mut times = vec![Vec::with_capacity(samples); fs.len()];
    let clock = Clock::from_env();
    let mut flush = Flush::from_env();
    if flush.is_some() {
        // One call per sample, each after its own flush.
        reps.fill(1);
    }
    for sample in 0..samples {
        for ((f, &r), t) in fs.iter_mut().zip(&reps).zip(&mut times) {
            if let Some(flush) = &mut flush {
                flush.run(sample);
            }
            let start = clock.now();
            for _ in 0..r {
                f();
            }
            t.push((clock.now() - start) / r as f64);
        }
    }
    times.iter_mut().map(|t| median(t)).collect()
}

/// With `KILN_BENCH_COLD=1`, every timed call comes after an untimed write of
/// [`Flush::BYTES`] (twice the 32 MiB L3 of the AMD EPYC hosts; a CPU with a larger L3 needs
/// more), so the call finds its operands in memory rather than in cache: as a layer does whose
/// input was written long before, or the first inference after other work. A kernel that reads
/// rows far apart can be fast warm and several times slower cold (docs/performance.md,
/// "Prefetching `B` in place"). Each sample is then one call, so cold runs suit cases of tens
/// of microseconds and more.
struct Flush(Vec<u8>);

impl Flush {
    const BYTES: usize = 64 << 20;

    fn enabled() -> bool {
        std::env::var("KILN_BENCH_COLD").is_ok_and(|v| v == "1")
    }

    fn from_env() -> Option<Flush> {
        Self::enabled().then(|| Flush(vec![0; Self::BYTES]))
    }

    /// Writes the whole buffer (a different value each time, so no write is redundant).
    fn run(&mut self, sample: usize) {
        self.0.fill(sample as u8);
        black_box(&mut self.0);
    }
}

/// What a sample's time is: wall time, or with `KILN_BENCH_CLOCK=thread` (64-bit Linux) the thread's
/// CPU time, which does not count the time other processes on a shared machine hold the core
/// (they still share its caches, so the numbers stay somewhat noisy).
#[derive(Clone, Copy)]
enum Clock {
    Wall(Instant),
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    Thread,
}

impl Clock {
    fn from_env() -> Clock {
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        if std::env::var("KILN_BENCH_CLOCK").is_ok_and(|v| v == "thread") {
            return Clock::Thread;
        }
        Clock::Wall(Instant::now())
    }

    /// Seconds since an arbitrary origin.
    fn now(self) -> f64 {
        match self {
            Clock::Wall(origin) => origin.elapsed().as_secs_f64(),
            #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
            Clock::Thread => {
                #[repr(C)]
                struct Timespec {
                    sec: i64,
                    nsec: i64,
                }
                extern "C" {
                    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
                }
                const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
                let mut ts = Timespec { sec: 0, nsec: 0 };
                // SAFETY: `ts` is a valid, writable `struct timespec` (two 64-bit fields on
                // 64-bit Linux, the only place this benchmark's thread clock is used).
                let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
                ts.sec as f64 + ts.nsec as f64 * 1e-9
            }
        }
    }
}

/// The median of a non-empty set (the mean of the middle two for an even count).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Deterministic values in `[-1, 1)` (xorshift), so runs are comparable without a `rand` dep.
fn random(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// The inputs of one case, shared by every contender that runs it.
enum Data {
    Gemm {
        a: Vec<f32>,
        b: Vec<f32>,
    },
    Conv {
        input: Vec<f32>,
        weight: Vec<f32>,
        bias: Vec<f32>,
        /// `weight` through `winograd::transform_filter` (empty unless the op is Winograd).
        u: Vec<f32>,
        /// The right-hand matrix of the crates' GEMM (the size of the im2col matrix); the
        /// left-hand one is `weight`, already `[c_out, c_in * kh * kw]`.
        b: Vec<f32>,
        /// `weight` as the x86 tables read it (`WeightLayout::DepthBlocked`), packed once as a
        /// model does when it prepares its parameters, outside the timed runs.
        blocked: Vec<f32>,
        /// For the blocked layout: the input blocked and the weights packed by
        /// `nchwc::pack_weights` (`Op::Nchwc`) or transformed by
        /// `nchwc::winograd::transform_filter` (`Op::NchwcWinograd`); empty for the other ops.
        nchwc_input: Vec<f32>,
        nchwc_weight: Vec<f32>,
    },
    Pool {
        input: Vec<f32>,
    },
    Dense {
        input: Vec<f32>,
        /// `[n_out, n_in]`; the crates multiply it as a `[n_in, n_out]` matrix (same flops).
        weight: Vec<f32>,
        bias: Vec<f32>,
    },
}

impl Data {
    fn new(case: &Case) -> Data {
        match case.op {
            Op::Gemm { m, n, k } => Data::Gemm {
                a: random(m * k, 1),
                b: random(k * n, 2),
            },
            Op::Conv(p, _) | Op::Winograd(p, _) | Op::Nchwc(p, _) | Op::NchwcWinograd(p, _) => {
                let weight = random(p.c_out * (p.c_in / p.groups) * p.kh * p.kw, 4);
                let mut u = Vec::new();
                // The NCHW contender of a blocked Winograd case runs `conv2d_winograd`.
                if let Op::Winograd(..) | Op::NchwcWinograd(..) = case.op {
                    u = vec![0.0; 36 * p.c_out * p.c_in];
                    kiln_kernels::winograd::transform_filter(p.c_out, p.c_in, &weight, &mut u);
                }
                let mut blocked = vec![0.0; weight.len()];
                pack::pack_conv2d(WeightLayout::DepthBlocked, &p, &weight, &mut blocked);
                let input = random(p.batch * p.c_in * p.h * p.w, 3);
                let (mut nchwc_input, mut nchwc_weight) = (Vec::new(), Vec::new());
                if let Op::Nchwc(..) | Op::NchwcWinograd(..) = case.op {
                    nchwc_input = vec![0.0; nchwc::blocked_len(p.batch, p.c_in, p.h, p.w)];
                    nchwc::to_blocked(p.batch, p.c_in, p.h, p.w, &input, &mut nchwc_input);
                }
                if let Op::Nchwc(..) = case.op {
                    nchwc_weight = nchwc_packed(&p, &weight);
                }
                if let Op::NchwcWinograd(..) = case.op {
                    nchwc_weight = vec![0.0; nchwc::winograd::filter_len(p.c_out, p.c_in)];
                    nchwc::winograd::transform_filter(p.c_out, p.c_in, &weight, &mut nchwc_weight);
                }
                Data::Conv {
                    input,
                    nchwc_input,
                    nchwc_weight,
                    weight,
                    u,
                    bias: random(p.c_out, 5),
                    b: case
                        .crate_gemm()
                        .map_or_else(Vec::new, |(_, n, k)| random(k * n, 6)),
                    blocked,
                }
            }
            Op::Pool(p, _) => Data::Pool {
                input: random(p.batch * p.channels * p.h * p.w, 7),
            },
            Op::Dense { n_in, n_out } => Data::Dense {
                input: random(n_in, 8),
                weight: random(n_out * n_in, 9),
                bias: random(n_out, 10),
            },
        }
    }

    /// The two GEMM operands a crate multiplies for this case.
    fn gemm_operands(&self) -> (&[f32], &[f32]) {
        match self {
            Data::Gemm { a, b } => (a, b),
            Data::Conv { weight, b, .. } => (weight, b),
            Data::Dense { input, weight, .. } => (input, weight),
            Data::Pool { .. } => unreachable!("pools have no GEMM"),
        }
    }
}

/// `weight` (`[c_out, c_in, kh, kw]`) packed for the direct blocked convolution
/// (`nchwc::pack_weights`).
fn nchwc_packed(p: &kiln_kernels::Conv2d, weight: &[f32]) -> Vec<f32> {
    let mut packed = vec![0.0; nchwc::packed_weight_len(p.c_out, p.c_in, p.kh, p.kw)];
    nchwc::pack_weights(p.c_out, p.c_in, p.kh, p.kw, weight, &mut packed);
    packed
}

/// Runs the case once with the kernels `k`, writing `out`.
fn run(k: &Kernels, op: &Op, data: &Data, scratch: &mut [f32], out: &mut [f32]) {
    match (op, data) {
        (&Op::Gemm { m, n, k: depth }, Data::Gemm { a, b }) => (k.gemm)(m, n, depth, a, b, out),
        (
            Op::Conv(p, act),
            Data::Conv {
                input,
                weight,
                bias,
                blocked,
                ..
            },
        ) => {
            let w = match k.weights {
                WeightLayout::Rows => weight,
                WeightLayout::DepthBlocked => blocked,
            };
            (k.conv2d)(p, input, w, Some(bias), *act, scratch, out)
        }
        (
            Op::Nchwc(p, act),
            Data::Conv {
                nchwc_input,
                nchwc_weight,
                bias,
                ..
            },
        ) => (k.conv2d_nchwc)(p, nchwc_input, nchwc_weight, Some(bias), None, *act, out),
        (
            Op::NchwcWinograd(p, act),
            Data::Conv {
                nchwc_input,
                nchwc_weight,
                bias,
                ..
            },
        ) => (k.conv2d_nchwc_winograd)(
            p,
            nchwc_input,
            nchwc_weight,
            Some(bias),
            None,
            *act,
            scratch,
            out,
        ),
        (Op::Winograd(p, act), Data::Conv { input, u, bias, .. }) => {
            (k.conv2d_winograd)(p, input, u, Some(bias), *act, scratch, out)
        }
        (Op::Pool(p, true), Data::Pool { input }) => (k.max_pool2d)(p, input, out),
        (Op::Pool(p, false), Data::Pool { input }) => (k.avg_pool2d)(p, input, out),
        (
            &Op::Dense { n_in, n_out },
            Data::Dense {
                input,
                weight,
                bias,
            },
        ) => (k.dense)(
            1,
            n_in,
            n_out,
            input,
            weight,
            Some(bias),
            kiln_kernels::Activation::None,
            out,
        ),
        _ => unreachable!("Data::new builds the data for its op"),
    }
}

/// `None` if `got` matches `want` to within a tolerance for reordered f32 sums, else the
/// largest difference and the scale it was judged against.
fn mismatch(got: &[f32], want: &[f32]) -> Option<(f32, f32)> {
    let scale = want.iter().fold(1.0f32, |s, v| s.max(v.abs()));
    let mut err = 0.0f32;
    for (g, w) in got.iter().zip(want) {
        let d = (g - w).abs();
        if d.is_nan() {
            err = f32::INFINITY;
        } else if d > err {
            err = d;
        }
    }
    (err > 1e-3 * scale).then_some((err, scale))
}

/// Who runs a case.
enum Contender {
    /// The fastest register-only FMA loop: the case's denominator (always first).
    Peak,
    Crate(&'static str, refs::GemmFn),
    Kiln(Kernels),
    /// For a blocked convolution: the same table's NCHW `conv2d` (`Op::Nchwc`) or
    /// `conv2d_winograd` (`Op::NchwcWinograd`) on the same convolution, sampled in the same
    /// turns, so the `NCHWC` line's ratio holds on a noisy machine (separate cases are minutes
    /// apart).
    Nchw(Kernels),
}

/// One measured kernel line.
struct Row {
    case: usize,
    family: Family,
    isa: Isa,
    gflops: f64,
    /// `gflops` over the peak measured in the same rounds as this case.
    of_peak: f64,
    vs_crate: Option<f64>,
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"))
}

fn fmt_median(xs: &mut [f64]) -> String {
    if xs.is_empty() {
        "-".to_string()
    } else {
        format!("{:.3}", median(xs))
    }
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Measures every peak variant; returns `(isa, GFLOP/s)` each.
fn measure_peaks(budget: &Budget) -> Vec<(Isa, f64)> {
    let variants = peak::variants();
    let mut fs: Vec<Box<dyn FnMut()>> = variants
        .iter()
        .map(|v| -> Box<dyn FnMut()> {
            let run = v.run;
            let iters = budget.peak_iters;
            Box::new(move || {
                black_box(run(black_box(iters)));
            })
        })
        .collect();
    let secs = time_interleaved(budget, &mut fs);
    variants
        .iter()
        .zip(secs)
        .map(|(v, s)| (v.isa, v.flops_per_iter * budget.peak_iters as f64 / s / 1e9))
        .collect()
}

fn main() {
    let wall = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not.
    let full = args.iter().any(|a| a == "--bench");
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let budget = if full { &FULL } else { &SMOKE };
    let out = &mut std::io::stdout().lock();

    let isas: Vec<Kernels> = Isa::ALL.into_iter().filter_map(for_isa).collect();
    let missing: Vec<&str> = Isa::ALL
        .into_iter()
        .filter(|isa| !isa.is_available())
        .map(Isa::name)
        .collect();
    let names: Vec<&str> = isas.iter().map(|k| k.isa.name()).collect();
    let _ = writeln!(out, "# kiln kernel benchmark on {}, 1 thread", cpu_name());
    if Flush::enabled() {
        let _ = writeln!(
            out,
            "# cold caches: every timed call after writing {} MiB (KILN_BENCH_COLD=1)",
            Flush::BYTES >> 20
        );
    }
    let _ = writeln!(
        out,
        "# isas run: {}; not available on this CPU: {}; portable only for cases <= {:.2} GFLOP",
        names.join(" "),
        if missing.is_empty() {
            "-".to_string()
        } else {
            missing.join(" ")
        },
        budget.portable_max_flops / 1e9
    );

    // What models use on this CPU: `best()`, as `kiln::isa()` reports it (honours `KILN_ISA`).
    let _ = writeln!(out, "DEFAULT isa={}", kiln_kernels::best().isa);
    // The peak: every SIMD variant; the largest is the denominator of every ratio.
    let peaks = measure_peaks(budget);
    let peak = peaks.iter().fold(0.0f64, |p, &(_, g)| p.max(g));
    for (isa, gflops) in &peaks {
        let _ = writeln!(
            out,
            "BENCH peak/fma isa={isa} gflops={gflops:.2} of_peak={:.3} vs_best_crate=-",
            gflops / peak
        );
    }
    let _ = writeln!(
        out,
        "PEAK gflops={peak:.2} (max of the register-only FMA loops above)"
    );
    let _ = out.flush();

    let cases: Vec<Case> = shapes::all()
        .into_iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f)))
        .collect();
    let cases: Vec<Case> = if budget.smallest_only {
        Family::ALL
            .into_iter()
            .filter_map(|f| {
                cases
                    .iter()
                    .filter(|c| c.family == f)
                    .min_by(|a, b| a.flops().total_cmp(&b.flops()))
                    .cloned()
            })
            .collect()
    } else {
        cases
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut crate_rows: Vec<(&str, Family, f64)> = Vec::new();
    let mut failures = 0;
    // The fastest peak loop also runs as a contender of every case, so each case's `of_peak`
    // divides by a peak sampled in the same rounds, under the same background load: on a
    // shared machine one peak measured at the start can be off by half (another process
    // compiling during those milliseconds), which would skew every ratio of the run.
    let top = peak::variants()
        .into_iter()
        .zip(&peaks)
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(v, _)| v)
        .expect("there is always a peak variant");
    let mut case_peaks: Vec<f64> = Vec::new();

    for (ci, case) in cases.iter().enumerate() {
        let flops = case.flops();
        let data = Data::new(case);
        let (out_len, scratch_len) = match case.op {
            Op::Gemm { m, n, .. } => (m * n, 0),
            Op::Conv(p, _) => (p.batch * p.c_out * p.out_h * p.out_w, p.scratch_len()),
            Op::Nchwc(p, _) => (nchwc::blocked_len(p.batch, p.c_out, p.out_h, p.out_w), 0),
            Op::NchwcWinograd(p, _) => (
                nchwc::blocked_len(p.batch, p.c_out, p.out_h, p.out_w),
                nchwc::winograd::scratch_len(&p),
            ),
            Op::Winograd(p, _) => (
                p.batch * p.c_out * p.out_h * p.out_w,
                p.winograd_scratch_len(),
            ),
            Op::Pool(p, _) => (p.batch * p.channels * p.out_h * p.out_w, 0),
            Op::Dense { n_out, .. } => (n_out, 0),
        };

        let mut contenders: Vec<Contender> = vec![Contender::Peak];
        if case.crate_gemm().is_some() {
            contenders.extend(refs::CRATES.map(|(name, f)| Contender::Crate(name, f)));
        }
        contenders.extend(
            isas.iter()
                .filter(|k| k.isa != Isa::Portable || flops <= budget.portable_max_flops)
                .map(|&k| Contender::Kiln(k)),
        );
        let nchw_scratch = match case.op {
            Op::Nchwc(p, _) => Some(p.scratch_len()),
            Op::NchwcWinograd(p, _) => Some(p.winograd_scratch_len()),
            _ => None,
        };
        if nchw_scratch.is_some() {
            contenders.extend(
                isas.iter()
                    .filter(|k| k.isa != Isa::Portable)
                    .map(|&k| Contender::Nchw(k)),
            );
        }
        let scratch_len = scratch_len.max(nchw_scratch.unwrap_or(0));
        let mut outs = vec![vec![0.0f32; out_len]; contenders.len()];
        let mut scratches = vec![vec![0.0f32; scratch_len]; contenders.len()];
        let secs = {
            let data = &data;
            let op = &case.op;
            let gemm = case.crate_gemm();
            let mut fs: Vec<Box<dyn FnMut() + '_>> = contenders
                .iter()
                .zip(outs.iter_mut())
                .zip(scratches.iter_mut())
                .map(|((c, out), scratch)| -> Box<dyn FnMut() + '_> {
                    match c {
                        Contender::Crate(_, f) => {
                            let (m, n, k) = gemm.expect("crates only run cases with a GEMM");
                            let (a, b) = data.gemm_operands();
                            Box::new(move || f(m, n, k, a, b, out))
                        }
                        Contender::Kiln(kernels) => {
                            Box::new(move || run(kernels, op, data, scratch, out))
                        }
                        Contender::Nchw(kernels) => {
                            let nchw = match *op {
                                Op::Nchwc(p, act) => Op::Conv(p, act),
                                Op::NchwcWinograd(p, act) => Op::Winograd(p, act),
                                _ => unreachable!("only blocked cases have NCHW contenders"),
                            };
                            Box::new(move || run(kernels, &nchw, data, scratch, out))
                        }
                        Contender::Peak => {
                            let (run, iters) = (top.run, budget.peak_iters);
                            Box::new(move || {
                                black_box(run(black_box(iters)));
                            })
                        }
                    }
                })
                .collect();
            time_interleaved(budget, &mut fs)
        };

        let peak = top.flops_per_iter * budget.peak_iters as f64 / secs[0] / 1e9;
        case_peaks.push(peak);
        let _ = writeln!(out, "PEAK {} gflops={peak:.2}", case.name);
        let mut best_crate: Option<f64> = None;
        for (c, s) in contenders.iter().zip(&secs) {
            if let Contender::Crate(name, _) = c {
                let gflops = flops / s / 1e9;
                best_crate = Some(best_crate.map_or(gflops, |b| b.max(gflops)));
                crate_rows.push((name, case.family, gflops / peak));
                let _ = writeln!(
                    out,
                    "REF {} crate={name} gflops={gflops:.2} of_peak={:.3}",
                    case.name,
                    gflops / peak
                );
            }
        }

        // GEMMs are checked against the first crate's (matrixmultiply's) output, Winograd
        // against the direct convolution, other convolutions against the portable kernel's:
        // the benchmarked one if it ran, else one untimed call.
        let first_crate = contenders
            .iter()
            .position(|c| matches!(c, Contender::Crate(..)));
        let reference: Vec<f32> = match (&case.op, first_crate) {
            (Op::Gemm { .. }, Some(i)) => outs[i].clone(),
            // Winograd against the direct convolution, not against itself.
            (&Op::Winograd(p, act), _) => {
                let mut r = vec![0.0f32; out_len];
                let mut s = vec![0.0; p.scratch_len()];
                run(&PORTABLE, &Op::Conv(p, act), &data, &mut s, &mut r);
                r
            }
            // The blocked Winograd against the blocked direct convolution.
            (&Op::NchwcWinograd(p, act), _) => {
                let Data::Conv {
                    nchwc_input,
                    weight,
                    bias,
                    ..
                } = &data
                else {
                    unreachable!("convolution cases hold convolution data")
                };
                let packed = nchwc_packed(&p, weight);
                let mut r = vec![0.0f32; out_len];
                (PORTABLE.conv2d_nchwc)(&p, nchwc_input, &packed, Some(bias), None, act, &mut r);
                r
            }
            _ => match contenders
                .iter()
                .position(|c| matches!(c, Contender::Kiln(k) if k.isa == Isa::Portable))
            {
                Some(i) => outs[i].clone(),
                None => {
                    let mut r = vec![0.0f32; out_len];
                    run(
                        &PORTABLE,
                        &case.op,
                        &data,
                        &mut vec![0.0; scratch_len],
                        &mut r,
                    );
                    r
                }
            },
        };

        for (c, s) in contenders.iter().zip(&secs) {
            let Contender::Nchw(kernels) = c else {
                continue;
            };
            let blocked = contenders
                .iter()
                .zip(&secs)
                .find(|(b, _)| matches!(b, Contender::Kiln(k) if k.isa == kernels.isa));
            if let Some((_, blocked_s)) = blocked {
                let _ = writeln!(
                    out,
                    "NCHWC {} isa={} nchw_of_peak={:.3} blocked_over_nchw={:.3}",
                    case.name,
                    kernels.isa,
                    flops / s / 1e9 / peak,
                    s / blocked_s
                );
            }
        }
        for ((c, s), result) in contenders.iter().zip(&secs).zip(&outs) {
            let Contender::Kiln(kernels) = c else {
                continue;
            };
            let gflops = flops / s / 1e9;
            let vs_crate = best_crate.map(|b| gflops / b);
            let _ = writeln!(
                out,
                "BENCH {} isa={} gflops={gflops:.2} of_peak={:.3} vs_best_crate={}",
                case.name,
                kernels.isa,
                gflops / peak,
                fmt_opt(vs_crate)
            );
            if let Some((err, scale)) = mismatch(result, &reference) {
                failures += 1;
                let _ = writeln!(
                    out,
                    "CHECK FAILED {} isa={}: max |diff| {err:e} against outputs up to {scale:e}",
                    case.name, kernels.isa
                );
            }
            rows.push(Row {
                case: ci,
                family: case.family,
                isa: kernels.isa,
                gflops,
                of_peak: gflops / peak,
                vs_crate,
            });
        }
        let _ = out.flush();
    }

    // Summary: medians per family, per ISA and per crate.
    for kernels in &isas {
        let isa = kernels.isa;
        let mut of_peak = String::new();
        let mut vs = String::new();
        for family in Family::ALL {
            let sel = || rows.iter().filter(|r| r.isa == isa && r.family == family);
            let mut p: Vec<f64> = sel().map(|r| r.of_peak).collect();
            let mut v: Vec<f64> = sel().filter_map(|r| r.vs_crate).collect();
            of_peak += &format!(" {}={}", family.name(), fmt_median(&mut p));
            if !matches!(family, Family::MobilenetDw | Family::Pool) {
                vs += &format!(" {}={}", family.name(), fmt_median(&mut v));
            }
        }
        let _ = writeln!(
            out,
            "SUMMARY isa={isa} median_of_peak:{of_peak} median_vs_best_crate:{vs}"
        );
    }
    for (name, _) in refs::CRATES {
        let mut of_peak = String::new();
        for family in [Family::Gemm, Family::ResnetGemm] {
            let mut p: Vec<f64> = crate_rows
                .iter()
                .filter(|r| r.0 == name && r.1 == family)
                .map(|r| r.2)
                .collect();
            of_peak += &format!(" {}={}", family.name(), fmt_median(&mut p));
        }
        let _ = writeln!(out, "SUMMARY crate={name} median_of_peak:{of_peak}");
    }
    // AVX2 / AVX-512 per case where both ran; the median of those ratios.
    let mut ratios: Vec<f64> = rows
        .iter()
        .filter(|r| r.isa == Isa::Avx2)
        .filter_map(|r2| {
            rows.iter()
                .find(|r| r.isa == Isa::Avx512 && r.case == r2.case)
                .map(|r5| r2.gflops / r5.gflops)
        })
        .collect();
    let ratio = if ratios.is_empty() {
        "- (needs both avx2 and avx512)".to_string()
    } else {
        fmt_median(&mut ratios)
    };
    // The peak again: if the machine got busier or quieter during the run, this shows it.
    let end_peak = measure_peaks(budget)
        .iter()
        .fold(0.0f64, |p, &(_, g)| p.max(g));
    let _ = writeln!(
        out,
        "SUMMARY avx2_over_avx512={ratio} peak_gflops={peak:.2} median_case_peak_gflops={} \
         peak_gflops_at_end={end_peak:.2} \
         checks_failed={failures} wall_s={:.1}",
        fmt_median(&mut case_peaks),
        wall.elapsed().as_secs_f64()
    );
    if failures > 0 {
        std::process::exit(1);
    }
}
