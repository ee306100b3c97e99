//! Test-only: a 16-lane [`Simd`] made of two AVX2 vectors.
//!
//! The AVX-512 kernels are the generic kernels instantiated with 16 lanes. A machine without
//! AVX-512 cannot run them, but it can run the same generic code at 16 lanes through this
//! emulation, which covers every lane-count-dependent path (chunking, overlap, masks of up to
//! 16 lanes, the deinterleave order) and leaves only the one-instruction mapping in
//! `vector.rs`'s `Avx512F` impl untested there.

use super::vector::{Avx2Fma, Job, LanesJob, Simd};
use core::arch::x86_64::__m256;

/// Sixteen lanes as `[low 8, high 8]`, carrying the AVX2 token (so it exists only where
/// AVX2 and FMA were detected).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Emu16(pub(crate) Avx2Fma);

type V2 = [__m256; 2];

impl Emu16 {
    #[inline(always)]
    fn map(self, a: V2, f: impl Fn(Avx2Fma, __m256) -> __m256) -> V2 {
        [f(self.0, a[0]), f(self.0, a[1])]
    }
    #[inline(always)]
    fn zip(self, a: V2, b: V2, f: impl Fn(Avx2Fma, __m256, __m256) -> __m256) -> V2 {
        [f(self.0, a[0], b[0]), f(self.0, a[1], b[1])]
    }
}

impl Simd for Emu16 {
    type V = V2;
    type M = V2;
    type I = [u32; 16];
    const LANES: usize = 16;
    // As `Avx512F`, whose paths this stands in for.
    const ONE_INSTRUCTION_PERMUTE2: bool = true;

    fn vectorize<J: Job<Self>>(self, job: J) -> J::Output {
        /// # Safety
        ///
        /// The CPU must support AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        unsafe fn run<J: Job<Emu16>>(s: Emu16, job: J) -> J::Output {
            job.run(s)
        }
        // SAFETY: the wrapped AVX2 token proves the features.
        unsafe { run(self, job) }
    }

    fn splat(self, x: f32) -> V2 {
        [self.0.splat(x); 2]
    }
    fn zero(self) -> V2 {
        [self.0.zero(); 2]
    }
    unsafe fn load_ptr(self, p: *const f32) -> V2 {
        // SAFETY: the caller guarantees 16 readable elements.
        unsafe { [self.0.load_ptr(p), self.0.load_ptr(p.add(8))] }
    }
    unsafe fn store_ptr(self, p: *mut f32, v: V2) {
        // SAFETY: the caller guarantees 16 writable elements.
        unsafe {
            self.0.store_ptr(p, v[0]);
            self.0.store_ptr(p.add(8), v[1]);
        }
    }
    unsafe fn load_masked_ptr(self, p: *const f32, m: V2) -> V2 {
        // SAFETY: the caller guarantees the selected lanes are readable; each half reads
        // only its own selected lanes.
        unsafe {
            [
                self.0.load_masked_ptr(p, m[0]),
                self.0.load_masked_ptr(p.wrapping_add(8), m[1]),
            ]
        }
    }
    unsafe fn store_masked_ptr(self, p: *mut f32, m: V2, v: V2) {
        // SAFETY: as for `load_masked_ptr`.
        unsafe {
            self.0.store_masked_ptr(p, m[0], v[0]);
            self.0.store_masked_ptr(p.wrapping_add(8), m[1], v[1]);
        }
    }
    fn mask_range(self, lo: usize, hi: usize) -> V2 {
        let half = |base: usize| {
            let l = lo.saturating_sub(base).min(8);
            let h = hi.saturating_sub(base).min(8).max(l);
            self.0.mask_range(l, h)
        };
        [half(0), half(8)]
    }
    fn add(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.add(x, y))
    }
    fn sub(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.sub(x, y))
    }
    fn mul(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.mul(x, y))
    }
    fn div(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.div(x, y))
    }
    fn fmadd(self, a: V2, b: V2, c: V2) -> V2 {
        [
            self.0.fmadd(a[0], b[0], c[0]),
            self.0.fmadd(a[1], b[1], c[1]),
        ]
    }
    fn max(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.max(x, y))
    }
    fn min(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.min(x, y))
    }
    fn abs(self, a: V2) -> V2 {
        self.map(a, |s, x| s.abs(x))
    }
    fn or_sign(self, mag: V2, sign: V2) -> V2 {
        self.zip(mag, sign, |s, x, y| s.or_sign(x, y))
    }
    fn round(self, a: V2) -> V2 {
        self.map(a, |s, x| s.round(x))
    }
    fn pow2(self, k: V2) -> V2 {
        self.map(k, |s, x| s.pow2(x))
    }
    fn lt(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.lt(x, y))
    }
    fn gt(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.gt(x, y))
    }
    fn is_nan(self, a: V2) -> V2 {
        self.map(a, |s, x| s.is_nan(x))
    }
    fn unordered(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.unordered(x, y))
    }
    fn mask_or(self, a: V2, b: V2) -> V2 {
        self.zip(a, b, |s, x, y| s.mask_or(x, y))
    }
    fn mask_any(self, m: V2) -> bool {
        self.0.mask_any(self.0.mask_or(m[0], m[1]))
    }
    fn select(self, m: V2, t: V2, f: V2) -> V2 {
        [
            self.0.select(m[0], t[0], f[0]),
            self.0.select(m[1], t[1], f[1]),
        ]
    }
    fn reduce_add(self, v: V2) -> f32 {
        self.0.reduce_add(self.0.add(v[0], v[1]))
    }
    fn reduce_max(self, v: V2) -> f32 {
        self.0.reduce_max(self.0.max(v[0], v[1]))
    }
    fn deinterleave(self, a: V2, b: V2) -> (V2, V2) {
        // The 32 elements are a[0] a[1] b[0] b[1]: the evens of `a` then those of `b`, each
        // half in the AVX2 order, which `unpermute` undoes half by half.
        let (ea, oa) = self.0.deinterleave(a[0], a[1]);
        let (eb, ob) = self.0.deinterleave(b[0], b[1]);
        ([ea, eb], [oa, ob])
    }
    fn unpermute(self, v: V2) -> V2 {
        self.map(v, |s, x| s.unpermute(x))
    }
    fn shift_in(self, lo: V2, hi: V2) -> V2 {
        [self.0.shift_in(lo[0], lo[1]), self.0.shift_in(lo[1], hi[0])]
    }
    fn indices(self, idx: &[u32; 16]) -> [u32; 16] {
        *idx
    }
    fn permute2(self, i: [u32; 16], a: V2, b: V2) -> V2 {
        let mut src = [0.0f32; 32];
        for (k, v) in [a[0], a[1], b[0], b[1]].into_iter().enumerate() {
            self.0.store(&mut src[8 * k..], v);
        }
        let out: [f32; 16] = core::array::from_fn(|j| src[i[j] as usize]);
        [self.0.load(&out), self.0.load(&out[8..])]
    }
    fn with_lanes<J: LanesJob<Self>>(self, job: J) -> J::Output {
        job.run::<16>(self)
    }
    fn avx2(self) -> Avx2Fma {
        self.0
    }
    fn transpose(self, rows: &mut [V2]) {
        // Four 8x8 blocks: [[a, b], [c, d]] becomes [[a', c'], [b', d']].
        let rows: &mut [V2; 16] = rows.try_into().expect("transpose: 16 rows");
        let mut blocks: [[__m256; 8]; 4] =
            core::array::from_fn(|q| core::array::from_fn(|i| rows[8 * (q / 2) + i][q % 2]));
        for b in &mut blocks {
            self.0.transpose(b);
        }
        for i in 0..8 {
            rows[i] = [blocks[0][i], blocks[2][i]];
            rows[8 + i] = [blocks[1][i], blocks[3][i]];
        }
    }
}
