//! NEON matrix products: [`gemm`] (`C = A B`, packed, register-blocked) and [`dense`] (a fully
//! connected layer as dot products, the GEMV shape of batch-1 inference). Same contracts as the
//! portable kernels; [`gemm_fused`] is the GEMM with a per-row bias and activation that
//! `conv.rs` calls.
//!
//! Algorithm sketch for `gemm_fused` (BLIS structure, all row-major, `A` is `m x k`, `B` is
//! `k x n`):
//!
//! ```text
//! for each block of NC (48) columns j0..:
//!     for each block of KC (256) depths p0..:
//!         pack B[p0.., j0..] into panels of NR (12) columns, [p][12] each, zero-padded
//!         for each group of MR (8) rows i0..:
//!             pack A[i0.., p0..] as [p][8] (column of the 8 rows, zero-padded)
//!             for each B panel:
//!                 8x12 micro-kernel: 24 accumulators; per p, two A and three B vectors,
//!                 12 `vfmaq_laneq_f32` (B vector times one A lane) -- 29 of 32 registers
//!                 C tile  = result (first depth block) or C tile += result (later blocks);
//!                 on the last depth block, the epilogue act(C + bias[row] (+ res)) on the tile
//! ```
//!
//! Packing makes every micro-kernel load contiguous and lets the tails be plain zero padding
//! (the padded rows and columns are computed and dropped when the tile is written back). The
//! packing buffers live on the stack (KC*NC + KC*MR floats, 56 KiB), because the kernels may
//! not allocate; that is well inside the 2 MiB a Rust thread gets by default.
//!
//! Each `C[i, j]` is summed in `p` order with fused multiply-adds, so results differ from the
//! portable kernel's (separate multiply and add) by rounding only.

use super::simd::{epilogue, load, store, LANES};
use crate::arch::portable::epilogue::epilogue_res;
use crate::len::holds;
use crate::Activation;
use core::arch::aarch64::*;

/// Rows of the micro-kernel tile.
const MR: usize = 8;
/// Columns of the micro-kernel tile (three vectors).
const NR: usize = 12;
/// Depth of one packed block.
const KC: usize = 256;
/// Columns of one packed block of B (four micro-panels).
const NC: usize = 4 * NR;

/// `C = A B` with `A` `m x k`, `B` `k x n`, `C` `m x n`, all row-major; `C` is overwritten.
pub(crate) fn gemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // Checked in release builds too, without wrapping: the micro-kernel reads through raw
    // pointers derived from these slices (see `crate::len`).
    assert!(
        holds(a.len(), &[m, k]) && holds(b.len(), &[k, n]) && holds(c.len(), &[m, n]),
        "gemm: short slice for m = {m}, n = {n}, k = {k}"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { gemm_neon(m, n, k, a, b, c) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn gemm_neon(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    gemm_fused(m, n, k, a, b, c, None, None, Activation::None);
}

/// `C = act(A B + bias[row] + res)`: [`gemm`] with the conv epilogue fused into the write-back
/// of the last depth block (`bias` has one value per row of `C`; `res`, a residual operand,
/// is `m x n` like `C`).
#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_fused(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
) {
    if m == 0 || n == 0 {
        return;
    }
    let a = &a[..m * k];
    let b = &b[..k * n];
    let c = &mut c[..m * n];
    let res = res.map(|r| &r[..m * n]);
    let shift = |row: usize| bias.map_or(0.0, |b| b[row]);
    // The epilogue of `cols` columns of row `i` of C from column `j`.
    let finish = |dst: &mut [f32], i: usize, j: usize| match res {
        None => epilogue(dst, 1.0, shift(i), act),
        Some(r) => epilogue_res(dst, shift(i), &r[i * n + j..][..dst.len()], act),
    };
    if k == 0 {
        // An empty sum: every element is act(0 + bias (+ res)).
        for (i, row) in c.chunks_exact_mut(n).enumerate() {
            row.fill(0.0);
            finish(row, i, 0);
        }
        return;
    }

    let mut b_pack = [0.0f32; KC * NC];
    let mut a_pack = [0.0f32; KC * MR];
    let mut tile = [0.0f32; MR * NR];
    for j0 in (0..n).step_by(NC) {
        let nc = NC.min(n - j0);
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            let (first, last) = (p0 == 0, p0 + kc == k);
            pack_b(b, n, p0, kc, j0, nc, &mut b_pack);
            for i0 in (0..m).step_by(MR) {
                let mr = MR.min(m - i0);
                pack_a(a, k, i0, mr, p0, kc, &mut a_pack);
                for (q, panel) in b_pack
                    .chunks_exact(KC * NR)
                    .take(nc.div_ceil(NR))
                    .enumerate()
                {
                    let jq = j0 + q * NR;
                    let nr = NR.min(n - jq);
                    kernel_8x12(kc, &a_pack[..kc * MR], &panel[..kc * NR], &mut tile);
                    for (r, t) in tile.chunks_exact(NR).take(mr).enumerate() {
                        let row = &mut c[(i0 + r) * n + jq..][..nr];
                        write_back(row, &t[..nr], first);
                        if last {
                            finish(row, i0 + r, jq);
                        }
                    }
                }
            }
        }
    }
}

/// `dst = src` (first depth block) or `dst += src` (later ones).
#[target_feature(enable = "neon")]
#[inline]
fn write_back(dst: &mut [f32], src: &[f32], first: bool) {
    if first {
        dst.copy_from_slice(src);
        return;
    }
    let mut d = dst.chunks_exact_mut(LANES);
    let mut s = src.chunks_exact(LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        store(d, vaddq_f32(load(d), load(s)));
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d += s;
    }
}

/// Packs `B[p0..p0+kc, j0..j0+nc]` into `ceil(nc / NR)` panels of `KC * NR` floats, each laid
/// out `[p][NR]` with the columns past `nc` zeroed.
fn pack_b(b: &[f32], n: usize, p0: usize, kc: usize, j0: usize, nc: usize, out: &mut [f32]) {
    for (q, panel) in out
        .chunks_exact_mut(KC * NR)
        .take(nc.div_ceil(NR))
        .enumerate()
    {
        let cols = NR.min(nc - q * NR);
        for (p, dst) in panel.chunks_exact_mut(NR).take(kc).enumerate() {
            let src = &b[(p0 + p) * n + j0 + q * NR..][..cols];
            dst[..cols].copy_from_slice(src);
            dst[cols..].fill(0.0);
        }
    }
}

/// Packs `A[i0..i0+mr, p0..p0+kc]` as `[p][MR]` (the `MR` rows' values at depth `p` side by
/// side), with the rows past `mr` zeroed.
fn pack_a(a: &[f32], k: usize, i0: usize, mr: usize, p0: usize, kc: usize, out: &mut [f32]) {
    let out = &mut out[..kc * MR];
    if mr < MR {
        out.fill(0.0);
    }
    for r in 0..mr {
        let src = &a[(i0 + r) * k + p0..][..kc];
        for (dst, &v) in out.chunks_exact_mut(MR).zip(src) {
            dst[r] = v;
        }
    }
}

/// The 8x12 micro-kernel: `tile = A_panel B_panel` over depth `kc`, with `a` packed `[p][8]`
/// and `b` packed `[p][12]`; `tile` is row-major 8x12.
#[target_feature(enable = "neon")]
#[inline]
fn kernel_8x12(kc: usize, a: &[f32], b: &[f32], tile: &mut [f32; MR * NR]) {
    let z = vdupq_n_f32(0.0);
    // acc[r][v] holds C[r, 4v..4v+4]; LLVM keeps all 24 in registers.
    let mut acc = [[z; 3]; MR];
    for (av, bv) in a.chunks_exact(MR).zip(b.chunks_exact(NR)).take(kc) {
        let (a0, a1) = (load(&av[..4]), load(&av[4..]));
        let b = [load(&bv[..4]), load(&bv[4..8]), load(&bv[8..])];
        for v in 0..3 {
            acc[0][v] = vfmaq_laneq_f32::<0>(acc[0][v], b[v], a0);
            acc[1][v] = vfmaq_laneq_f32::<1>(acc[1][v], b[v], a0);
            acc[2][v] = vfmaq_laneq_f32::<2>(acc[2][v], b[v], a0);
            acc[3][v] = vfmaq_laneq_f32::<3>(acc[3][v], b[v], a0);
            acc[4][v] = vfmaq_laneq_f32::<0>(acc[4][v], b[v], a1);
            acc[5][v] = vfmaq_laneq_f32::<1>(acc[5][v], b[v], a1);
            acc[6][v] = vfmaq_laneq_f32::<2>(acc[6][v], b[v], a1);
            acc[7][v] = vfmaq_laneq_f32::<3>(acc[7][v], b[v], a1);
        }
    }
    for (row, acc) in tile.chunks_exact_mut(NR).zip(&acc) {
        for (dst, &v) in row.chunks_exact_mut(LANES).zip(acc) {
            store(dst, v);
        }
    }
}

/// Fully connected layer: `out[b, o] = act(dot(input[b, :], weight[o, :]) + bias[o])`, with
/// `weight` `[n_out, n_in]` (the PyTorch `Linear` layout).
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
        "dense: short slice for batch = {batch}, {n_in} -> {n_out}"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { dense_neon(batch, n_in, n_out, input, weight, bias, act, out) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)]
unsafe fn dense_neon(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    if n_out == 0 {
        return;
    }
    let weight = &weight[..n_out * n_in];
    for (bi, out_row) in out[..batch * n_out].chunks_exact_mut(n_out).enumerate() {
        let x = &input[bi * n_in..][..n_in];
        if n_in == 0 {
            // Empty dot products (and no chunks of zero length to iterate).
            out_row.fill(0.0);
        } else {
            // Four weight rows at a time share every load of `x` (a GEMV is bound by reading
            // the weights, so the point is to stream each weight row once per input row).
            let mut rows = weight.chunks_exact(4 * n_in);
            let mut outs = out_row.chunks_exact_mut(4);
            for (w4, y4) in (&mut rows).zip(&mut outs) {
                y4.copy_from_slice(&dot4(x, w4, n_in));
            }
            let rest = rows.remainder().chunks_exact(n_in);
            for (w, y) in rest.zip(outs.into_remainder()) {
                *y = dot(x, w);
            }
        }
        for (o, y) in out_row.iter_mut().enumerate() {
            *y += bias.map_or(0.0, |b| b[o]);
        }
        epilogue(out_row, 1.0, 0.0, act);
    }
}

/// Horizontal sum of the lanes of `acc[0] + acc[1]`.
#[target_feature(enable = "neon")]
#[inline]
fn reduce2(acc: [float32x4_t; 2]) -> f32 {
    vaddvq_f32(vaddq_f32(acc[0], acc[1]))
}

/// `dot(x, w)` with two vector accumulators, eight elements a step, scalar tail.
#[target_feature(enable = "neon")]
#[inline]
fn dot(x: &[f32], w: &[f32]) -> f32 {
    let w = &w[..x.len()];
    let mut acc = [vdupq_n_f32(0.0); 2];
    let mut xs = x.chunks_exact(2 * LANES);
    let mut ws = w.chunks_exact(2 * LANES);
    for (xv, wv) in (&mut xs).zip(&mut ws) {
        acc[0] = vfmaq_f32(acc[0], load(&xv[..4]), load(&wv[..4]));
        acc[1] = vfmaq_f32(acc[1], load(&xv[4..]), load(&wv[4..]));
    }
    let tail: f32 = xs
        .remainder()
        .iter()
        .zip(ws.remainder())
        .map(|(a, b)| a * b)
        .sum();
    reduce2(acc) + tail
}

/// The dot products of `x` with the four consecutive rows (of length `n`) in `w4`.
#[target_feature(enable = "neon")]
#[inline]
fn dot4(x: &[f32], w4: &[f32], n: usize) -> [f32; 4] {
    let rows = [
        &w4[..n],
        &w4[n..2 * n],
        &w4[2 * n..3 * n],
        &w4[3 * n..4 * n],
    ];
    let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
    let steps = n / (2 * LANES);
    for s in 0..steps {
        let i = s * 2 * LANES;
        let (x0, x1) = (load(&x[i..]), load(&x[i + LANES..]));
        for (acc, row) in acc.iter_mut().zip(&rows) {
            acc[0] = vfmaq_f32(acc[0], x0, load(&row[i..]));
            acc[1] = vfmaq_f32(acc[1], x1, load(&row[i + LANES..]));
        }
    }
    let done = steps * 2 * LANES;
    let mut sums = [0.0f32; 4];
    for ((s, acc), row) in sums.iter_mut().zip(acc).zip(&rows) {
        let tail: f32 = x[done..n]
            .iter()
            .zip(&row[done..])
            .map(|(a, b)| a * b)
            .sum();
        *s = reduce2(acc) + tail;
    }
    sums
}
