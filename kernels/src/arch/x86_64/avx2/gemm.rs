//! GEMM and dense layers for AVX2 + FMA: the 6 x 16 instantiation of the generic
//! micro-kernels in [`super::kern`], driven by the BLIS loop in [`super::blis`], and the
//! dot-product path for small-batch dense layers.
//!
//! Why 6 x 16 (two `__m256` per row): twelve accumulators cover the FMA latency (4 cycles)
//! times the two FMA pipes, and with the two `B` vectors and a broadcast that is 15 of the 16
//! ymm registers; each step issues 12 FMAs against 8 loads. Measured in L1 this tile runs at
//! 0.99 of the FMA peak on Zen 3. The narrowest projections (1x1 convolutions with at most
//! 18 output channels) read `B` in place through [`tile_strided`] (`blis::reads_in_place`).
//!
//! `dense` with a batch below [`DOT_BATCH`] is a GEMV-like product: the weights are
//! `[n_out, n_in]`, rows contiguous along the reduction, so dot products of input rows and
//! weight rows read them in place; packing them for the GEMM would cost a full pass over the
//! weights for only a few rows of output. Larger batches go through the GEMM with the weights
//! packed as the transposed right-hand side and the bias added per column.

use super::blis::{self, Bias, ColMajor, MicroKernel, PackB, RowMajor, Tile};
use super::lanes::Avx2;
use super::{kern, kloop};
use crate::len::holds;
use crate::par::{Parallel, Serial};
use crate::Activation;

/// Columns per tile: two `__m256`.
pub(crate) const NR: usize = 16;

impl MicroKernel<NR> for Avx2 {
    const MR: usize = 6;

    #[inline(always)]
    unsafe fn tile(t: &Tile) {
        // SAFETY: forwarded from the caller (CPU features and pointer ranges).
        unsafe { by_rows!(tile, t; 6 5 4 3 2) }
    }

    const IN_PLACE: bool = true;

    #[inline(always)]
    unsafe fn tile_strided(t: &Tile) {
        // SAFETY: forwarded from the caller (CPU features and pointer ranges).
        unsafe { by_rows!(tile_strided, t; 6 5 4 3 2) }
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
        unsafe { by_rows!(dots, t; 6 5 4 3 2) }
    }
}

/// [`kern::tile`] for AVX2.
///
/// # Safety
///
/// AVX2 and FMA are available; `t` is valid for [`MicroKernel::tile`] with `R` rows.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const R: usize>(t: &Tile) {
    // SAFETY: AVX2 and FMA are available; the tile contract is forwarded (AVX2 panels have
    // only full micro-panels, 32-byte aligned).
    unsafe {
        let s = Avx2::new();
        kern::prefetch_c(s, t, R, NR);
        let acc = kloop::full_256::<R>(t);
        kern::finish::<Avx2, R, 2, 6>(s, t, acc);
    }
}

/// [`MicroKernel::tile_strided`] for AVX2: [`tile`] with `B` read in place, its rows a
/// stride apart or through a table of offsets.
///
/// # Safety
///
/// AVX2 and FMA are available; `t` is valid for [`MicroKernel::tile_strided`] with `R` rows.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_strided<const R: usize>(t: &Tile) {
    // SAFETY: AVX2 and FMA are available; the tile contract is forwarded (16 columns: AVX2
    // panels have no half-width tiles).
    unsafe {
        let s = Avx2::new();
        kern::prefetch_c(s, t, R, NR);
        let acc = kloop::in_place_256::<R>(t);
        kern::finish::<Avx2, R, 2, 6>(s, t, acc);
    }
}

/// [`kern::dots`] for AVX2.
///
/// # Safety
///
/// AVX2 and FMA are available; `t` is valid for [`MicroKernel::dots`] with `R` rows.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots<const R: usize>(t: &Tile) {
    // SAFETY: AVX2 and FMA are available; the tile contract is forwarded.
    unsafe { kern::dots::<Avx2, R>(Avx2::new(), t) }
}

gemm_entries!(Avx2, "avx2,fma");

/// Batches below this run as dot products of input rows and weight rows; larger ones as the
/// packed GEMM, whose packing of the weights is then amortised over enough rows.
const DOT_BATCH: usize = 32;

/// Dense layer for AVX2.
///
/// # Safety
///
/// AVX2 and FMA are available, and the slices are as long as [`dense`] checks.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn dense_avx2(
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
        // SAFETY: AVX2 and FMA are available (this function's contract).
        let s = unsafe { Avx2::new() };
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
    // SAFETY: AVX2 and FMA are available (this function's contract).
    unsafe { blis::gemm::<Avx2, NR, _>(g, &w) };
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
    // SAFETY: only reachable through a table built after detecting avx2 and fma
    // (crate::table).
    unsafe { dense_avx2(batch, n_in, n_out, input, weight, bias, act, out) }
}
