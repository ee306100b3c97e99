//! GEMM and dense layers for AVX-512F: the 12 x 32 instantiation of the generic micro-kernels
//! (`avx2::kern`), driven by the same BLIS loop (`avx2::blis`) as AVX2.
//!
//! Why 12 x 32 (two `__m512` per row): 24 accumulators plus two `B` vectors and a broadcast
//! fit the 32 zmm registers, and each step issues 24 FMAs against 14 loads, FMA-bound both on
//! cores with two 512-bit FMA pipes and on Zen 4, which splits a zmm FMA over its two 256-bit
//! pipes. Everything but the [`Avx512`] token's one-line intrinsic wrappers is shared with
//! the AVX2 build, and the 16-lane instantiation of that shared code is tested through a
//! scalar emulation on machines without AVX-512 (see `avx2::kern`'s tests).
//!
//! The dense layer has the same two paths as AVX2: dot products of input and weight rows for
//! small batches, the packed GEMM otherwise.

use core::arch::x86_64::*;

use crate::arch::x86_64::avx2::blis::{self, Bias, ColMajor, MicroKernel, PackB, RowMajor, Tile};
use crate::arch::x86_64::avx2::lanes::Lanes;
use crate::arch::x86_64::avx2::{kern, kloop};
use crate::arch::x86_64::simd::vector::{Avx512F, Closure, Simd};
use crate::len::holds;
use crate::par::{Parallel, Serial};
use crate::Activation;

/// Columns per tile: two `__m512`.
pub(crate) const NR: usize = 32;

/// Batches below this run as dot products; see the AVX2 dense layer.
const DOT_BATCH: usize = 32;

/// The AVX-512F token: 16 lanes in a `__m512`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// # Safety
    ///
    /// The CPU has AVX-512F (and AVX2 and FMA, which the kernels built on this token may
    /// also use).
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        Avx512(())
    }
}

// SAFETY (of the intrinsics in every method below): an `Avx512` token exists, so the CPU has
// AVX-512F; the methods are inlined into `#[target_feature(enable = "avx512f,...")]` code.
impl Lanes for Avx512 {
    type V = __m512;
    const N: usize = 16;

    #[inline(always)]
    fn zero(self) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    fn fma(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        // `vmaxps` keeps the legacy rule: the second operand on NaN or equal values.
        // SAFETY: see the impl.
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: see the impl.
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn select_lt(self, x: __m512, y: __m512, a: __m512, b: __m512) -> __m512 {
        // `mask_blend(k, b, a)` takes `a` where the mask bit is set.
        // SAFETY: see the impl.
        unsafe { _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, y), b, a) }
    }
    #[inline(always)]
    fn hsum(self, v: __m512) -> f32 {
        // SAFETY: see the impl.
        unsafe { _mm512_reduce_add_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees the range; features as for the impl.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_aligned(self, p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees the range and 64-byte alignment; features as for the
        // impl.
        unsafe { _mm512_load_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_first(self, p: *const f32, n: usize) -> __m512 {
        let mask: __mmask16 = ((1u32 << n.min(16)) - 1) as __mmask16;
        // SAFETY: masked-off lanes are neither read nor able to fault, and the caller
        // guarantees the first `n` are readable; features as for the impl.
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
    #[inline(always)]
    unsafe fn load_even(self, p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees the 32 floats; features as for the impl.
        unsafe {
            let (lo, hi) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            // Index i < 16 picks lane i of `lo`, 16 + i lane i of `hi`.
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            _mm512_permutex2var_ps(lo, even, hi)
        }
    }
    #[inline(always)]
    unsafe fn load_even_first(self, p: *const f32, n: usize) -> __m512 {
        let len = (2 * n).saturating_sub(1);
        let lo_mask = ((1u32 << len.min(16)) - 1) as __mmask16;
        let hi_mask = ((1u32 << len.saturating_sub(16).min(16)) - 1) as __mmask16;
        // SAFETY: masked-off lanes are neither read nor able to fault, and the caller
        // guarantees `p[0..len]` (the second pointer is formed with `wrapping_add`); features
        // as for the impl.
        unsafe {
            let (lo, hi) = (
                _mm512_maskz_loadu_ps(lo_mask, p),
                _mm512_maskz_loadu_ps(hi_mask, p.wrapping_add(16)),
            );
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            // Lane `i >= n` picks float `2i >= 2n > len`, never loaded, so it is zero.
            _mm512_permutex2var_ps(lo, even, hi)
        }
    }
    #[inline(always)]
    unsafe fn broadcast(self, p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees `p` is readable; features as for the impl.
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m512) {
        // SAFETY: the caller guarantees the range; features as for the impl.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        // SAFETY: SSE is baseline on x86_64 and a prefetch never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    fn with_features<F: FnOnce(Self)>(self, f: F) {
        // SAFETY: an `Avx512` token exists only if the CPU has AVX-512F, AVX2 and FMA.
        let s = unsafe { Avx512F::new_unchecked() };
        s.vectorize(Closure(|_| f(self)))
    }
}

impl MicroKernel<NR> for Avx512 {
    const MR: usize = 12;

    #[inline(always)]
    unsafe fn tile(t: &Tile) {
        // SAFETY: forwarded from the caller (CPU features and pointer ranges).
        unsafe { by_rows!(tile, t; 12 11 10 9 8 7 6 5 4 3 2) }
    }

    const IN_PLACE: bool = true;

    #[inline(always)]
    unsafe fn tile_strided(t: &Tile) {
        // SAFETY: forwarded from the caller (CPU features and pointer ranges).
        unsafe { by_rows!(tile_strided, t; 12 11 10 9 8 7 6 5 4 3 2) }
    }

    #[inline(always)]
    unsafe fn part<B: PackB>(
        g: &blis::Shared<'_>,
        b: &B,
        task: usize,
        split: blis::Split,
        panel: &mut [f32],
    ) {
        // SAFETY: forwarded from the caller (CPU features, one run per task).
        unsafe { part::<B>(g, b, task, split, panel) }
    }

    #[inline(always)]
    unsafe fn dots(t: &Tile) {
        // SAFETY: forwarded from the caller (CPU features and pointer ranges).
        unsafe { by_rows!(dots, t; 12 11 10 9 8 7 6 5 4 3 2) }
    }
}

/// [`kern::tile`] for AVX-512.
///
/// # Safety
///
/// AVX-512F, AVX2 and FMA are available; `t` is valid for [`MicroKernel::tile`] with `R`
/// rows.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile<const R: usize>(t: &Tile) {
    // SAFETY: the features are available; the tile contract is forwarded (the full and the
    // half-width micro-panels are 64-byte aligned, 32 or 16 columns).
    unsafe {
        let s = Avx512::new();
        kern::prefetch_c(s, t, R, t.cols);
        if t.cols == NR {
            let acc = kloop::tile_512::<R, 2>(t);
            kern::finish::<Avx512, R, 2, 12>(s, t, acc);
        } else {
            let acc = kloop::tile_512::<R, 1>(t);
            kern::finish::<Avx512, R, 1, 12>(s, t, acc);
        }
    }
}

/// [`MicroKernel::tile_strided`] for AVX-512: [`tile`] with `B` read in place, its rows a
/// stride apart or through a table of offsets.
///
/// # Safety
///
/// AVX-512F, AVX2 and FMA are available; `t` is valid for [`MicroKernel::tile_strided`] with
/// `R` rows.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile_strided<const R: usize>(t: &Tile) {
    // SAFETY: the features are available; the tile contract is forwarded (32 or 16 columns).
    unsafe {
        let s = Avx512::new();
        kern::prefetch_c(s, t, R, t.cols);
        if t.cols == NR {
            let acc = kloop::in_place_512::<R, 2>(t);
            kern::finish::<Avx512, R, 2, 12>(s, t, acc);
        } else {
            let acc = kloop::in_place_512::<R, 1>(t);
            kern::finish::<Avx512, R, 1, 12>(s, t, acc);
        }
    }
}

/// [`kern::dots`] for AVX-512.
///
/// # Safety
///
/// AVX-512F, AVX2 and FMA are available; `t` is valid for [`MicroKernel::dots`] with `R`
/// rows.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dots<const R: usize>(t: &Tile) {
    // SAFETY: the features are available; the tile contract is forwarded.
    unsafe { kern::dots::<Avx512, R>(Avx512::new(), t) }
}

gemm_entries!(Avx512, "avx512f,avx2,fma");

/// Dense layer for AVX-512.
///
/// # Safety
///
/// AVX-512F, AVX2 and FMA are available.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dense_avx512(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    if batch < DOT_BATCH {
        // SAFETY: the features are available (this function's contract).
        let s = unsafe { Avx512::new() };
        kern::dense_blocks(
            batch,
            n_in,
            n_out,
            input,
            weight,
            bias,
            act,
            out,
            |rows, outs, d| {
                // SAFETY: `dense_blocks` hands out blocks inside the slices it checked.
                unsafe { kern::dense_dispatch(s, rows, outs, d) }
            },
        );
        return;
    }
    let g = blis::Gemm {
        m: batch,
        n: n_out,
        k: n_in,
        a: input,
        lda: n_in,
        a_blocked: false,
        c: out,
        ldc: n_out,
        bias: bias.map_or(Bias::None, Bias::Col),
        res: None,
        act,
    };
    let w = ColMajor {
        data: weight,
        ld: n_in,
    };
    // SAFETY: the features are available (this function's contract).
    unsafe { blis::gemm::<Avx512, NR, _>(g, &w) };
}

/// `out[b, o] = act(sum_i input[b, i] * weight[o, i] + bias[o])`; see [`crate::dense`].
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub(crate) fn dense(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    assert!(
        holds(input.len(), &[batch, n_in])
            && holds(weight.len(), &[n_out, n_in])
            && bias.is_none_or(|b| b.len() >= n_out)
            && holds(out.len(), &[batch, n_out]),
        "dense: short slice"
    );
    if batch == 0 || n_out == 0 {
        return;
    }
    // SAFETY: only reachable through a table built after detecting avx512f, avx2 and fma
    // (crate::table).
    unsafe { dense_avx512(batch, n_in, n_out, input, weight, bias, act, out) }
}
