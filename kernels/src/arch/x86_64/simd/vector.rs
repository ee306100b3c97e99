//! The lane-width abstraction the x86_64 depthwise, element-wise, normalisation and pooling
//! kernels are written against: one trait, [`Simd`], implemented by a zero-sized *token* per
//! instruction set ([`Avx2Fma`] with 8 lanes, [`Avx512F`] with 16).
//!
//! Why a token: the kernels are generic functions marked `#[inline(always)]` and instantiated
//! inside one `#[target_feature]` entry point per ISA, so after inlining every intrinsic is
//! compiled with the entry point's features (memchr's `arch/generic` works the same way). A
//! token can only be made by an `unsafe` constructor whose contract is "the CPU has these
//! features", so owning one proves it, and the register-only methods can be safe. Methods that
//! dereference raw pointers stay `unsafe`; the slice-based ones check lengths.
//!
//! Semantics the kernels rely on, identical for both ISAs:
//!
//! * [`Simd::max`]`(a, b)` is `if a > b { a } else { b }` and [`Simd::min`]`(a, b)` is
//!   `if a < b { a } else { b }`, lane-wise: exactly x86's `maxps`/`minps`, which return the
//!   second operand when either is NaN. Callers choose the operand order to get the NaN
//!   behaviour they need.
//! * Masks from [`Simd::mask_range`] select lanes `lo..hi`; masked loads never touch memory
//!   outside the selected lanes and fill the others with `0.0`.
//! * [`Simd::deinterleave`] returns the even and odd elements of two consecutive vectors in an
//!   ISA-specific lane order `P`; [`Simd::unpermute`] maps a vector in order `P` back to memory
//!   order. Everything lane-wise in between does not care about the order.
//!
//! Only instructions of the detected features are used: AVX, AVX2 and FMA for [`Avx2Fma`];
//! AVX-512F (plus those) for [`Avx512F`] — no AVX-512DQ/VL/BW, so e.g. bitwise float operations
//! go through the integer `_mm512_*_si512` forms.

use core::arch::x86_64::*;

/// `[f(0), f(1), .., f(N - 1)]`, for arrays of vectors, masks or index vectors built with the
/// token's methods. `core::array::from_fn` goes through enough layers (`try_from_fn`, its
/// `Wrapped` adaptor) that LLVM left some of them out of line, and a closure compiled out of
/// line has none of the `#[target_feature]` entry point's features: every intrinsic in it
/// became a call (AMD EPYC Zen 4 build of 2026-11-25: masks, splats and index loads of the
/// small-plane depthwise and pooling kernels, the pooling's per-row divisors). Here the
/// closure is called from a plain loop in this `inline(always)` function, which LLVM inlines
/// with it; `.ci/check-intrinsics` checks that no kernel calls an intrinsic.
#[inline(always)]
pub(crate) fn array<T, const N: usize>(mut f: impl FnMut(usize) -> T) -> [T; N] {
    let mut a = [const { core::mem::MaybeUninit::<T>::uninit() }; N];
    for (i, x) in a.iter_mut().enumerate() {
        x.write(f(i));
    }
    // SAFETY: every element was written above; `[MaybeUninit<T>; N]` and `[T; N]` have the
    // same layout.
    unsafe { core::mem::transmute_copy(&a) }
}

/// A piece of kernel work, generic over the ISA, that [`Simd::vectorize`] runs inside a
/// function of its own compiled with the ISA's features.
pub(crate) trait Job<S: Simd> {
    type Output;
    /// The work; implementations are `#[inline(always)]` so that all of it lands in the
    /// `vectorize` function.
    fn run(self, s: S) -> Self::Output;
}

/// A closure as a [`Job`]: what `Lanes::with_features`
/// runs through [`Simd::vectorize`]'s trampoline.
pub(crate) struct Closure<F>(pub(crate) F);

impl<S: Simd, R, F: FnOnce(S) -> R> Job<S> for Closure<F> {
    type Output = R;
    #[inline(always)]
    fn run(self, s: S) -> R {
        (self.0)(s)
    }
}

/// The operations the kernels need on a vector of `f32` lanes. See the module docs.
/// A computation that needs the lane count as a constant: see [`Simd::with_lanes`].
pub(crate) trait LanesJob<S: Simd> {
    type Output;
    /// Runs with `L == S::LANES`.
    fn run<const L: usize>(self, s: S) -> Self::Output;
}

pub(crate) trait Simd: Copy {
    /// A vector of [`LANES`](Self::LANES) `f32`.
    type V: Copy;
    /// A lane mask.
    type M: Copy;
    /// Lane indices for [`permute2`](Self::permute2).
    type I: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// Whether [`permute2`](Self::permute2) is one instruction (it is four with AVX2).
    const ONE_INSTRUCTION_PERMUTE2: bool;

    /// Runs `job` in a separate, never-inlined function compiled with this ISA's features.
    ///
    /// Everything else here is inlined into one `#[target_feature]` entry point per table
    /// entry. A kernel with many large unrolled variants (depthwise) splits itself into jobs
    /// so that no single function grows to tens of thousands of instructions, which costs
    /// LLVM minutes of compile time and the register allocator its quality.
    fn vectorize<J: Job<Self>>(self, job: J) -> J::Output;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::V;
    /// Every lane `0.0`.
    fn zero(self) -> Self::V;

    /// Loads `LANES` elements.
    ///
    /// # Safety
    ///
    /// `p..p + LANES` must be valid for reads.
    unsafe fn load_ptr(self, p: *const f32) -> Self::V;
    /// Stores `LANES` elements.
    ///
    /// # Safety
    ///
    /// `p..p + LANES` must be valid for writes.
    unsafe fn store_ptr(self, p: *mut f32, v: Self::V);
    /// Loads the lanes selected by `m` (reading only those addresses) and zeros the rest.
    ///
    /// # Safety
    ///
    /// `p + j` must be valid for reads for every lane `j` selected by `m`; other lanes may
    /// point anywhere (`p` may be computed with `wrapping_offset`).
    unsafe fn load_masked_ptr(self, p: *const f32, m: Self::M) -> Self::V;
    /// Stores the lanes selected by `m`, touching no other memory.
    ///
    /// # Safety
    ///
    /// `p + j` must be valid for writes for every lane `j` selected by `m`.
    unsafe fn store_masked_ptr(self, p: *mut f32, m: Self::M, v: Self::V);

    /// The lanes `lo..hi`; requires `lo <= hi <= LANES`.
    fn mask_range(self, lo: usize, hi: usize) -> Self::M;

    /// Loads `s[..LANES]`.
    #[inline(always)]
    fn load(self, s: &[f32]) -> Self::V {
        assert!(s.len() >= Self::LANES);
        // SAFETY: just checked that `LANES` elements are readable.
        unsafe { self.load_ptr(s.as_ptr()) }
    }

    /// Stores into `s[..LANES]`.
    #[inline(always)]
    fn store(self, s: &mut [f32], v: Self::V) {
        assert!(s.len() >= Self::LANES);
        // SAFETY: just checked that `LANES` elements are writable.
        unsafe { self.store_ptr(s.as_mut_ptr(), v) }
    }

    /// Loads the first `min(s.len(), LANES)` elements of `s`, zeros in the other lanes.
    #[inline(always)]
    fn load_partial(self, s: &[f32]) -> Self::V {
        let n = s.len().min(Self::LANES);
        // SAFETY: the mask selects lanes `0..n`, and `s` has at least `n` elements.
        unsafe { self.load_masked_ptr(s.as_ptr(), self.mask_range(0, n)) }
    }

    /// Stores lanes `0..n` of `v` (`n <= LANES`).
    ///
    /// # Safety
    ///
    /// `p..p + n` must be valid for writes.
    #[inline(always)]
    unsafe fn store_first_ptr(self, p: *mut f32, n: usize, v: Self::V) {
        // SAFETY: the mask selects lanes `0..n`, which the caller guarantees are writable.
        unsafe { self.store_masked_ptr(p, self.mask_range(0, n), v) }
    }

    /// Stores the first `min(s.len(), LANES)` lanes of `v` into `s`.
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: Self::V) {
        let n = s.len().min(Self::LANES);
        // SAFETY: `s` has at least `n` elements.
        unsafe { self.store_first_ptr(s.as_mut_ptr(), n, v) }
    }

    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c` with one rounding.
    fn fmadd(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `if a > b { a } else { b }` per lane (x86 `maxps`).
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// `if a < b { a } else { b }` per lane (x86 `minps`).
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    /// `|a|` (clears the sign bit, NaN stays NaN).
    fn abs(self, a: Self::V) -> Self::V;
    /// `mag` with the sign bit of `sign` OR-ed in (`mag` is expected non-negative).
    fn or_sign(self, mag: Self::V, sign: Self::V) -> Self::V;
    /// Rounds to the nearest integer, ties to even.
    fn round(self, a: Self::V) -> Self::V;
    /// `2^k` for integer-valued `k` in `-126..=127`; other inputs give unspecified finite
    /// values (never UB).
    fn pow2(self, k: Self::V) -> Self::V;

    /// `a < b` (false if either is NaN).
    fn lt(self, a: Self::V, b: Self::V) -> Self::M;
    /// `a > b` (false if either is NaN).
    fn gt(self, a: Self::V, b: Self::V) -> Self::M;
    /// Lanes holding NaN.
    fn is_nan(self, a: Self::V) -> Self::M;
    /// Lanes where `a` or `b` holds NaN.
    fn unordered(self, a: Self::V, b: Self::V) -> Self::M;
    /// Union of two masks.
    fn mask_or(self, a: Self::M, b: Self::M) -> Self::M;
    /// Whether any lane of `m` is set.
    fn mask_any(self, m: Self::M) -> bool;
    /// `if m { t } else { f }` per lane.
    fn select(self, m: Self::M, t: Self::V, f: Self::V) -> Self::V;

    /// Sum of the lanes (in an unspecified order).
    fn reduce_add(self, v: Self::V) -> f32;
    /// The largest lane by `x > m` (NaN lanes never win unless every lane is NaN).
    fn reduce_max(self, v: Self::V) -> f32;

    /// The even and odd elements of the `2 * LANES` elements `a ++ b`, in lane order `P`.
    fn deinterleave(self, a: Self::V, b: Self::V) -> (Self::V, Self::V);
    /// Puts a vector in lane order `P` (see [`deinterleave`](Self::deinterleave)) back into
    /// memory order.
    fn unpermute(self, v: Self::V) -> Self::V;
    /// `lo[1..] ++ [hi[0]]`: the elements of `lo ++ hi` (memory order) one lane on.
    fn shift_in(self, lo: Self::V, hi: Self::V) -> Self::V;
    /// `lo[2..] ++ hi[..2]`: the elements of `lo ++ hi` (memory order) two lanes on.
    #[inline(always)]
    fn shift_in2(self, lo: Self::V, hi: Self::V) -> Self::V {
        // `lo[1..] ++ [hi[0]]`, then one more lane on, taking `hi[1]` from `hi` one lane on.
        self.shift_in(self.shift_in(lo, hi), self.shift_in(hi, hi))
    }
    /// The indices `idx[..LANES]`, each below `2 * LANES`, for [`permute2`](Self::permute2).
    fn indices(self, idx: &[u32; 16]) -> Self::I;
    /// Lane `j` is element `i[j]` of `a ++ b` (memory order): any gather from two vectors.
    fn permute2(self, i: Self::I, a: Self::V, b: Self::V) -> Self::V;
    /// Lane `j` is lane `i[j]` of `v` if `i[j] < LANES`, else zero (`i` from
    /// [`indices`](Self::indices), so every index below `2 * LANES`): a one-source gather
    /// (AVX-512: `vpermps` with a zeroing mask, which on Zen 4 runs beside the FMAs where
    /// [`permute2`](Self::permute2)'s `vpermt2ps` takes an FMA's slot).
    #[inline(always)]
    fn permute_or_zero(self, i: Self::I, v: Self::V) -> Self::V {
        self.permute2(i, v, self.zero())
    }

    /// The 8-lane token: every ISA here implies AVX2 and FMA.
    fn avx2(self) -> Avx2Fma;

    /// Runs `job` with `L = LANES` as a const generic parameter, so that it can size arrays of
    /// vectors by the lane count.
    fn with_lanes<J: LanesJob<Self>>(self, job: J) -> J::Output;

    /// Transposes the `LANES x LANES` matrix whose rows are `rows` (exactly `LANES` long):
    /// afterwards `rows[i]` lane `j` is what `rows[j]` lane `i` was.
    fn transpose(self, rows: &mut [Self::V]);
}

/// Proof that the CPU has AVX2 and FMA; 8 lanes of `__m256`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2Fma(());

impl Avx2Fma {
    /// # Safety
    ///
    /// The CPU must support AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Self {
        Avx2Fma(())
    }
}

/// `TABLE[8 - n..][..8]` has its first `n` lanes all-ones: the masks of [`Avx2Fma`].
static MASK_TABLE_8: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// Runs `$e` in an `unsafe` block justified by the token's existence.
macro_rules! with_token {
    ($e:expr) => {
        // SAFETY: a token of this type exists only if its `new_unchecked` contract holds,
        // i.e. the CPU has every feature these intrinsics need.
        unsafe { $e }
    };
}

impl Simd for Avx2Fma {
    type V = __m256;
    type M = __m256;
    type I = __m256i;
    const LANES: usize = 8;
    const ONE_INSTRUCTION_PERMUTE2: bool = false;

    #[inline(always)]
    fn vectorize<J: Job<Self>>(self, job: J) -> J::Output {
        /// # Safety
        ///
        /// The CPU must support AVX2 and FMA.
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        unsafe fn run<J: Job<Avx2Fma>>(s: Avx2Fma, job: J) -> J::Output {
            job.run(s)
        }
        // SAFETY: the token exists only if the CPU has AVX2 and FMA.
        unsafe { run(self, job) }
    }

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        with_token!(_mm256_set1_ps(x))
    }
    #[inline(always)]
    fn zero(self) -> __m256 {
        with_token!(_mm256_setzero_ps())
    }
    #[inline(always)]
    unsafe fn load_ptr(self, p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees 8 readable elements; the token guarantees AVX.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store_ptr(self, p: *mut f32, v: __m256) {
        // SAFETY: the caller guarantees 8 writable elements; the token guarantees AVX.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_masked_ptr(self, p: *const f32, m: __m256) -> __m256 {
        // SAFETY: `vmaskmovps` reads only the selected lanes, which the caller guarantees are
        // readable; the token guarantees AVX.
        unsafe { _mm256_maskload_ps(p, _mm256_castps_si256(m)) }
    }
    #[inline(always)]
    unsafe fn store_masked_ptr(self, p: *mut f32, m: __m256, v: __m256) {
        // SAFETY: `vmaskmovps` writes only the selected lanes, which the caller guarantees are
        // writable; the token guarantees AVX.
        unsafe { _mm256_maskstore_ps(p, _mm256_castps_si256(m), v) }
    }
    #[inline(always)]
    unsafe fn store_first_ptr(self, p: *mut f32, n: usize, v: __m256) {
        // A masked `vmaskmovps` store is slow on AMD cores (microcoded on Zen 2 and 3), and a
        // row narrower than a vector stores one per output row. For 4..=7 lanes, two
        // overlapping 128-bit stores do the same: lanes 0..4, then lanes n-4..n moved down.
        if (4..8).contains(&n) {
            let shift = n as i32 - 4;
            let (low, high) = with_token!({
                let idx = _mm256_add_epi32(
                    _mm256_setr_epi32(0, 1, 2, 3, 0, 0, 0, 0),
                    _mm256_set1_epi32(shift),
                );
                (
                    _mm256_castps256_ps128(v),
                    _mm256_castps256_ps128(_mm256_permutevar8x32_ps(v, idx)),
                )
            });
            // SAFETY: the caller guarantees `p..p + n` is writable, and both stores lie
            // inside it (`0..4` and `n - 4..n`); the token guarantees SSE.
            unsafe {
                _mm_storeu_ps(p, low);
                _mm_storeu_ps(p.add(n - 4), high);
            }
        } else if n == 8 {
            // SAFETY: as above, all 8 lanes are writable.
            unsafe { _mm256_storeu_ps(p, v) }
        } else {
            // SAFETY: the mask selects lanes `0..n`, which the caller guarantees writable.
            unsafe { _mm256_maskstore_ps(p, _mm256_castps_si256(first_lanes_8(self, n)), v) }
        }
    }
    #[inline(always)]
    fn mask_range(self, lo: usize, hi: usize) -> __m256 {
        debug_assert!(lo <= hi && hi <= 8);
        with_token!(_mm256_andnot_ps(
            first_lanes_8(self, lo),
            first_lanes_8(self, hi)
        ))
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_add_ps(a, b))
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_sub_ps(a, b))
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_mul_ps(a, b))
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_div_ps(a, b))
    }
    #[inline(always)]
    fn fmadd(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        with_token!(_mm256_fmadd_ps(a, b, c))
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_max_ps(a, b))
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_min_ps(a, b))
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        with_token!(_mm256_andnot_ps(_mm256_set1_ps(-0.0), a))
    }
    #[inline(always)]
    fn or_sign(self, mag: __m256, sign: __m256) -> __m256 {
        with_token!(_mm256_or_ps(mag, _mm256_and_ps(sign, _mm256_set1_ps(-0.0))))
    }
    #[inline(always)]
    fn round(self, a: __m256) -> __m256 {
        with_token!(_mm256_round_ps::<
            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
        >(a))
    }
    #[inline(always)]
    fn pow2(self, k: __m256) -> __m256 {
        with_token!(_mm256_castsi256_ps(_mm256_slli_epi32::<23>(
            _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127))
        )))
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_cmp_ps::<_CMP_LT_OQ>(a, b))
    }
    #[inline(always)]
    fn gt(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_cmp_ps::<_CMP_GT_OQ>(a, b))
    }
    #[inline(always)]
    fn is_nan(self, a: __m256) -> __m256 {
        with_token!(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, a))
    }
    #[inline(always)]
    fn unordered(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, b))
    }
    #[inline(always)]
    fn mask_or(self, a: __m256, b: __m256) -> __m256 {
        with_token!(_mm256_or_ps(a, b))
    }
    #[inline(always)]
    fn mask_any(self, m: __m256) -> bool {
        with_token!(_mm256_movemask_ps(m)) != 0
    }
    #[inline(always)]
    fn select(self, m: __m256, t: __m256, f: __m256) -> __m256 {
        with_token!(_mm256_blendv_ps(f, t, m))
    }
    #[inline(always)]
    fn reduce_add(self, v: __m256) -> f32 {
        with_token!({
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
        })
    }
    #[inline(always)]
    fn reduce_max(self, v: __m256) -> f32 {
        with_token!({
            // `maxps(x, m)` keeps `m` when `x` is NaN, so NaN lanes lose to any number.
            let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_max_ps(_mm_movehl_ps(s, s), s);
            _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(s), s))
        })
    }
    #[inline(always)]
    fn deinterleave(self, a: __m256, b: __m256) -> (__m256, __m256) {
        // Within each 128-bit half: [a0 a2 b0 b2 | a4 a6 b4 b6], i.e. the even elements
        // 0, 1, 4, 5, 2, 3, 6, 7 in lane order (likewise the odd ones). Fixing the order here
        // would cost a lane-crossing permute per call; `unpermute` does it once per result.
        with_token!((
            _mm256_shuffle_ps::<0x88>(a, b),
            _mm256_shuffle_ps::<0xDD>(a, b)
        ))
    }
    #[inline(always)]
    fn unpermute(self, v: __m256) -> __m256 {
        // Swap the middle two 64-bit blocks: (0 1)(4 5)(2 3)(6 7) -> (0 1)(2 3)(4 5)(6 7).
        with_token!(_mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(
            _mm256_castps_pd(v)
        )))
    }
    #[inline(always)]
    fn shift_in(self, lo: __m256, hi: __m256) -> __m256 {
        // `t` = lo's upper half ++ hi's lower half; then per 128-bit half, one float on.
        with_token!({
            let t = _mm256_permute2f128_ps::<0x21>(lo, hi);
            _mm256_castsi256_ps(_mm256_alignr_epi8::<4>(
                _mm256_castps_si256(t),
                _mm256_castps_si256(lo),
            ))
        })
    }
    #[inline(always)]
    fn indices(self, idx: &[u32; 16]) -> __m256i {
        // SAFETY (the load): `idx` has 16 elements, the load reads 8.
        with_token!(_mm256_loadu_si256(idx.as_ptr().cast()))
    }
    #[inline(always)]
    fn permute2(self, i: __m256i, a: __m256, b: __m256) -> __m256 {
        // Both sources permuted by the index's low three bits, then bit 3 (shifted into the
        // sign bit) picks `b`'s.
        with_token!(_mm256_blendv_ps(
            _mm256_permutevar8x32_ps(a, i),
            _mm256_permutevar8x32_ps(b, i),
            _mm256_castsi256_ps(_mm256_slli_epi32::<28>(i)),
        ))
    }
    #[inline(always)]
    fn with_lanes<J: LanesJob<Self>>(self, job: J) -> J::Output {
        job.run::<8>(self)
    }
    #[inline(always)]
    fn avx2(self) -> Avx2Fma {
        self
    }
    #[inline(always)]
    fn transpose(self, rows: &mut [__m256]) {
        let r: &mut [__m256; 8] = rows.try_into().expect("transpose: 8 rows");
        // The classic three rounds of 24 shuffles: interleave pairs of rows, then pairs of
        // pairs (within 128-bit halves), then swap the halves across.
        with_token!({
            let t: [__m256; 8] = array(|i| {
                let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm256_unpacklo_ps(a, b)
                } else {
                    _mm256_unpackhi_ps(a, b)
                }
            });
            // u[4q + 2h + e]: from t[4q + h] and t[4q + h + 2], the low (e = 0) or high pair:
            // column `2h + e` of rows `4q..4q + 4` in each half.
            let u: [__m256; 8] = array(|i| {
                let (q, h, e) = (i / 4, i / 2 % 2, i % 2);
                let (a, b) = (t[4 * q + h], t[4 * q + h + 2]);
                if e == 0 {
                    _mm256_shuffle_ps::<0x44>(a, b)
                } else {
                    _mm256_shuffle_ps::<0xEE>(a, b)
                }
            });
            // u[j] holds column `j` (low half) and `j + 4` (high half) of rows 0..4, u[j + 4]
            // the same of rows 4..8.
            for j in 0..4 {
                let (a, b) = (u[j], u[4 + j]);
                r[j] = _mm256_permute2f128_ps::<0x20>(a, b);
                r[j + 4] = _mm256_permute2f128_ps::<0x31>(a, b);
            }
        })
    }
}

/// The all-ones mask of lanes `0..n` (`n <= 8`). Indexing rather than pointer arithmetic
/// keeps a bad `n` a panic, never a wild read.
#[inline(always)]
fn first_lanes_8(_: Avx2Fma, n: usize) -> __m256 {
    let t = &MASK_TABLE_8[8 - n.min(8)..][..8];
    // SAFETY: `t` has exactly 8 elements; the token guarantees AVX.
    unsafe { _mm256_loadu_ps(t.as_ptr().cast::<f32>()) }
}

/// Proof that the CPU has AVX-512F (and AVX2 and FMA); 16 lanes of `__m512`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512F(());

impl Avx512F {
    /// # Safety
    ///
    /// The CPU must support AVX-512F, AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Self {
        Avx512F(())
    }
}

/// The sign bit of an `f32`, as the integer lanes the AVX-512F bitwise operations take.
const SIGN_BIT: i32 = i32::MIN;

// The AVX-512 intrinsics and `__mmask16` are stable since Rust 1.89 (as is
// `#[target_feature(enable = "avx512f")]` itself), one release past the workspace's declared
// `rust-version`; this tells clippy's MSRV lint what this code really needs.
#[clippy::msrv = "1.89"]
impl Simd for Avx512F {
    type V = __m512;
    type M = __mmask16;
    type I = __m512i;
    const LANES: usize = 16;
    const ONE_INSTRUCTION_PERMUTE2: bool = true;

    #[inline(always)]
    fn vectorize<J: Job<Self>>(self, job: J) -> J::Output {
        /// # Safety
        ///
        /// The CPU must support AVX-512F, AVX2 and FMA.
        #[target_feature(enable = "avx512f,avx2,fma")]
        #[inline(never)]
        unsafe fn run<J: Job<Avx512F>>(s: Avx512F, job: J) -> J::Output {
            job.run(s)
        }
        // SAFETY: the token exists only if the CPU has AVX-512F, AVX2 and FMA.
        unsafe { run(self, job) }
    }

    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        with_token!(_mm512_set1_ps(x))
    }
    #[inline(always)]
    fn zero(self) -> __m512 {
        with_token!(_mm512_setzero_ps())
    }
    #[inline(always)]
    unsafe fn load_ptr(self, p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees 16 readable elements; the token guarantees AVX-512F.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store_ptr(self, p: *mut f32, v: __m512) {
        // SAFETY: the caller guarantees 16 writable elements; the token guarantees AVX-512F.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_masked_ptr(self, p: *const f32, m: __mmask16) -> __m512 {
        // SAFETY: a masked `vmovups` reads (and faults on) only the selected lanes, which the
        // caller guarantees are readable; the token guarantees AVX-512F.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline(always)]
    unsafe fn store_masked_ptr(self, p: *mut f32, m: __mmask16, v: __m512) {
        // SAFETY: a masked `vmovups` writes only the selected lanes, which the caller
        // guarantees are writable; the token guarantees AVX-512F.
        unsafe { _mm512_mask_storeu_ps(p, m, v) }
    }
    #[inline(always)]
    fn mask_range(self, lo: usize, hi: usize) -> __mmask16 {
        debug_assert!(lo <= hi && hi <= 16);
        let (lo, hi) = (lo.min(16), hi.min(16));
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_add_ps(a, b))
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_sub_ps(a, b))
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_mul_ps(a, b))
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_div_ps(a, b))
    }
    #[inline(always)]
    fn fmadd(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        with_token!(_mm512_fmadd_ps(a, b, c))
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_max_ps(a, b))
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_min_ps(a, b))
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        with_token!(_mm512_castsi512_ps(_mm512_andnot_si512(
            _mm512_set1_epi32(SIGN_BIT),
            _mm512_castps_si512(a)
        )))
    }
    #[inline(always)]
    fn or_sign(self, mag: __m512, sign: __m512) -> __m512 {
        with_token!(_mm512_castsi512_ps(_mm512_or_si512(
            _mm512_castps_si512(mag),
            _mm512_and_si512(_mm512_castps_si512(sign), _mm512_set1_epi32(SIGN_BIT))
        )))
    }
    #[inline(always)]
    fn round(self, a: __m512) -> __m512 {
        with_token!(_mm512_roundscale_ps::<
            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
        >(a))
    }
    #[inline(always)]
    fn pow2(self, k: __m512) -> __m512 {
        with_token!(_mm512_castsi512_ps(_mm512_slli_epi32::<23>(
            _mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127))
        )))
    }
    #[inline(always)]
    fn lt(self, a: __m512, b: __m512) -> __mmask16 {
        with_token!(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b))
    }
    #[inline(always)]
    fn gt(self, a: __m512, b: __m512) -> __mmask16 {
        with_token!(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b))
    }
    #[inline(always)]
    fn is_nan(self, a: __m512) -> __mmask16 {
        with_token!(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a))
    }
    #[inline(always)]
    fn unordered(self, a: __m512, b: __m512) -> __mmask16 {
        with_token!(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b))
    }
    #[inline(always)]
    fn mask_or(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn mask_any(self, m: __mmask16) -> bool {
        m != 0
    }
    #[inline(always)]
    fn select(self, m: __mmask16, t: __m512, f: __m512) -> __m512 {
        with_token!(_mm512_mask_blend_ps(m, f, t))
    }
    #[inline(always)]
    fn reduce_add(self, v: __m512) -> f32 {
        let (lo, hi) = halves(self, v);
        // An AVX-512F token implies AVX2 and FMA (its constructor's contract).
        Avx2Fma(()).reduce_add(with_token!(_mm256_add_ps(lo, hi)))
    }
    #[inline(always)]
    fn reduce_max(self, v: __m512) -> f32 {
        let (lo, hi) = halves(self, v);
        // An AVX-512F token implies AVX2 and FMA (its constructor's contract).
        Avx2Fma(()).reduce_max(with_token!(_mm256_max_ps(lo, hi)))
    }
    #[inline(always)]
    fn deinterleave(self, a: __m512, b: __m512) -> (__m512, __m512) {
        // Within each 128-bit quarter `q`: [a(4q) a(4q+2) b(4q) b(4q+2)], i.e. the even
        // elements 0 1 8 9 | 2 3 10 11 | 4 5 12 13 | 6 7 14 15 in lane order (likewise the odd
        // ones). In-lane shuffles run beside the FMAs on Zen 4, where a two-source
        // `vpermt2ps` takes an FMA's slot; `unpermute` fixes the order once per result.
        with_token!((
            _mm512_shuffle_ps::<0x88>(a, b),
            _mm512_shuffle_ps::<0xDD>(a, b)
        ))
    }
    #[inline(always)]
    fn unpermute(self, v: __m512) -> __m512 {
        // 64-bit blocks in lane order 0 4 1 5 2 6 3 7 back to 0..8: one single-source permute.
        with_token!(_mm512_castpd_ps(_mm512_permutexvar_pd(
            _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
            _mm512_castps_pd(v)
        )))
    }
    #[inline(always)]
    fn shift_in(self, lo: __m512, hi: __m512) -> __m512 {
        with_token!(_mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
            _mm512_castps_si512(hi),
            _mm512_castps_si512(lo),
        )))
    }
    #[inline(always)]
    fn shift_in2(self, lo: __m512, hi: __m512) -> __m512 {
        with_token!(_mm512_castsi512_ps(_mm512_alignr_epi32::<2>(
            _mm512_castps_si512(hi),
            _mm512_castps_si512(lo),
        )))
    }
    #[inline(always)]
    fn indices(self, idx: &[u32; 16]) -> __m512i {
        // SAFETY (the load): `idx` has the 16 elements the load reads.
        with_token!(_mm512_loadu_si512(idx.as_ptr().cast()))
    }
    #[inline(always)]
    fn permute2(self, i: __m512i, a: __m512, b: __m512) -> __m512 {
        with_token!(_mm512_permutex2var_ps(a, i, b))
    }
    #[inline(always)]
    fn permute_or_zero(self, i: __m512i, v: __m512) -> __m512 {
        with_token!(_mm512_maskz_permutexvar_ps(
            _mm512_cmplt_epu32_mask(i, _mm512_set1_epi32(16)),
            i,
            v
        ))
    }
    #[inline(always)]
    fn with_lanes<J: LanesJob<Self>>(self, job: J) -> J::Output {
        job.run::<16>(self)
    }
    #[inline(always)]
    fn avx2(self) -> Avx2Fma {
        // An AVX-512F token implies AVX2 and FMA (its constructor's contract).
        Avx2Fma(())
    }
    #[inline(always)]
    fn transpose(self, rows: &mut [__m512]) {
        let r: &mut [__m512; 16] = rows.try_into().expect("transpose: 16 rows");
        with_token!({
            // Pairs of rows interleaved: t[2i], t[2i + 1] hold elements 0, 1 / 2, 3 of each
            // 128-bit block of rows 2i and 2i + 1.
            let t: [__m512; 16] = array(|i| {
                let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
                if i % 2 == 0 {
                    _mm512_unpacklo_ps(a, b)
                } else {
                    _mm512_unpackhi_ps(a, b)
                }
            });
            // u[4i + j]: block `b` holds column `4b + j` of rows `4i..4i + 4`.
            let u: [__m512; 16] = array(|x| {
                let (i, j) = (x / 4, x % 4);
                let (a, b) = (
                    _mm512_castps_pd(t[4 * i + j / 2]),
                    _mm512_castps_pd(t[4 * i + j / 2 + 2]),
                );
                _mm512_castpd_ps(if j % 2 == 0 {
                    _mm512_unpacklo_pd(a, b)
                } else {
                    _mm512_unpackhi_pd(a, b)
                })
            });
            // Column `4b + j` gathers block `b` of u[j], u[4 + j], u[8 + j], u[12 + j].
            for j in 0..4 {
                let lo01 = _mm512_shuffle_f32x4::<0x44>(u[j], u[4 + j]);
                let hi01 = _mm512_shuffle_f32x4::<0xEE>(u[j], u[4 + j]);
                let lo23 = _mm512_shuffle_f32x4::<0x44>(u[8 + j], u[12 + j]);
                let hi23 = _mm512_shuffle_f32x4::<0xEE>(u[8 + j], u[12 + j]);
                r[j] = _mm512_shuffle_f32x4::<0x88>(lo01, lo23);
                r[4 + j] = _mm512_shuffle_f32x4::<0xDD>(lo01, lo23);
                r[8 + j] = _mm512_shuffle_f32x4::<0x88>(hi01, hi23);
                r[12 + j] = _mm512_shuffle_f32x4::<0xDD>(hi01, hi23);
            }
        })
    }
}

/// The two 256-bit halves of a 512-bit vector, with AVX-512F instructions only
/// (`_mm512_extractf32x8_ps` would need AVX-512DQ).
#[clippy::msrv = "1.89"]
#[inline(always)]
fn halves(_: Avx512F, v: __m512) -> (__m256, __m256) {
    with_token!((
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))
    ))
}
