//! The handful of vector operations the GEMM and convolution micro-kernels are written in,
//! so that one generic kernel body serves AVX2 (8 lanes), AVX-512 (16 lanes) and, in tests, a
//! scalar emulation of either width.
//!
//! Why generic: this crate's CI machine may lack AVX-512, and a kernel that never runs is a
//! kernel nobody tested. With the loops, tails and epilogues written once against [`Lanes`],
//! the AVX-512 build differs from the tested AVX2 build only in the one-line intrinsic
//! wrappers of its `Lanes` impl, and the 16-lane logic itself is tested through [`Emu`].
//!
//! Soundness: an implementation is a zero-sized token whose only constructor is `unsafe`
//! ("the CPU has these features"). Every method is `#[inline(always)]`, so it is compiled
//! inside the `#[target_feature]` entry point that built the token; that is where the
//! intrinsics inline. Methods that touch memory are `unsafe` and state their pointer
//! contract; the others are safe because the token proves the features.

use core::arch::x86_64::*;

use crate::arch::x86_64::simd::vector::{Avx2Fma, Closure, Simd};
use crate::Activation;

/// Vector operations on `f32` lanes.
pub(crate) trait Lanes: Copy {
    /// A vector of `N` floats.
    type V: Copy;
    /// Lanes per vector.
    const N: usize;

    fn zero(self) -> Self::V;
    fn splat(self, x: f32) -> Self::V;
    /// `a * b + c`, one rounding.
    fn fma(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a > b ? a : b` per lane (so `b` on NaN or equal values), the x86 `max` rule.
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a < b ? a : b` per lane, the x86 `min` rule.
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    /// `x < y ? a : b` per lane, with the ordered (false on NaN) comparison.
    fn select_lt(self, x: Self::V, y: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// Sum of the lanes (in any order).
    fn hsum(self, v: Self::V) -> f32;

    /// Loads `N` floats.
    ///
    /// # Safety
    ///
    /// `p..p + N` is readable.
    unsafe fn load(self, p: *const f32) -> Self::V;
    /// Loads `N` floats from an address aligned to the vector size.
    ///
    /// # Safety
    ///
    /// `p..p + N` is readable and `p` is aligned to `4 N` bytes.
    // Read by the Lanes tile, which only the emulated tests run now (the ISAs' tiles load B
    // in assembly, `kloop`).
    #[cfg_attr(not(test), allow(dead_code))]
    unsafe fn load_aligned(self, p: *const f32) -> Self::V;
    /// Loads the first `n < N` floats and zeros the other lanes, touching only those `n`.
    ///
    /// # Safety
    ///
    /// `p..p + n` is readable.
    unsafe fn load_first(self, p: *const f32, n: usize) -> Self::V;
    /// Loads `2N` floats and returns the even-indexed ones (`p[0], p[2], .., p[2N - 2]`): a
    /// stride-2 gather, for strided convolutions.
    ///
    /// # Safety
    ///
    /// `p..p + 2N` is readable.
    unsafe fn load_even(self, p: *const f32) -> Self::V;
    /// The first `n <= N` lanes of [`load_even`](Self::load_even) (`p[0], p[2], ..,
    /// p[2n - 2]`), the others zero, reading only `p[0..2n - 1]`: the ragged end of a
    /// stride-2 gather.
    ///
    /// # Safety
    ///
    /// `p..p + 2n - 1` is readable.
    unsafe fn load_even_first(self, p: *const f32, n: usize) -> Self::V;
    /// Loads one float into every lane.
    ///
    /// # Safety
    ///
    /// `p` is readable.
    unsafe fn broadcast(self, p: *const f32) -> Self::V;
    /// Stores `N` floats.
    ///
    /// # Safety
    ///
    /// `p..p + N` is writable.
    unsafe fn store(self, p: *mut f32, v: Self::V);
    /// Hints that the cache line at `p` will be read soon; never faults.
    fn prefetch(self, p: *const f32);
    /// Runs `f(self)` inside a function compiled with this ISA's features. A closure does
    /// not inherit the features of the function it is written in when that function only
    /// inherits them by being inlined (`inline(always)` into a `#[target_feature]` entry),
    /// so the vector methods a closure calls (a task given to `Parallel::run`) compiled to
    /// calls of the intrinsics' out-of-line copies; inside this they inline.
    fn with_features<F: FnOnce(Self)>(self, f: F);
}

/// The activations computed in registers, with [`Activation::apply`]'s semantics exactly
/// (NaN propagation, `-0` preserved, the `min` bound winning when `min > max`). Sigmoid and
/// tanh pass through unchanged: the caller applies them per element after storing.
#[inline(always)]
pub(crate) fn act_vec<S: Lanes>(s: S, x: S::V, act: Activation) -> S::V {
    match act {
        // `max(0, x)` is `0 > x ? 0 : x`: NaN and -0 come through as `x`, like `apply`'s
        // `x < 0 ? 0 : x`.
        Activation::Relu => s.max(s.zero(), x),
        Activation::Clip { min, max } => {
            let (lo, hi) = (s.splat(min), s.splat(max));
            if min <= max {
                // `lo > x ? lo : x`, then `hi < _ ? hi : _`: with ordered bounds that is
                // `apply`'s `x < min ? min : (x > max ? max : x)`, NaN kept.
                s.min(hi, s.max(lo, x))
            } else {
                // `x > max ? max : x` first, then `x < min ? min : _` on top, so the `min`
                // test wins as in `apply`.
                let capped = s.select_lt(hi, x, hi, x);
                s.select_lt(x, lo, lo, capped)
            }
        }
        Activation::LeakyRelu { alpha } => s.select_lt(x, s.zero(), s.mul(x, s.splat(alpha)), x),
        Activation::None | Activation::Sigmoid | Activation::Tanh => x,
    }
}

/// Whether `act` is left to a scalar pass with [`Activation::apply`] after the store.
#[inline(always)]
pub(crate) fn scalar_act(act: Activation) -> bool {
    matches!(act, Activation::Sigmoid | Activation::Tanh)
}

/// The AVX2 + FMA token: 8 lanes in a `__m256`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// # Safety
    ///
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        Avx2(())
    }
}

/// Lane mask for the first `n` lanes of a `__m256`.
#[inline(always)]
fn mask8(_: Avx2, n: usize) -> __m256i {
    // SAFETY: an `Avx2` token exists, so the CPU has AVX2 and FMA (this is also the
    // argument for the intrinsics in every method below); the methods are inlined into
    // `#[target_feature]` code.
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

impl Lanes for Avx2 {
    type V = __m256;
    const N: usize = 8;

    #[inline(always)]
    fn zero(self) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn fma(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn select_lt(self, x: __m256, y: __m256, a: __m256, b: __m256) -> __m256 {
        // SAFETY: see `mask8`.
        unsafe { _mm256_blendv_ps(b, a, _mm256_cmp_ps::<_CMP_LT_OQ>(x, y)) }
    }
    #[inline(always)]
    fn hsum(self, v: __m256) -> f32 {
        // SAFETY: see `mask8`.
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_movehdup_ps(s));
            _mm_cvtss_f32(s)
        }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees the range; features as in `mask8`.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_aligned(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees the range and alignment; features as in `mask8`.
        unsafe { _mm256_load_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_first(self, p: *const f32, n: usize) -> __m256 {
        // SAFETY: the masked load touches only the first `n` lanes, which the caller
        // guarantees are readable; features as in `mask8`.
        unsafe { _mm256_maskload_ps(p, mask8(self, n)) }
    }
    #[inline(always)]
    unsafe fn load_even(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees the 16 floats; features as in `mask8`.
        unsafe {
            let (lo, hi) = (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
            // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the 64-bit pairs in order 0 2 1 3.
            let even = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
            _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
                even,
            )))
        }
    }
    #[inline(always)]
    unsafe fn load_even_first(self, p: *const f32, n: usize) -> __m256 {
        let len = (2 * n).saturating_sub(1);
        // SAFETY: the masked loads touch only `p[0..len]`, which the caller guarantees are
        // readable (the second pointer is formed with `wrapping_add`, and with an empty mask
        // nothing is read through it); features as in `mask8`.
        unsafe {
            let lo = _mm256_maskload_ps(p, mask8(self, len.min(8)));
            let hi = _mm256_maskload_ps(p.wrapping_add(8), mask8(self, len.saturating_sub(8)));
            // As in `load_even`. Lane `i >= n` picks float `2i >= 2n > len`, never loaded, so
            // it is zero.
            let even = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
            _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
                even,
            )))
        }
    }
    #[inline(always)]
    unsafe fn broadcast(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees `p` is readable; features as in `mask8`.
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        // SAFETY: the caller guarantees the range; features as in `mask8`.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        // SAFETY: SSE is baseline on x86_64 and a prefetch never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    fn with_features<F: FnOnce(Self)>(self, f: F) {
        // SAFETY: an `Avx2` token exists only if the CPU has AVX2 and FMA.
        let s = unsafe { Avx2Fma::new_unchecked() };
        s.vectorize(Closure(|_| f(self)))
    }
}

/// A scalar emulation of an `N`-lane vector unit with x86 semantics, so the generic kernels
/// can be tested at the AVX-512 width on any machine.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Emu<const N: usize>;

#[cfg(test)]
impl<const N: usize> Lanes for Emu<N> {
    type V = [f32; N];
    const N: usize = N;

    fn zero(self) -> [f32; N] {
        [0.0; N]
    }
    fn splat(self, x: f32) -> [f32; N] {
        [x; N]
    }
    fn fma(self, a: [f32; N], b: [f32; N], c: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
    }
    fn add(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| a[i] + b[i])
    }
    fn mul(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| a[i] * b[i])
    }
    fn max(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| if a[i] > b[i] { a[i] } else { b[i] })
    }
    fn min(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| if a[i] < b[i] { a[i] } else { b[i] })
    }
    fn select_lt(self, x: [f32; N], y: [f32; N], a: [f32; N], b: [f32; N]) -> [f32; N] {
        core::array::from_fn(|i| if x[i] < y[i] { a[i] } else { b[i] })
    }
    fn hsum(self, v: [f32; N]) -> f32 {
        v.iter().sum()
    }
    unsafe fn load(self, p: *const f32) -> [f32; N] {
        // SAFETY: the caller guarantees the range.
        core::array::from_fn(|i| unsafe { *p.add(i) })
    }
    unsafe fn load_aligned(self, p: *const f32) -> [f32; N] {
        assert!(
            (p.cast::<u8>() as usize).is_multiple_of(4 * N),
            "misaligned aligned load"
        );
        // SAFETY: the caller guarantees the range.
        unsafe { self.load(p) }
    }
    unsafe fn load_first(self, p: *const f32, n: usize) -> [f32; N] {
        assert!(n < N, "load_first of a whole vector");
        // SAFETY: the caller guarantees the first `n` are readable; no others are read.
        core::array::from_fn(|i| if i < n { unsafe { *p.add(i) } } else { 0.0 })
    }
    unsafe fn load_even(self, p: *const f32) -> [f32; N] {
        // SAFETY: the caller guarantees `2N` floats; only the even ones are read.
        core::array::from_fn(|i| unsafe { *p.add(2 * i) })
    }
    unsafe fn load_even_first(self, p: *const f32, n: usize) -> [f32; N] {
        assert!(n <= N, "load_even_first of more than a vector");
        // SAFETY: the caller guarantees `p[0..2n - 1]`; only the even ones below it are read.
        core::array::from_fn(|i| if i < n { unsafe { *p.add(2 * i) } } else { 0.0 })
    }
    unsafe fn broadcast(self, p: *const f32) -> [f32; N] {
        // SAFETY: the caller guarantees `p` is readable.
        [unsafe { *p }; N]
    }
    unsafe fn store(self, p: *mut f32, v: [f32; N]) {
        for (i, x) in v.into_iter().enumerate() {
            // SAFETY: the caller guarantees the range.
            unsafe { *p.add(i) = x };
        }
    }
    fn prefetch(self, _: *const f32) {}
    fn with_features<F: FnOnce(Self)>(self, f: F) {
        f(self)
    }
}
