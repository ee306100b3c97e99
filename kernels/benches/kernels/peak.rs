//! The machine's single-thread f32 FMA peak, measured with register-only loops.
//!
//! Every kernel line of the benchmark is reported as a fraction of this number, so it must be
//! what the core can really sustain, not a datasheet figure: on a shared or throttled machine
//! the datasheet would flatter the kernels' ratios.
//!
//! Sketch of each loop: `ACC` independent vector accumulators, each updated as
//! `acc = acc * a + b` once per iteration. An FMA has a latency of about 4 cycles and modern
//! cores issue two per cycle, so at least 8 chains must be in flight to keep both pipes busy;
//! the loops carry 12 (AVX2, 16 registers) or 16 (AVX-512 and NEON, 32 registers), which covers
//! latencies up to 6 and leaves registers for `a` and `b`. With `a` just below 1 and `b` small
//! every accumulator stays at its fixed point 1.0, so no value ever overflows or goes
//! subnormal (either would slow the FMA unit down). Summing all lanes at the end, through
//! `black_box`, keeps the compiler from dropping or narrowing any of the work.
//!
//! A variant only runs when the kernel table's own detection ([`Isa::is_available`]) says the
//! CPU has its ISA, so the peak never executes an instruction the machine lacks.

use std::hint::black_box;

use kiln_kernels::Isa;

/// One way to measure the peak: `run(iters)` performs `iters * flops_per_iter` flops.
pub struct Variant {
    /// The ISA whose instructions the loop uses.
    pub isa: Isa,
    /// Flops one iteration of the loop performs (2 per FMA lane).
    pub flops_per_iter: f64,
    /// The loop. Returns a value derived from every accumulator so nothing is optimised out.
    pub run: fn(u64) -> f32,
}

/// The variants this CPU can run, weakest first. If no SIMD ISA is available, a plain Rust loop
/// stands in so the ratios still have a denominator.
pub fn variants() -> Vec<Variant> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    out.extend(x86::variants());
    #[cfg(target_arch = "aarch64")]
    out.extend(neon::variants());
    if out.is_empty() {
        out.push(Variant {
            isa: Isa::Portable,
            flops_per_iter: (2 * PORTABLE_ACC) as f64,
            run: portable_loop,
        });
    }
    out
}

/// Scalar accumulators of the portable stand-in; LLVM turns them into whatever baseline SIMD
/// the target has (SSE2 on x86_64).
const PORTABLE_ACC: usize = 64;

/// The portable stand-in: multiply and add written separately, since `f32::mul_add` without a
/// hardware FMA is a slow library call.
fn portable_loop(iters: u64) -> f32 {
    let a = black_box(0.999_9f32);
    let b = black_box(1e-4f32);
    let mut acc = [black_box(1.0f32); PORTABLE_ACC];
    for _ in 0..black_box(iters) {
        for x in &mut acc {
            *x = *x * a + b;
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    use kiln_kernels::Isa;

    use super::Variant;

    /// AVX2 accumulators: 12 of the 16 ymm registers.
    const ACC_AVX2: usize = 12;
    /// AVX-512 accumulators: 16 of the 32 zmm registers.
    const ACC_AVX512: usize = 16;

    pub fn variants() -> Vec<Variant> {
        let mut out = Vec::new();
        if Isa::Avx2.is_available() {
            out.push(Variant {
                isa: Isa::Avx2,
                flops_per_iter: (ACC_AVX2 * 8 * 2) as f64,
                run: avx2,
            });
        }
        if Isa::Avx512.is_available() {
            out.push(Variant {
                isa: Isa::Avx512,
                flops_per_iter: (ACC_AVX512 * 16 * 2) as f64,
                run: avx512,
            });
        }
        out
    }

    fn avx2(iters: u64) -> f32 {
        // SAFETY: only handed out by `variants` after `Isa::Avx2.is_available()` detected
        // AVX2 and FMA.
        unsafe { avx2_loop(iters) }
    }

    fn avx512(iters: u64) -> f32 {
        // SAFETY: only handed out by `variants` after `Isa::Avx512.is_available()` detected
        // AVX-512F (with AVX2 and FMA).
        unsafe { avx512_loop(iters) }
    }

    /// # Safety
    ///
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_loop(iters: u64) -> f32 {
        let a = _mm256_set1_ps(black_box(0.999_9));
        let b = _mm256_set1_ps(black_box(1e-4));
        let mut acc = [_mm256_set1_ps(black_box(1.0)); ACC_AVX2];
        for _ in 0..black_box(iters) {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut sum = _mm256_setzero_ps();
        for x in acc {
            sum = _mm256_add_ps(sum, x);
        }
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds exactly the 8 f32 an unaligned 256-bit store writes.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }

    /// # Safety
    ///
    /// The CPU must support AVX-512F.
    // The AVX-512 intrinsics are stable since Rust 1.89, after the workspace's declared
    // rust-version (1.88); the toolchain in use (1.95) has them, and kiln's own AVX-512
    // kernels need the same.
    #[allow(clippy::incompatible_msrv)]
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_loop(iters: u64) -> f32 {
        let a = _mm512_set1_ps(black_box(0.999_9));
        let b = _mm512_set1_ps(black_box(1e-4));
        let mut acc = [_mm512_set1_ps(black_box(1.0)); ACC_AVX512];
        for _ in 0..black_box(iters) {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let mut sum = _mm512_setzero_ps();
        for x in acc {
            sum = _mm512_add_ps(sum, x);
        }
        let mut lanes = [0f32; 16];
        // SAFETY: `lanes` holds exactly the 16 f32 an unaligned 512-bit store writes.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;
    use std::hint::black_box;

    use kiln_kernels::Isa;

    use super::Variant;

    /// NEON accumulators: 16 of the 32 vector registers (some cores have four FMA pipes).
    const ACC: usize = 16;

    pub fn variants() -> Vec<Variant> {
        if !Isa::Neon.is_available() {
            return Vec::new();
        }
        vec![Variant {
            isa: Isa::Neon,
            flops_per_iter: (ACC * 4 * 2) as f64,
            run: neon,
        }]
    }

    fn neon(iters: u64) -> f32 {
        // SAFETY: only handed out by `variants` after `Isa::Neon.is_available()` detected NEON.
        unsafe { neon_loop(iters) }
    }

    /// # Safety
    ///
    /// The CPU must support NEON.
    #[target_feature(enable = "neon")]
    unsafe fn neon_loop(iters: u64) -> f32 {
        let a = vdupq_n_f32(black_box(0.999_9));
        let b = vdupq_n_f32(black_box(1e-4));
        let mut acc = [vdupq_n_f32(black_box(1.0)); ACC];
        for _ in 0..black_box(iters) {
            for x in &mut acc {
                // acc + acc * a would not stay bounded; b + acc * a converges to 1.
                *x = vfmaq_f32(b, *x, a);
            }
        }
        let mut sum = vdupq_n_f32(0.0);
        for x in acc {
            sum = vaddq_f32(sum, x);
        }
        vaddvq_f32(sum)
    }
}
